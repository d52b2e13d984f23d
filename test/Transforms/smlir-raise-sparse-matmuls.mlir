// RUN: sparse-mlir-opt %s -smlir-raise-sparse-matmuls -split-input-file | FileCheck %s

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// torch-mlir's `adj @ h` on a CSR input: smlir.spmm on the tensor itself,
/// cast back to the matmul's static type.
// CHECK-LABEL: func.func @csr_input_matmul(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<50x40xf32, #sparse>, %[[H:[^:]*]]: tensor<40x32xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[Y:.*]] = smlir.spmm %[[A]], %[[H]] : tensor<50x40xf32, #sparse>, tensor<40x32xf32> -> tensor<?x32xf32>
// CHECK:         %[[R:.*]] = tensor.cast %[[Y]] : tensor<?x32xf32> to tensor<50x32xf32>
// CHECK:         return %[[R]]
func.func @csr_input_matmul(%a: tensor<50x40xf32, #CSR>, %h: tensor<40x32xf32>) -> tensor<50x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %empty = tensor.empty() : tensor<50x32xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<50x32xf32>) -> tensor<50x32xf32>
  %y = linalg.matmul ins(%a, %h : tensor<50x40xf32, #CSR>, tensor<40x32xf32>) outs(%fill : tensor<50x32xf32>) -> tensor<50x32xf32>
  return %y : tensor<50x32xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// An init that is not zero (y += A h): left to sparsification.
// CHECK-LABEL: func.func @negative_accumulating_init(
// CHECK:         linalg.matmul
// CHECK-NOT:     smlir.spmm
func.func @negative_accumulating_init(%a: tensor<8x8xf32, #CSR>, %h: tensor<8x16xf32>, %acc: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = linalg.matmul ins(%a, %h : tensor<8x8xf32, #CSR>, tensor<8x16xf32>) outs(%acc : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// A sparse matrix on the right (h @ adj) is not an SpMM of this form.
// CHECK-LABEL: func.func @negative_csr_on_the_right(
// CHECK:         linalg.matmul
// CHECK-NOT:     smlir.spmm
func.func @negative_csr_on_the_right(%h: tensor<16x8xf32>, %a: tensor<8x8xf32, #CSR>) -> tensor<16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %empty = tensor.empty() : tensor<16x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul ins(%h, %a : tensor<16x8xf32>, tensor<8x8xf32, #CSR>) outs(%fill : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>

/// CSC (a permuted map) has no row kernel here.
// CHECK-LABEL: func.func @negative_csc(
// CHECK:         linalg.matmul
// CHECK-NOT:     smlir.spmm
func.func @negative_csc(%a: tensor<8x8xf32, #CSC>, %h: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %empty = tensor.empty() : tensor<8x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%a, %h : tensor<8x8xf32, #CSC>, tensor<8x16xf32>) outs(%fill : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// f64: the kernel computes in f32.
// CHECK-LABEL: func.func @negative_f64(
// CHECK:         linalg.matmul
// CHECK-NOT:     smlir.spmm
func.func @negative_f64(%a: tensor<8x8xf64, #CSR>, %h: tensor<8x16xf64>) -> tensor<8x16xf64> {
  %zero = arith.constant 0.000000e+00 : f64
  %empty = tensor.empty() : tensor<8x16xf64>
  %fill = linalg.fill ins(%zero : f64) outs(%empty : tensor<8x16xf64>) -> tensor<8x16xf64>
  %y = linalg.matmul ins(%a, %h : tensor<8x8xf64, #CSR>, tensor<8x16xf64>) outs(%fill : tensor<8x16xf64>) -> tensor<8x16xf64>
  return %y : tensor<8x16xf64>
}
