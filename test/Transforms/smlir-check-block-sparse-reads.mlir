// RUN: sparse-mlir-opt %s -smlir-check-block-sparse-reads -split-input-file -verify-diagnostics | FileCheck %s

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// An n:m weight as a matmul's left operand (its dimensions in order): left alone.
// CHECK-LABEL: func.func @nm_left_operand(
// CHECK:         linalg.matmul
func.func @nm_left_operand(%w: tensor<64x32xf32, #NM24>, %x: tensor<32x8xf32>, %acc: tensor<64x8xf32>) -> tensor<64x8xf32> {
  %y = linalg.matmul ins(%w, %x : tensor<64x32xf32, #NM24>, tensor<32x8xf32>) outs(%acc : tensor<64x8xf32>) -> tensor<64x8xf32>
  return %y : tensor<64x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// A CSR tensor (a permutation dim-to-level map) may be read transposed.
// CHECK-LABEL: func.func @csr_transposed(
// CHECK:         linalg.transpose
func.func @csr_transposed(%w: tensor<64x32xf32, #CSR>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %t = linalg.transpose ins(%w : tensor<64x32xf32, #CSR>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  return %t : tensor<32x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// n:m read transposed: an error (upstream sparse-reinterpret-map crashes on it).
func.func @nm_transposed(%w: tensor<64x32xf32, #NM24>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  // expected-error @below {{reads operand 0 (an n:m tensor}}
  %t = linalg.transpose ins(%w : tensor<64x32xf32, #NM24>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  return %t : tensor<32x64xf32>
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense) }>

/// BSR read through a reordering map (a matmul's right operand): upstream takes it, left alone.
// CHECK-LABEL: func.func @bsr_right_operand(
// CHECK:         linalg.matmul
func.func @bsr_right_operand(%x: tensor<8x32xf32>, %w: tensor<32x64xf32, #BSR>, %acc: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x32xf32>, tensor<32x64xf32, #BSR>) outs(%acc : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
