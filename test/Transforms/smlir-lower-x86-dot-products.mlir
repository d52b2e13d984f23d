// RUN: sparse-mlir-opt %s -smlir-lower-x86-dot-products -split-input-file | FileCheck %s

// smlir.dot_bf16_pairs becomes AVX-512 BF16's vdpbf16ps: 16 f32 lanes the
// 512-bit form, 8 and 4 lanes the AVX-512VL ones, operands as they are
// (LLVM 22: <16 x float>, <32 x bfloat>, <32 x bfloat>).

// CHECK-LABEL: func.func @dot_bf16_pairs_16(
// CHECK-SAME:      %[[ACC:.*]]: vector<16xf32>, %[[A:.*]]: vector<32xbf16>, %[[B:.*]]: vector<32xbf16>)
// CHECK:         %[[Y:.*]] = llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%[[ACC]], %[[A]], %[[B]]) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK-NOT:     smlir.dot_bf16_pairs
// CHECK:         return %[[Y]]
func.func @dot_bf16_pairs_16(%acc: vector<16xf32>, %a: vector<32xbf16>, %b: vector<32xbf16>) -> vector<16xf32> {
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<16xf32>, vector<32xbf16>
  return %y : vector<16xf32>
}

// -----

// CHECK-LABEL: func.func @dot_bf16_pairs_8(
// CHECK:         llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.256"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xf32>, vector<16xbf16>, vector<16xbf16>) -> vector<8xf32>
func.func @dot_bf16_pairs_8(%acc: vector<8xf32>, %a: vector<16xbf16>, %b: vector<16xbf16>) -> vector<8xf32> {
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<8xf32>, vector<16xbf16>
  return %y : vector<8xf32>
}

// -----

// CHECK-LABEL: func.func @dot_bf16_pairs_4(
// CHECK:         llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.128"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<4xf32>, vector<8xbf16>, vector<8xbf16>) -> vector<4xf32>
func.func @dot_bf16_pairs_4(%acc: vector<4xf32>, %a: vector<8xbf16>, %b: vector<8xbf16>) -> vector<4xf32> {
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<4xf32>, vector<8xbf16>
  return %y : vector<4xf32>
}
