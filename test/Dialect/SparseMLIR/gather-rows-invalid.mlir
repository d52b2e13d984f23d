// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.gather_rows verifier message.

func.func @dense_table(%table: tensor<64x16xf32>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'smlir.gather_rows' op expects a sparse 2-d table, got 'tensor<64x16xf32>'}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32>, tensor<8xi64> -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @sparse_indices(%table: tensor<64x16xf32, #csr>, %ids: tensor<8x8xi64, #csr>) -> tensor<8x8x16xf32> {
  // expected-error@+1 {{'smlir.gather_rows' op expects dense indices and result}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8x8xi64, #csr> -> tensor<8x8x16xf32>
  return %rows : tensor<8x8x16xf32>
}

// -----

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @float_indices(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'smlir.gather_rows' op expects integer indices, got 'f32'}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8xf32> -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @element_type(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x16xf16> {
  // expected-error@+1 {{'smlir.gather_rows' op expects the table's element type 'f32' in the result, got 'f16'}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8xi64> -> tensor<8x16xf16>
  return %rows : tensor<8x16xf16>
}

// -----

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @result_shape(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'smlir.gather_rows' op expects a result of the indices' shape followed by the table's row length (16), got 'tensor<8x32xf32>'}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8xi64> -> tensor<8x32xf32>
  return %rows : tensor<8x32xf32>
}
