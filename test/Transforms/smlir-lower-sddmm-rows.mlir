// RUN: sparse-mlir-opt %s -smlir-lower-sddmm-rows -split-input-file | FileCheck %s

/// G = 8 entries at a time at 16 lanes, scaled, written into the caller's
/// buffer (no new buffer, no copy): tiles of 32 rows, column blocks of
/// 32768 / (4 * 16) = 512 columns where the tile reuses b's columns;
/// unblocked tiles prefetch b's rows 2 groups (16 entries) ahead; the
/// group's 8 products summed by a transpose tree into one vector<8>; the
/// row's last entries one at a time.
// CHECK-LABEL: func.func @sddmm_rows_into_callers_buffer(
// CHECK-SAME:      %[[OUT:[^:]*]]: memref<?x?xf32>)
// CHECK-NOT:     smlir.sddmm_rows
// CHECK-NOT:     bufferization.materialize_in_destination
// CHECK-NOT:     memref.alloc(
// CHECK:         smlir.kernel "sddmm_rows_csr_24x40x16_g8w16_scaled" {
// CHECK:           scf.parallel
// CHECK:             memref.alloca() : memref<32xindex>
// CHECK:             %[[REUSED:.*]] = arith.cmpi uge
// CHECK:             %[[C512:.*]] = arith.constant 512 : index
// CHECK:             %[[BLOCK:.*]] = arith.select %[[REUSED]], %[[C512]], %{{.*}} : index
// CHECK:             scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[BLOCK]]
// CHECK:               scf.if %[[REUSED]] -> (index) {
// CHECK:                 scf.while
// CHECK-NOT:               memref.prefetch
// CHECK:                   vector.shuffle
// CHECK:                   vector.extract_strided_slice %{{.*}} {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK:                   vector.load %{{.*}}[%{{.*}}] : memref<?xf32>, vector<8xf32>
// CHECK:                   vector.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x?xf32>, vector<8xf32>
// CHECK:               } else {
// CHECK:                 scf.while
// CHECK:                   %[[C16:.*]] = arith.constant 16 : index
// CHECK:                   arith.minui
// CHECK:                   memref.prefetch %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], read, locality<3>, data : memref<?x40x16xf32>
// CHECK:               scf.while
// CHECK:                 vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// CHECK:                 memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x?xf32>
// CHECK:         return
func.func @sddmm_rows_into_callers_buffer(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x24x16xf32>, %b: tensor<?x40x16xf32>, %out: memref<?x?xf32>) {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b scaled {lanes = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x24x16xf32>, tensor<?x40x16xf32> -> tensor<?x?xf32>
  bufferization.materialize_in_destination %s in restrict writable %out : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// -----

/// group = 1: every entry one at a time (no transpose tree); D = 20 at 16
/// lanes: the second chunk of each row read masked past D; returned, so
/// a new [B, nnz] buffer.
// CHECK-LABEL: func.func @sddmm_rows_per_entry_new_buffer(
// CHECK-SAME:      %[[V:[^:]*]]: tensor<?xf32>, %[[A:[^:]*]]: tensor<?x8x20xf32>
// CHECK-DAG:     %[[VB:.*]] = bufferization.to_buffer %[[V]] read_only
// CHECK-DAG:     %[[AB:.*]] = bufferization.to_buffer %[[A]] read_only
// CHECK:         %[[B:.*]] = memref.dim %[[AB]], %{{.*}} : memref<?x8x20xf32>
// CHECK:         %[[NNZ:.*]] = memref.dim %[[VB]], %{{.*}} : memref<?xf32>
// CHECK:         %[[Y:.*]] = memref.alloc(%[[B]], %[[NNZ]]) {alignment = 64 : i64} : memref<?x?xf32>
// CHECK:         smlir.kernel "sddmm_rows_csr_8x12x20_g1w16"
// CHECK-NOT:       vector.shuffle
// CHECK-NOT:       memref.prefetch
// CHECK:           vector.maskedload
// CHECK:           vector.reduction <add>
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[Y]] restrict writable
// CHECK:         return %[[R]]
func.func @sddmm_rows_per_entry_new_buffer(%pos: tensor<?xi64>, %crd: tensor<?xi64>, %values: tensor<?xf32>, %a: tensor<?x8x20xf32>, %b: tensor<?x12x20xf32>) -> tensor<?x?xf32> {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {group = 1 : i64, lanes = 16 : i64} : tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?x8x20xf32>, tensor<?x12x20xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// prefetch = 0: one group loop, no branch on the tile's reuse.
// CHECK-LABEL: func.func @sddmm_rows_no_prefetch(
// CHECK:         smlir.kernel "sddmm_rows_csr_8x12x8_g4w8"
// CHECK-NOT:       scf.if %{{.*}} -> (index)
// CHECK-NOT:       memref.prefetch
// CHECK:           vector.shuffle
// CHECK:         return
func.func @sddmm_rows_no_prefetch(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x8x8xf32>, %b: tensor<?x12x8xf32>) -> tensor<?x?xf32> {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {group = 4 : i64, prefetch = 0 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x8x8xf32>, tensor<?x12x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// Rows and columns dynamic: the tile count, the rows' bound and b's
/// column count read from the buffers.
// CHECK-LABEL: func.func @sddmm_rows_dynamic_shape(
// CHECK:         smlir.kernel "sddmm_rows_csr_dynxdynx8_g8w8"
// CHECK:           memref.dim %{{.*}} : memref<?x?x8xf32>
// CHECK:           arith.ceildivui
// CHECK:         return
func.func @sddmm_rows_dynamic_shape(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x?x8xf32>, %b: tensor<?x?x8xf32>) -> tensor<?x?xf32> {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}
