// RUN: sparse-mlir-opt %s -smlir-lower-row-gathers -split-input-file -verify-diagnostics | FileCheck %s

// Per index: its range asserted, the result row zero-filled, then the
// table row's stored entries written at their columns (CSR: the row's
// positions; n:m: D / m * n entries a row, column = group * m + coordinate).

#csr = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @gather_csr(
// CHECK-SAME:      %[[T:.*]]: tensor<64x16xf32, #{{.*}}>, %[[I:.*]]: tensor<8xi64>)
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[T]]
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %[[T]] {level = 1 : index} {{.*}} to memref<?xi32>
// CHECK-DAG:     %[[POS:.*]] = sparse_tensor.positions %[[T]] {level = 1 : index} {{.*}} to memref<?xi32>
// CHECK:         %[[IDS:.*]] = bufferization.to_buffer %[[I]] read_only
// CHECK:         %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
// CHECK:         scf.for %[[TOK:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           %[[ID:.*]] = memref.load %[[IDS]][%[[TOK]]] : memref<8xi64>
// CHECK:           arith.cmpi sge, %[[ID]]
// CHECK:           arith.cmpi slt, %[[ID]]
// CHECK:           cf.assert %{{.*}}, "embedding index out of range of the sparse table"
// CHECK:           %[[ROW:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:           scf.for %[[D:.*]] =
// CHECK:             memref.store %{{.*}}, %[[Y]][%[[TOK]], %[[D]]]
// CHECK:           memref.load %[[POS]][%[[ROW]]]
// CHECK:           scf.for %[[P:.*]] =
// CHECK:             %[[C:.*]] = memref.load %[[CRD]][%[[P]]]
// CHECK:             %[[COL:.*]] = arith.index_castui %[[C]] : i32 to index
// CHECK:             %[[V:.*]] = memref.load %[[VAL]][%[[P]]]
// CHECK:             memref.store %[[V]], %[[Y]][%[[TOK]], %[[COL]]]
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[Y]] restrict writable
// CHECK:         return %[[R]]
func.func @gather_csr(%table: tensor<64x16xf32, #csr>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #csr>, tensor<8xi64> -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}

// -----

#nm = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// Indices of rank 2 run as one loop over both buffers collapsed.
// CHECK-LABEL: func.func @gather_nm(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 2 : index}
// CHECK:         %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x5x16xbf16>
// CHECK:         memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<2x5xi32> into memref<10xi32>
// CHECK:         %[[Y2:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0, 1], [2]] : memref<2x5x16xbf16> into memref<10x16xbf16>
// CHECK:         scf.for
// CHECK:           %[[LO:.*]] = arith.muli %{{.*}}, %c8
// CHECK:           scf.for %[[P:.*]] = %[[LO]] to
// CHECK:             %[[Q:.*]] = arith.subi %[[P]], %[[LO]]
// CHECK:             %[[G:.*]] = arith.divui %[[Q]], %c2
// CHECK:             %[[K:.*]] = arith.muli %[[G]], %c4
// CHECK:             %[[COL:.*]] = arith.addi %[[K]],
// CHECK:             memref.store %{{.*}}, %[[Y2]][%{{.*}}, %[[COL]]] : memref<10x16xbf16>
// CHECK-NOT:     smlir.gather_rows
func.func @gather_nm(%table: tensor<64x16xbf16, #nm>, %ids: tensor<2x5xi32>) -> tensor<2x5x16xbf16> {
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xbf16, #nm>, tensor<2x5xi32> -> tensor<2x5x16xbf16>
  return %rows : tensor<2x5x16xbf16>
}

// -----

#coo = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>

func.func @coo_table(%table: tensor<64x16xf32, #coo>, %ids: tensor<8xi64>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'smlir.gather_rows' op has no lowering for a table 'tensor<64x16xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>>' and indices 'tensor<8xi64>' (CSR or n:m tables, indices of rank >= 1)}}
  %rows = smlir.gather_rows %table[%ids] : tensor<64x16xf32, #coo>, tensor<8xi64> -> tensor<8x16xf32>
  return %rows : tensor<8x16xf32>
}
