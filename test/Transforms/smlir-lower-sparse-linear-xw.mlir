// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8" -split-input-file | FileCheck %s

// x * W with a sparse W[K, N]. The micro-kernels read W[n, k]: an in_out
// linear is left to smlir-decompose-linear, even though a CSR W[K, N] has
// the layout of the CSR micro-kernel's weight.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @xw_csr_left_to_decompose(
// CHECK-NOT:     smlir.kernel
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} orientation <in_out> : tensor<32x8xf32>, tensor<8x16xf32, #{{.*}}> -> tensor<32x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @xw_csr_left_to_decompose(%x: tensor<32x8xf32>, %w: tensor<8x16xf32, #CSR>) -> tensor<32x16xf32> {
  %y = smlir.linear %x, %w orientation <in_out> : tensor<32x8xf32>, tensor<8x16xf32, #CSR> -> tensor<32x16xf32>
  return %y : tensor<32x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>

/// A CSC W[K, N] reinterpreted as CSR W^T[N, K] is an out_in weight: the
/// CSR micro-kernel takes it, reading the reinterpreted storage.
// CHECK-LABEL: func.func @xw_csc_microkernel(
// CHECK-SAME:      %{{.*}}: tensor<32x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #{{.*}}>)
// CHECK:         %[[WT:.*]] = sparse_tensor.reinterpret_map %[[W]]
// CHECK:         sparse_tensor.positions %[[WT]] {level = 1 : index}
// CHECK:         %[[Y:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<32x16xf32> to tensor<32x16xf32>
// CHECK-NOT:     smlir.linear
// CHECK:         return %[[Y]]
func.func @xw_csc_microkernel(%x: tensor<32x8xf32>, %w: tensor<8x16xf32, #CSC>) -> tensor<32x16xf32> {
  %wt = sparse_tensor.reinterpret_map %w : tensor<8x16xf32, #CSC> to tensor<16x8xf32, #CSR>
  %y = smlir.linear %x, %wt : tensor<32x8xf32>, tensor<16x8xf32, #CSR> -> tensor<32x16xf32>
  return %y : tensor<32x16xf32>
}
