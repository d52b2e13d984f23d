// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline{lanes=16 openmp=true})' -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline{lanes=16 openmp=true})' -split-input-file | FileCheck %s --check-prefix=NOLEFT

// The row kernels as Python builds them (sparse_mlir/compiler/regions/
// row_kernels.py) go all the way to the LLVM dialect: the mask's buffers
// and the operands cross the boundary as they are, the rows run on OpenMP
// threads, exp is a polynomial (no libm call).

/// The SDDMM writes into the caller's buffer: @main returns nothing.
// CHECK-LABEL: llvm.func @main(
// CHECK-NOT:     -> !llvm.struct
// CHECK-SAME:      attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @smlir_sddmm_rows_csr_64x96x32_g8w16_scaled(
// CHECK-LABEL: llvm.func @smlir_sddmm_rows_csr_64x96x32_g8w16_scaled(
// CHECK:         omp.parallel
// CHECK:           omp.wsloop
// CHECK:         llvm.return
// NOLEFT-NOT:  smlir.
// NOLEFT-NOT:  bufferization.
// NOLEFT-NOT:  func.func
func.func @main(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x64x32xf32>, %b: tensor<?x96x32xf32>, %out: memref<?x?xf32>) attributes {llvm.emit_c_interface} {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b scaled {lanes = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x64x32xf32>, tensor<?x96x32xf32> -> tensor<?x?xf32>
  bufferization.materialize_in_destination %s in restrict writable %out : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: llvm.func @main(
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)> attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @smlir_sparse_attention_csr_64x96x32x16_g8w16(
// CHECK-LABEL: llvm.func @smlir_sparse_attention_csr_64x96x32x16_g8w16(
// CHECK:         omp.parallel
// CHECK-NOT:     expf
// CHECK:         llvm.return
// NOLEFT-NOT:  smlir.
// NOLEFT-NOT:  func.func
func.func @main(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %q: tensor<?x64x32xf32>, %k: tensor<?x96x32xf32>, %v: tensor<?x96x16xf32>) -> tensor<?x64x16xf32> attributes {llvm.emit_c_interface} {
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 0.125 : f32, lanes = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?x64x32xf32>, tensor<?x96x32xf32>, tensor<?x96x16xf32> -> tensor<?x64x16xf32>
  return %o : tensor<?x64x16xf32>
}
