// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8" -split-input-file | FileCheck %s

// Linears whose kernels read each other (low-rank factorised layers, a
// chain of bias-free linears): the second one's x is the first one's output
// transpose, which lowering the first replaces. Each is matched right before
// it is lowered: both become micro-kernels reading the previous buffer
// (matching both up front read an erased value and crashed).

#mapW = affine_map<(n, m, k) -> (n, k)>
#mapX = affine_map<(n, m, k) -> (k, m)>
#mapY = affine_map<(n, m, k) -> (n, m)>

// CHECK-LABEL: func.func @two_dense_linears(
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[Y1:.*]] = bufferization.to_tensor %{{.*}} restrict writable {smlir.microkernel} : memref<1x32xf32> to tensor<1x32xf32>
// CHECK:         bufferization.to_buffer %[[Y1]] read_only : tensor<1x32xf32> to memref<1x32xf32>
// CHECK:         %[[Y2:.*]] = bufferization.to_tensor %{{.*}} restrict writable {smlir.microkernel} : memref<1x64xf32> to tensor<1x64xf32>
// CHECK:         return %[[Y2]] : tensor<1x64xf32>
func.func @two_dense_linears(%w1: tensor<32x16xf32>, %w2: tensor<64x32xf32>, %x: tensor<1x16xf32>) -> tensor<1x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<16x1xf32>
  %xt = linalg.transpose ins(%x : tensor<1x16xf32>) outs(%0 : tensor<16x1xf32>) permutation = [1, 0]
  %1 = tensor.empty() : tensor<32x1xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<32x1xf32>) -> tensor<32x1xf32>
  %3 = linalg.generic {indexing_maps = [#mapW, #mapX, #mapY], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w1, %xt : tensor<32x16xf32>, tensor<16x1xf32>) outs(%2 : tensor<32x1xf32>) attrs = {smlir.dense_kernel} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<32x1xf32>
  %4 = tensor.empty() : tensor<1x32xf32>
  %y1 = linalg.transpose ins(%3 : tensor<32x1xf32>) outs(%4 : tensor<1x32xf32>) permutation = [1, 0]
  %5 = tensor.empty() : tensor<32x1xf32>
  %y1t = linalg.transpose ins(%y1 : tensor<1x32xf32>) outs(%5 : tensor<32x1xf32>) permutation = [1, 0]
  %6 = tensor.empty() : tensor<64x1xf32>
  %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<64x1xf32>) -> tensor<64x1xf32>
  %8 = linalg.generic {indexing_maps = [#mapW, #mapX, #mapY], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w2, %y1t : tensor<64x32xf32>, tensor<32x1xf32>) outs(%7 : tensor<64x1xf32>) attrs = {smlir.dense_kernel} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<64x1xf32>
  %9 = tensor.empty() : tensor<1x64xf32>
  %y2 = linalg.transpose ins(%8 : tensor<64x1xf32>) outs(%9 : tensor<1x64xf32>) permutation = [1, 0]
  return %y2 : tensor<1x64xf32>
}

// -----

// Coordinates stored as index (crdWidth = 0) are gathered as they are: no
// unsigned widening (which only narrow integers need; index has no bit
// width to ask for).

#CSRIndex = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32 }>
#mapW = affine_map<(n, m, k) -> (n, k)>
#mapX = affine_map<(n, m, k) -> (k, m)>
#mapY = affine_map<(n, m, k) -> (n, m)>

// CHECK-LABEL: func.func @csr_index_coordinates(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 1 : index} : tensor<16x16xf32, #{{.*}}> to memref<?xindex>
// CHECK:         %[[K:.*]] = vector.load %[[CRD]][%{{.*}}] : memref<?xindex>, vector<8xindex>
// CHECK-NOT:     arith.extui %[[K]]
// CHECK:         vector.gather %{{.*}}[%{{.*}}, %{{.*}}] [%[[K]]]
func.func @csr_index_coordinates(%w: tensor<16x16xf32, #CSRIndex>, %x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<16x2xf32>
  %xt = linalg.transpose ins(%x : tensor<2x16xf32>) outs(%0 : tensor<16x2xf32>) permutation = [1, 0]
  %1 = tensor.empty() : tensor<16x2xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<16x2xf32>) -> tensor<16x2xf32>
  %3 = linalg.generic {indexing_maps = [#mapW, #mapX, #mapY], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w, %xt : tensor<16x16xf32, #CSRIndex>, tensor<16x2xf32>) outs(%2 : tensor<16x2xf32>) attrs = {smlir.sparse_kernel} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x2xf32>
  %4 = tensor.empty() : tensor<2x16xf32>
  %y = linalg.transpose ins(%3 : tensor<16x2xf32>) outs(%4 : tensor<2x16xf32>) permutation = [1, 0]
  return %y : tensor<2x16xf32>
}
