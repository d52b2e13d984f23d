// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8" -split-input-file | FileCheck %s

// The kernels smlir-rewrite-sparse-matmul builds for x * W with a sparse
// W[K, N]. The micro-kernels read W[n, k]: a kernel reading W through (k, n)
// is left to upstream sparsification, even though a CSR W[K, N] has the
// layout of the CSR micro-kernel's weight.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#W_KN = affine_map<(d0, d1, d2) -> (d2, d0)>
#XT_KM = affine_map<(d0, d1, d2) -> (d2, d1)>
#YT_NM = affine_map<(d0, d1, d2) -> (d0, d1)>

// CHECK-LABEL: func.func @xw_csr_left_to_sparsification(
// CHECK:         %[[YT:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<8x16xf32, #{{.*}}>, tensor<8x32xf32>) {{.*}} attrs =  {smlir.sparse_kernel}
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x32xf32>)
// CHECK-NEXT:    return %[[Y]]
// CHECK-NOT:     smlir.microkernel
func.func @xw_csr_left_to_sparsification(%x: tensor<32x8xf32>, %w: tensor<8x16xf32, #CSR>) -> tensor<32x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %xt = linalg.transpose ins(%x : tensor<32x8xf32>) outs(%e : tensor<8x32xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<16x32xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %yt = linalg.generic {indexing_maps = [#W_KN, #XT_KM, #YT_NM], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w, %xt : tensor<8x16xf32, #CSR>, tensor<8x32xf32>) outs(%fill : tensor<16x32xf32>) attrs = {smlir.sparse_kernel} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %e3 = tensor.empty() : tensor<32x16xf32>
  %y = linalg.transpose ins(%yt : tensor<16x32xf32>) outs(%e3 : tensor<32x16xf32>) permutation = [1, 0]
  return %y : tensor<32x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>
#W_NK = affine_map<(d0, d1, d2) -> (d0, d2)>
#XT_KM = affine_map<(d0, d1, d2) -> (d2, d1)>
#YT_NM = affine_map<(d0, d1, d2) -> (d0, d1)>

/// A CSC W[K, N] reinterpreted as CSR W^T[N, K] is read through (n, k): the
/// CSR micro-kernel takes it, reading the reinterpreted storage.
// CHECK-LABEL: func.func @xw_csc_microkernel(
// CHECK-SAME:      %{{.*}}: tensor<32x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #{{.*}}>)
// CHECK:         %[[WT:.*]] = sparse_tensor.reinterpret_map %[[W]]
// CHECK:         sparse_tensor.positions %[[WT]] {level = 1 : index}
// CHECK:         {smlir.microkernel}
// CHECK-NOT:     linalg.generic
func.func @xw_csc_microkernel(%x: tensor<32x8xf32>, %w: tensor<8x16xf32, #CSC>) -> tensor<32x16xf32> {
  %zero = arith.constant 0.0 : f32
  %wt = sparse_tensor.reinterpret_map %w : tensor<8x16xf32, #CSC> to tensor<16x8xf32, #CSR>
  %e = tensor.empty() : tensor<8x32xf32>
  %xt = linalg.transpose ins(%x : tensor<32x8xf32>) outs(%e : tensor<8x32xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<16x32xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %yt = linalg.generic {indexing_maps = [#W_NK, #XT_KM, #YT_NM], iterator_types = ["parallel", "parallel", "reduction"]} ins(%wt, %xt : tensor<16x8xf32, #CSR>, tensor<8x32xf32>) outs(%fill : tensor<16x32xf32>) attrs = {smlir.sparse_kernel} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %e3 = tensor.empty() : tensor<32x16xf32>
  %y = linalg.transpose ins(%yt : tensor<16x32xf32>) outs(%e3 : tensor<32x16xf32>) permutation = [1, 0]
  return %y : tensor<32x16xf32>
}
