// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline{lanes=16 openmp=true})' | FileCheck %s
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline{lanes=16 openmp=true})' | FileCheck %s --check-prefix=NOLEFT

// The weight gradient's kernel as Python builds it
// (sparse_mlir/compiler/regions/sampled.py) goes all the way to the LLVM
// dialect: the pattern crosses the boundary as its buffers, the gradient
// comes back as one new 1-d buffer, the rows run on OpenMP threads.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: llvm.func @main(
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> attributes {llvm.emit_c_interface}
// CHECK-LABEL: llvm.func @_mlir_ciface_main(
// CHECK-LABEL: llvm.func @_internal_main(
// CHECK:         llvm.call @smlir_sampled_matmul_csr_tn_256x40(
/// The outlined kernel: one parallel region (2 chunks of 128 rows, each packing
/// its own tiles of dy and x).
// CHECK-LABEL: llvm.func @smlir_sampled_matmul_csr_tn_256x40(
// CHECK:         omp.parallel
// CHECK:           omp.wsloop
// CHECK-NOT:     omp.parallel
// CHECK:         llvm.return
// NOLEFT-NOT:  smlir.
// NOLEFT-NOT:  sparse_tensor.
// NOLEFT-NOT:  func.func
func.func @main(%w: tensor<256x40xf32, #CSR>, %dy: tensor<?x256xf32>, %x: tensor<?x40xf32>) -> tensor<?xf32> attributes {llvm.emit_c_interface} {
  %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed> : tensor<?x256xf32>, tensor<?x40xf32>, tensor<256x40xf32, #CSR> -> tensor<256x40xf32, #CSR>
  %values = sparse_tensor.values %dw : tensor<256x40xf32, #CSR> to memref<?xf32>
  %result = bufferization.to_tensor %values restrict : memref<?xf32> to tensor<?xf32>
  return %result : tensor<?xf32>
}
