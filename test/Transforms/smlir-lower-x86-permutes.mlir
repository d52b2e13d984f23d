// RUN: sparse-mlir-opt %s -smlir-lower-x86-permutes -split-input-file | FileCheck %s

// smlir.permute2 becomes AVX-512's vpermi2ps: 16 lanes the 512-bit form,
// 8 lanes the 256-bit one (AVX-512VL), operands as they are.

// CHECK-LABEL: func.func @permute2_16(
// CHECK-SAME:      %[[L:.*]]: vector<16xf32>, %[[I:.*]]: vector<16xi32>, %[[H:.*]]: vector<16xf32>)
// CHECK:         %[[X:.*]] = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.ps.512"(%[[L]], %[[I]], %[[H]]) : (vector<16xf32>, vector<16xi32>, vector<16xf32>) -> vector<16xf32>
// CHECK-NOT:     smlir.permute2
// CHECK:         return %[[X]]
func.func @permute2_16(%low: vector<16xf32>, %index: vector<16xi32>, %high: vector<16xf32>) -> vector<16xf32> {
  %x = smlir.permute2 %low, %index, %high : vector<16xf32>, vector<16xi32>
  return %x : vector<16xf32>
}

// -----

// CHECK-LABEL: func.func @permute2_8(
// CHECK:         llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.ps.256"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xf32>, vector<8xi32>, vector<8xf32>) -> vector<8xf32>
func.func @permute2_8(%low: vector<8xf32>, %index: vector<8xi32>, %high: vector<8xf32>) -> vector<8xf32> {
  %x = smlir.permute2 %low, %index, %high : vector<8xf32>, vector<8xi32>
  return %x : vector<8xf32>
}
