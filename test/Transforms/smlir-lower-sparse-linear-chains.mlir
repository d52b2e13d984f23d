// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8" -split-input-file | FileCheck %s

// Linears that read each other (low-rank factorised layers, a chain of
// bias-free linears): the second one's x is the first one's result, which
// lowering the first replaces. Each is matched right before it is lowered:
// both become micro-kernels, the second reading the first's buffer
// (matching both up front read an erased value and crashed).

// CHECK-LABEL: func.func @two_dense_linears(
// CHECK-NOT:     smlir.linear
// CHECK:         %[[Y1:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<1x32xf32> to tensor<1x32xf32>
// CHECK:         bufferization.to_buffer %[[Y1]] read_only : tensor<1x32xf32> to memref<1x32xf32>
// CHECK:         %[[Y2:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<1x64xf32> to tensor<1x64xf32>
// CHECK-NOT:     smlir.linear
// CHECK:         return %[[Y2]] : tensor<1x64xf32>
func.func @two_dense_linears(%w1: tensor<32x16xf32>, %w2: tensor<64x32xf32>, %x: tensor<1x16xf32>) -> tensor<1x64xf32> {
  %y1 = smlir.linear %x, %w1 : tensor<1x16xf32>, tensor<32x16xf32> -> tensor<1x32xf32>
  %y2 = smlir.linear %y1, %w2 : tensor<1x32xf32>, tensor<64x32xf32> -> tensor<1x64xf32>
  return %y2 : tensor<1x64xf32>
}

// -----

// Coordinates stored as index (crdWidth = 0) are gathered as they are: no
// unsigned widening (which only narrow integers need; index has no bit
// width to ask for).

#CSRIndex = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32 }>

// CHECK-LABEL: func.func @csr_index_coordinates(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 1 : index} : tensor<16x16xf32, #{{.*}}> to memref<?xindex>
// CHECK:         %[[K:.*]] = vector.load %[[CRD]][%{{.*}}] : memref<?xindex>, vector<8xindex>
// CHECK-NOT:     arith.extui %[[K]]
// CHECK:         vector.gather %{{.*}}[%{{.*}}, %{{.*}}] [%[[K]]]
func.func @csr_index_coordinates(%w: tensor<16x16xf32, #CSRIndex>, %x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %y = smlir.linear %x, %w : tensor<2x16xf32>, tensor<16x16xf32, #CSRIndex> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}
