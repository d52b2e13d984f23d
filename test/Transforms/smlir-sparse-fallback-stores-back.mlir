// RUN: sparse-mlir-opt %s -smlir-sparse-fallback -split-input-file -verify-diagnostics | FileCheck %s

// A fallen-back weight that another reader still reads sparse is stored back
// from the dense argument the caller passes. sparse_tensor.convert cannot
// do that for n:m: it drops zeros (a group with fewer than n nonzeros then
// corrupts the structured level) and stages through a COO buffer whose
// coordinates, row indices included, have the encoding's crdWidth (8 bits:
// rows >= 256 wrapped, a GPT-2 tied embedding / LM head read garbage). n:m
// is packed on buffers instead (exactly n per group, the nonzeros padded
// with the lowest-index zeros) and assembled.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// 260 rows x 2 groups x 2 entries: i8 in-group positions, one parallel
/// iteration per (row, group), no convert; the smlir.linear reads the
/// assembled tensor, the transpose the dense argument.
// CHECK-LABEL: func.func @nm_weight_more_than_256_rows(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<260x8xf32> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "wte.weight", smlir.weight},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>)
// CHECK-NOT:     sparse_tensor.convert
// CHECK:         %[[WB:.*]] = bufferization.to_buffer %[[W]] read_only : tensor<260x8xf32> to memref<260x8xf32>
// CHECK-DAG:     %[[CRD:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1040xi8>
// CHECK-DAG:     %[[VAL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1040xf32>
// CHECK-DAG:     %[[C260:.*]] = arith.constant 260 : index
// CHECK:         scf.parallel ({{.*}}) = ({{.*}}) to (%[[C260]], %{{.*}})
// CHECK:           arith.cmpf une
// CHECK:           scf.if
// CHECK:             %[[K:.*]] = arith.index_cast %{{.*}} : index to i8
// CHECK:             memref.store %[[K]], %[[CRD]][%[[AT:.*]]] : memref<1040xi8>
// CHECK:             %[[V:.*]] = memref.load %[[WB]]
// CHECK:             memref.store %[[V]], %[[VAL]][%[[AT]]] : memref<1040xf32>
// CHECK:         %[[CT:.*]] = bufferization.to_tensor %[[CRD]] restrict writable : memref<1040xi8> to tensor<1040xi8>
// CHECK:         %[[VT:.*]] = bufferization.to_tensor %[[VAL]] restrict writable : memref<1040xf32> to tensor<1040xf32>
// CHECK:         %[[S:.*]] = sparse_tensor.assemble (%[[CT]]), %[[VT]] : (tensor<1040xi8>), tensor<1040xf32> to tensor<260x8xf32, #{{.*}}>
// CHECK:         smlir.linear %[[X]], %[[S]] : tensor<3x8xf32>, tensor<260x8xf32, #{{.*}}> -> tensor<3x260xf32>
// CHECK:         linalg.transpose ins(%[[W]] : tensor<260x8xf32>)
// CHECK-NOT:     sparse_tensor.convert
func.func @nm_weight_more_than_256_rows(%w: tensor<260x8xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "wte.weight", smlir.weight}, %x: tensor<3x8xf32>) -> (tensor<3x260xf32>, tensor<8x260xf32>) {
  %r = smlir.linear %x, %w : tensor<3x8xf32>, tensor<260x8xf32, #NM24> -> tensor<3x260xf32>
  %e = tensor.empty() : tensor<8x260xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'wte.weight' stored as 2:4; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<260x8xf32, #NM24>) outs(%e : tensor<8x260xf32>) permutation = [1, 0]
  return %r, %t : tensor<3x260xf32>, tensor<8x260xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Rows sharing a pattern (rows = 4): one iteration per (row group, group),
/// the union of the 4 rows' nonzeros decides, every row stores the same
/// positions (4 coordinate stores per kept position).
// CHECK-LABEL: func.func @nm_rows_share_positions(
// CHECK:         scf.parallel
// CHECK-COUNT-4:   arith.cmpf une
// CHECK:           scf.if
// CHECK-COUNT-4:     memref.store %{{.*}}, %{{.*}} : memref<32xi8>
// CHECK:         sparse_tensor.assemble {{.*}} : (tensor<32xi8>), tensor<32xf32> to tensor<8x8xf32, #{{.*}}>
// CHECK-NOT:     sparse_tensor.convert
func.func @nm_rows_share_positions(%w: tensor<8x8xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 4>, smlir.tensor_name = "fc.weight"}) -> (tensor<8x8xf32, #NM24>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as 2:4 (4 rows); computing it densely}}
  %t = linalg.transpose ins(%w : tensor<8x8xf32, #NM24>) outs(%e : tensor<8x8xf32>) permutation = [1, 0]
  return %w, %t : tensor<8x8xf32, #NM24>, tensor<8x8xf32>
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 8 }>

/// BSR's convert stages through COO (its level order is not the dense
/// one), whose 8-bit coordinates would hold the 257 block rows: convert at
/// index width first, then narrow (same level order, no staging).
// CHECK-DAG:   #[[$WIDE:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 4 : compressed, d0 mod 4 : dense, d1 mod 4 : dense) }>
// CHECK-DAG:   #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 4 : compressed, d0 mod 4 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 8 }>
// CHECK-LABEL: func.func @bsr_converts_at_index_width_first(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<1028x8xf32> {smlir.storage = #smlir.storage<dense, reason = {{.*}}>})
// CHECK-NEXT:    %[[WIDE:.*]] = sparse_tensor.convert %[[W]] : tensor<1028x8xf32> to tensor<1028x8xf32, #[[$WIDE]]>
// CHECK-NEXT:    %[[S:.*]] = sparse_tensor.convert %[[WIDE]] : tensor<1028x8xf32, #[[$WIDE]]> to tensor<1028x8xf32, #[[$BSR]]>
// CHECK:         return %[[S]]
func.func @bsr_converts_at_index_width_first(%w: tensor<1028x8xf32, #BSR>) -> (tensor<1028x8xf32, #BSR>, tensor<8x1028xf32>) {
  %e = tensor.empty() : tensor<8x1028xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor '<argument>' stored as sparse; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<1028x8xf32, #BSR>) outs(%e : tensor<8x1028xf32>) permutation = [1, 0]
  return %w, %t : tensor<1028x8xf32, #BSR>, tensor<8x1028xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 8 }>

/// CSR's level order is the dense one: no staging, one convert.
// CHECK-LABEL: func.func @negative_csr_converts_directly(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<300x8xf32> {smlir.storage = #smlir.storage<dense, reason = {{.*}}>})
// CHECK-NEXT:    %[[S:.*]] = sparse_tensor.convert %[[W]] : tensor<300x8xf32> to tensor<300x8xf32, #{{.*}}>
// CHECK-NOT:     sparse_tensor.convert
// CHECK:         return %[[S]]
func.func @negative_csr_converts_directly(%w: tensor<300x8xf32, #CSR>) -> (tensor<300x8xf32, #CSR>, tensor<8x300xf32>) {
  %e = tensor.empty() : tensor<8x300xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor '<argument>' stored as sparse; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<300x8xf32, #CSR>) outs(%e : tensor<8x300xf32>) permutation = [1, 0]
  return %w, %t : tensor<300x8xf32, #CSR>, tensor<8x300xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// rows = 4 not dividing the 6 rows: 2 row groups, the last one of 2 rows.
/// Its line r is min(line0 + r, 5): the lines past the end repeat line 5
/// (same union, same stores), so nothing is read or written out of bounds.
// CHECK-LABEL: func.func @nm_rows_partial_last_group(
// CHECK:         scf.parallel
// CHECK:           arith.divui
// CHECK:           arith.remui
// CHECK:           %[[LAST:.*]] = arith.subi
// CHECK-COUNT-4:   arith.minui %{{.*}}, %[[LAST]] : index
// CHECK:         sparse_tensor.assemble {{.*}} : (tensor<24xi8>), tensor<24xf32> to tensor<6x8xf32, #{{.*}}>
func.func @nm_rows_partial_last_group(%w: tensor<6x8xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 4>, smlir.tensor_name = "fc.weight"}) -> (tensor<6x8xf32, #NM24>, tensor<8x6xf32>) {
  %e = tensor.empty() : tensor<8x6xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as 2:4 (4 rows); computing it densely}}
  %t = linalg.transpose ins(%w : tensor<6x8xf32, #NM24>) outs(%e : tensor<8x6xf32>) permutation = [1, 0]
  return %w, %t : tensor<6x8xf32, #NM24>, tensor<8x6xf32>
}
