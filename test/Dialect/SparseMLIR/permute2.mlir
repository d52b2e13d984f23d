// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.permute2 survives parse -> print -> parse.

// CHECK-LABEL: func.func @permute2_16(
// CHECK-SAME:      %[[L:.*]]: vector<16xf32>, %[[I:.*]]: vector<16xi32>, %[[H:.*]]: vector<16xf32>)
// CHECK:         %[[X:.*]] = smlir.permute2 %[[L]], %[[I]], %[[H]] : vector<16xf32>, vector<16xi32>
// CHECK:         return %[[X]]
func.func @permute2_16(%low: vector<16xf32>, %index: vector<16xi32>, %high: vector<16xf32>) -> vector<16xf32> {
  %x = smlir.permute2 %low, %index, %high : vector<16xf32>, vector<16xi32>
  return %x : vector<16xf32>
}

// -----

// CHECK-LABEL: func.func @permute2_8(
// CHECK:         smlir.permute2 %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>, vector<8xi32>
func.func @permute2_8(%low: vector<8xf32>, %index: vector<8xi32>, %high: vector<8xf32>) -> vector<8xf32> {
  %x = smlir.permute2 %low, %index, %high : vector<8xf32>, vector<8xi32>
  return %x : vector<8xf32>
}
