// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.sampled_matmul survives parse -> print -> parse in each of its
// forms: default (identity) layouts are elided, transposed ones and
// `scaled` are printed.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A weight's gradient dW = dy^T x: dy [T, N] read transposed, T dynamic.
// CHECK-LABEL: func.func @weight_gradient_dynamic_tokens(
// CHECK-SAME:      %[[DY:.*]]: tensor<?x32xf32>, %[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<32x64xf32, #[[$CSR:.*]]>)
// CHECK:         %[[DW:.*]] = smlir.sampled_matmul %[[DY]], %[[X]], %[[W]] lhs <transposed> : tensor<?x32xf32>, tensor<?x64xf32>, tensor<32x64xf32, #[[$CSR]]> -> tensor<32x64xf32, #[[$CSR]]>
// CHECK:         return %[[DW]]
func.func @weight_gradient_dynamic_tokens(%dy: tensor<?x32xf32>, %x: tensor<?x64xf32>, %w: tensor<32x64xf32, #CSR>) -> tensor<32x64xf32, #CSR> {
  %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed> : tensor<?x32xf32>, tensor<?x64xf32>, tensor<32x64xf32, #CSR> -> tensor<32x64xf32, #CSR>
  return %dw : tensor<32x64xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// Masked attention scores (q k^T) .* mask: k read transposed, scaled.
// CHECK-LABEL: func.func @scores_scaled(
// CHECK:         smlir.sampled_matmul %{{.*}}, %{{.*}}, %{{.*}} rhs <transposed> scaled : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32, #{{.*}}> -> tensor<16x16xf32, #{{.*}}>
func.func @scores_scaled(%q: tensor<16x8xf32>, %k: tensor<16x8xf32>, %mask: tensor<16x16xf32, #CSR>) -> tensor<16x16xf32, #CSR> {
  %s = smlir.sampled_matmul %q, %k, %mask rhs <transposed> scaled : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32, #CSR> -> tensor<16x16xf32, #CSR>
  return %s : tensor<16x16xf32, #CSR>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Explicit identity layouts are elided; n:m patterns are accepted.
// CHECK-LABEL: func.func @explicit_identity_is_elided_nm(
// CHECK:         smlir.sampled_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<4x16xf32>, tensor<8x16xf32, #{{.*}}> -> tensor<8x16xf32, #{{.*}}>
func.func @explicit_identity_is_elided_nm(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>, %s: tensor<8x16xf32, #NM24>) -> tensor<8x16xf32, #NM24> {
  %r = smlir.sampled_matmul %a, %b, %s lhs <identity> rhs <identity> : tensor<8x4xf32>, tensor<4x16xf32>, tensor<8x16xf32, #NM24> -> tensor<8x16xf32, #NM24>
  return %r : tensor<8x16xf32, #NM24>
}
