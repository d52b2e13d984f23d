// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.spmm survives parse -> print -> parse.

/// A graph of any size (rows, K, nnz dynamic), 64 features, i32 indices.
// CHECK-LABEL: func.func @spmm_dynamic_graph(
// CHECK-SAME:      %[[P:.*]]: tensor<?xi32>, %[[C:.*]]: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %[[H:.*]]: tensor<?x64xf32>)
// CHECK:         %[[Y:.*]] = smlir.spmm %[[P]], %[[C]], %[[V]], %[[H]] : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
// CHECK:         return %[[Y]]
func.func @spmm_dynamic_graph(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

/// Static rows (5 positions: 4 rows), mixed index widths.
// CHECK-LABEL: func.func @spmm_static_rows_mixed_widths(
// CHECK:         smlir.spmm %{{.*}} : tensor<5xi64>, tensor<?xi32>, tensor<?xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
func.func @spmm_static_rows_mixed_widths(%pos: tensor<5xi64>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<5xi64>, tensor<?xi32>, tensor<?xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A as one CSR tensor (a whole graph's input: static shape, dynamic nnz).
// CHECK-LABEL: func.func @spmm_csr_tensor(
// CHECK-SAME:      %[[A:.*]]: tensor<50x40xf32, #sparse>, %[[H:.*]]: tensor<40x32xf32>)
// CHECK:         smlir.spmm %[[A]], %[[H]] : tensor<50x40xf32, #sparse>, tensor<40x32xf32> -> tensor<?x32xf32>
func.func @spmm_csr_tensor(%a: tensor<50x40xf32, #CSR>, %h: tensor<40x32xf32>) -> tensor<?x32xf32> {
  %y = smlir.spmm %a, %h : tensor<50x40xf32, #CSR>, tensor<40x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
