// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.gather_rows survives parse -> print -> parse.

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// CHECK-LABEL: func.func @gather_csr(
// CHECK-SAME:      %[[T:.*]]: tensor<64x16xf32, #{{.*}}>, %[[I:.*]]: tensor<8xi64>)
// CHECK:         %[[R:.*]] = smlir.gather_rows %[[T]][%[[I]]] : tensor<64x16xf32, #{{.*}}>, tensor<8xi64> -> tensor<8x16xf32>
// CHECK:         return %[[R]]
func.func @gather_csr(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8xi64> -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#nm = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]) }>

// CHECK-LABEL: func.func @gather_nm_2d_indices(
// CHECK:         smlir.gather_rows %{{.*}}[%{{.*}}] : tensor<64x16xbf16, #{{.*}}>, tensor<2x5xi32> -> tensor<2x5x16xbf16>
func.func @gather_nm_2d_indices(%table: tensor<64x16xbf16, #nm>, %ids: tensor<2x5xi32>) -> tensor<2x5x16xbf16> {
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xbf16, #nm>, tensor<2x5xi32> -> tensor<2x5x16xbf16>
  return %rows : tensor<2x5x16xbf16>
}
