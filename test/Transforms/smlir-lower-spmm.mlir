// RUN: sparse-mlir-opt %s -smlir-lower-spmm="lanes=16" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not sparse-mlir-opt %s -smlir-lower-spmm="lanes=7" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not sparse-mlir-opt %s -smlir-lower-spmm="entries=5" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// OPTIONS: error: smlir-lower-spmm: lanes must be 4, 8, 16 or 32, vectors 1 to 16, entries 1 to 4 (or 0: by the feature count), chunks 1 to 4096 and prefetch 0 to 1024
// RUN: not sparse-mlir-opt %s -smlir-lower-spmm="chunks=x" -split-input-file 2>&1 | FileCheck %s --check-prefix=UNPARSED
// UNPARSED: smlir-lower-spmm

/// F = 64 at 16 lanes: the whole row in 4 vectors, 2 entries at a time (8
/// accumulators), no masks; rows split into 64 chunks of equal nnz found
/// by binary searches (scf.while) over the positions.
// CHECK-LABEL: func.func @spmm_f64_whole_row_in_registers(
// CHECK-SAME:      %[[P:[^:]*]]: tensor<?xi32>, %[[C:[^:]*]]: tensor<?xi32>, %[[V:[^:]*]]: tensor<?xf32>, %[[H:[^:]*]]: tensor<?x64xf32>)
// CHECK-NOT:     smlir.spmm
// CHECK-DAG:     %[[PB:.*]] = bufferization.to_buffer %[[P]] read_only : tensor<?xi32> to memref<?xi32>
// CHECK-DAG:     %[[HB:.*]] = bufferization.to_buffer %[[H]] read_only : tensor<?x64xf32> to memref<?x64xf32>
// CHECK:         %[[DIM:.*]] = memref.dim %[[PB]]
// CHECK:         %[[ROWS:.*]] = arith.subi %[[DIM]]
// CHECK:         %[[Y:.*]] = memref.alloc(%[[ROWS]]) {alignment = 64 : i64} : memref<?x64xf32>
// CHECK:         smlir.kernel "spmm_csr_features64" {
// CHECK:           scf.parallel
// CHECK:             scf.while
// CHECK:             scf.while
// CHECK:             scf.for
// CHECK:               scf.for %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                 vector.load %[[HB]][%{{.*}}, %{{.*}}] : memref<?x64xf32>, vector<16xf32>
// CHECK:                 vector.fma
// CHECK-NOT:       vector.maskedload
// CHECK-NOT:       memref.prefetch
// CHECK:           vector.store %{{.*}}, %[[Y]][%{{.*}}, %{{.*}}] : memref<?x64xf32>, vector<16xf32>
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[Y]] restrict writable : memref<?x64xf32> to tensor<?x64xf32>
// CHECK:         return %[[R]]
func.func @spmm_f64_whole_row_in_registers(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

/// F = 20: two vectors, the second masked past F (loads and the store).
// CHECK-LABEL: func.func @spmm_f20_masked_tail(
// CHECK:         smlir.kernel "spmm_csr_features20"
// CHECK:           vector.create_mask
// CHECK:           vector.maskedload
// CHECK:           vector.maskedstore
func.func @spmm_f20_masked_tail(%pos: tensor<?xi64>, %crd: tensor<?xi64>, %values: tensor<?xf32>, %h: tensor<?x20xf32>) -> tensor<?x20xf32> {
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?x20xf32> -> tensor<?x20xf32>
  return %y : tensor<?x20xf32>
}

// -----

/// F = 512: past 16 vectors the row runs in tiles of 256 features (one
/// entry at a time: 16 accumulators fill half the register file); tiles
/// this wide prefetch h's row for the entry 16 ahead, one line per vector.
// CHECK-LABEL: func.func @spmm_f512_feature_tiles(
// CHECK:         %[[C256:.*]] = arith.constant 256 : index
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C256]]
// CHECK:           %[[C16:.*]] = arith.constant 16 : index
// CHECK:           arith.minui
// CHECK:           memref.prefetch %{{.*}}[%{{.*}}, %{{.*}}], read, locality<3>, data : memref<?x512xf32>
// CHECK-NOT:     vector.maskedload
// CHECK:         return
func.func @spmm_f512_feature_tiles(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x512xf32>) -> tensor<?x512xf32> {
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x512xf32> -> tensor<?x512xf32>
  return %y : tensor<?x512xf32>
}

// -----

/// f64 has no kernel: an error naming the element type, the op kept.
func.func @negative_spmm_f64_elements(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf64>, %h: tensor<?x8xf64>) -> tensor<?x8xf64> {
  // expected-error@+1 {{'smlir.spmm' op has no CPU lowering for 'f64' (the kernel computes in f32)}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf64>, tensor<?x8xf64> -> tensor<?x8xf64>
  return %y : tensor<?x8xf64>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A as one CSR tensor: the kernel reads its own buffers (no copies).
// CHECK-LABEL: func.func @spmm_csr_tensor_buffers_in_place(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<50x40xf32, #sparse>, %[[H:[^:]*]]: tensor<40x32xf32>)
// CHECK-NOT:     smlir.spmm
// CHECK-DAG:     %[[PB:.*]] = sparse_tensor.positions %[[A]] {level = 1 : index} : tensor<50x40xf32, #sparse> to memref<?xi32>
// CHECK-DAG:     sparse_tensor.coordinates %[[A]] {level = 1 : index} : tensor<50x40xf32, #sparse> to memref<?xi32>
// CHECK-DAG:     sparse_tensor.values %[[A]] : tensor<50x40xf32, #sparse> to memref<?xf32>
// CHECK:         %[[DIM:.*]] = memref.dim %[[PB]]
// CHECK:         smlir.kernel "spmm_csr_features32" {
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x32xf32> to tensor<?x32xf32>
func.func @spmm_csr_tensor_buffers_in_place(%a: tensor<50x40xf32, #CSR>, %h: tensor<40x32xf32>) -> tensor<?x32xf32> {
  %y = smlir.spmm %a, %h : tensor<50x40xf32, #CSR>, tensor<40x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
