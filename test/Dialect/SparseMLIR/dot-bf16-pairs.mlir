// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.dot_bf16_pairs survives parse -> print -> parse.

// CHECK-LABEL: func.func @dot_bf16_pairs_16(
// CHECK-SAME:      %[[ACC:.*]]: vector<16xf32>, %[[A:.*]]: vector<32xbf16>, %[[B:.*]]: vector<32xbf16>)
// CHECK:         %[[Y:.*]] = smlir.dot_bf16_pairs %[[ACC]], %[[A]], %[[B]] : vector<16xf32>, vector<32xbf16>
// CHECK:         return %[[Y]]
func.func @dot_bf16_pairs_16(%acc: vector<16xf32>, %a: vector<32xbf16>, %b: vector<32xbf16>) -> vector<16xf32> {
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<16xf32>, vector<32xbf16>
  return %y : vector<16xf32>
}

// -----

// CHECK-LABEL: func.func @dot_bf16_pairs_4(
// CHECK:         smlir.dot_bf16_pairs %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>, vector<8xbf16>
func.func @dot_bf16_pairs_4(%acc: vector<4xf32>, %a: vector<8xbf16>, %b: vector<8xbf16>) -> vector<4xf32> {
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<4xf32>, vector<8xbf16>
  return %y : vector<4xf32>
}
