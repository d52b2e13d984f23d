// RUN: sparse-mlir-opt %s -smlir-raise-row-gathers -split-input-file | FileCheck %s

// torch-mlir's aten.embedding (a generic of tensor.extract) on a CSR or n:m
// table becomes smlir.gather_rows; any other body or table is left alone.

#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// CHECK-LABEL: func.func @embedding_csr(
// CHECK-SAME:      %[[T:.*]]: tensor<64x16xf32, #{{.*}}>, %[[I:.*]]: tensor<8xi64>)
// CHECK:         %[[R:.*]] = smlir.gather_rows %[[T]][%[[I]]] : tensor<64x16xf32, #{{.*}}>, tensor<8xi64> -> tensor<8x16xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @embedding_csr(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %c64 = arith.constant 64 : index
  %c0_i64 = arith.constant 0 : i64
  %init = tensor.empty() : tensor<8x16xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xi64>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 1 : index
    %below = arith.cmpi slt, %row, %c64 : index
    cf.assert %below, "index must be smaller than dim size"
    %above = arith.cmpi sge, %in, %c0_i64 : i64
    cf.assert %above, "index must be larger or equal to 0"
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32, #csr>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#nm = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]) }>

// CHECK-LABEL: func.func @embedding_nm_batch(
// CHECK:         smlir.gather_rows %{{.*}}[%{{.*}}] : tensor<64x16xf32, #{{.*}}>, tensor<2x5xi32> -> tensor<2x5x16xf32>
// CHECK-NOT:     linalg.generic
func.func @embedding_nm_batch(%table: tensor<64x16xf32, #nm>, %ids: tensor<2x5xi32>) -> tensor<2x5x16xf32> {
  %init = tensor.empty() : tensor<2x5x16xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids : tensor<2x5xi32>) outs(%init : tensor<2x5x16xf32>) {
  ^bb0(%in: i32, %out: f32):
    %row = arith.index_cast %in : i32 to index
    %col = linalg.index 2 : index
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32, #nm>
    linalg.yield %v : f32
  } -> tensor<2x5x16xf32>
  return %rows : tensor<2x5x16xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>

// A dense table: torch-mlir's form stays.
// CHECK-LABEL: func.func @dense_table(
// CHECK-NOT:     smlir.gather_rows
// CHECK:         linalg.generic
func.func @dense_table(%table: tensor<64x16xf32>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %init = tensor.empty() : tensor<8x16xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xi64>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// More than a lookup (the value is scaled): left alone.
// CHECK-LABEL: func.func @scaled_lookup(
// CHECK-NOT:     smlir.gather_rows
// CHECK:         linalg.generic
func.func @scaled_lookup(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %two = arith.constant 2.0 : f32
  %init = tensor.empty() : tensor<8x16xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xi64>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32, #csr>
    %s = arith.mulf %v, %two : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d1)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// Columns picked by the indices (table[row, ids[j]]): not a row lookup.
// CHECK-LABEL: func.func @column_lookup(
// CHECK-NOT:     smlir.gather_rows
// CHECK:         linalg.generic
func.func @column_lookup(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<64x8xf32> {
  %init = tensor.empty() : tensor<64x8xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xi64>) outs(%init : tensor<64x8xf32>) {
  ^bb0(%in: i64, %out: f32):
    %col = arith.index_cast %in : i64 to index
    %row = linalg.index 0 : index
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32, #csr>
    linalg.yield %v : f32
  } -> tensor<64x8xf32>
  return %rows : tensor<64x8xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#csc = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>

// A CSC table stores columns, not rows: left to the dense read.
// CHECK-LABEL: func.func @csc_table(
// CHECK-NOT:     smlir.gather_rows
// CHECK:         linalg.generic
func.func @csc_table(%table: tensor<64x16xf32, #csc>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %init = tensor.empty() : tensor<8x16xf32>
  %rows = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xi64>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<64x16xf32, #csc>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}
