// RUN: sparse-mlir-opt %s -smlir-decompose-linear -split-input-file | FileCheck %s

// smlir.linear (y = x * W^T, W[N, K]; y = x * W with orientation <in_out>,
// W[K, N]) becomes the loop order upstream sparsification lowers fast for a
// sparse W, rows of W outermost:
//   xT = transpose(x); yT[n, m] += W[n, k] * xT[k, m]; y = transpose(yT)
// (W read through (k, n) for in_out), then y[m, n] += bias[n]. The generic
// carries no attribute.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// out_in, CSR W[N, K]: x is transposed to K x M, yT starts from a zero fill,
/// the generic reads W itself, and yT is transposed back to M x N.
// CHECK-DAG:   #[[$W_NK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$XT_KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$YT_NM:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @out_in_csr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>) -> tensor<3x16xf32> {
// CHECK-NEXT:    %[[XT_INIT:.*]] = tensor.empty() : tensor<8x3xf32>
// CHECK-NEXT:    %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>) outs(%[[XT_INIT]] : tensor<8x3xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[YT_EMPTY:.*]] = tensor.empty() : tensor<16x3xf32>
// CHECK-NEXT:    %[[YT_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[YT_EMPTY]] : tensor<16x3xf32>) -> tensor<16x3xf32>
// CHECK-NEXT:    %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_NK]], #[[$XT_KM]], #[[$YT_NM]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[W]], %[[XT]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%[[YT_INIT]] : tensor<16x3xf32>) {
// CHECK-NEXT:    ^bb0(%[[WV:.*]]: f32, %[[XV:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[MUL:.*]] = arith.mulf %[[WV]], %[[XV]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[MUL]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<16x3xf32>
// CHECK-NEXT:    %[[Y_INIT:.*]] = tensor.empty() : tensor<3x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x3xf32>) outs(%[[Y_INIT]] : tensor<3x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @out_in_csr(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>) -> tensor<3x16xf32> {
  %y = smlir.linear %x, %w : tensor<3x8xf32>, tensor<16x8xf32, #CSR> -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// in_out, CSR W[K, N]: the same chain, W read through (k, n); N is W's
/// dimension 1.
// CHECK-DAG:   #[[$W_KN:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[$XT_KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$YT_NM:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @in_out_csr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$CSR]]>) -> tensor<3x16xf32> {
// CHECK-NEXT:    %[[XT_INIT:.*]] = tensor.empty() : tensor<8x3xf32>
// CHECK-NEXT:    %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>) outs(%[[XT_INIT]] : tensor<8x3xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[YT_EMPTY:.*]] = tensor.empty() : tensor<16x3xf32>
// CHECK-NEXT:    %[[YT_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[YT_EMPTY]] : tensor<16x3xf32>) -> tensor<16x3xf32>
// CHECK-NEXT:    %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_KN]], #[[$XT_KM]], #[[$YT_NM]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[W]], %[[XT]] : tensor<8x16xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%[[YT_INIT]] : tensor<16x3xf32>) {
// CHECK-NEXT:    ^bb0(%[[WV:.*]]: f32, %[[XV:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[MUL:.*]] = arith.mulf %[[WV]], %[[XV]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[MUL]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<16x3xf32>
// CHECK-NEXT:    %[[Y_INIT:.*]] = tensor.empty() : tensor<3x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x3xf32>) outs(%[[Y_INIT]] : tensor<3x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @in_out_csr(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #CSR>) -> tensor<3x16xf32> {
  %y = smlir.linear %x, %w orientation <in_out> : tensor<3x8xf32>, tensor<8x16xf32, #CSR> -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A dynamic token dimension M: every tensor.empty with an M dimension reads
/// it with tensor.dim (from x, then from yT for the final transpose).
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @dynamic_tokens(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>) -> tensor<?x16xf32> {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[M:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x8xf32>
// CHECK-NEXT:    %[[XT_INIT:.*]] = tensor.empty(%[[M]]) : tensor<8x?xf32>
// CHECK-NEXT:    %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<?x8xf32>) outs(%[[XT_INIT]] : tensor<8x?xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[C0_2:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[M2:.*]] = tensor.dim %[[X]], %[[C0_2]] : tensor<?x8xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[YT_EMPTY:.*]] = tensor.empty(%[[M2]]) : tensor<16x?xf32>
// CHECK-NEXT:    %[[YT_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[YT_EMPTY]] : tensor<16x?xf32>) -> tensor<16x?xf32>
// CHECK-NEXT:    %[[YT:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[XT]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x?xf32>) outs(%[[YT_INIT]] : tensor<16x?xf32>) {
// CHECK:         } -> tensor<16x?xf32>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[M3:.*]] = tensor.dim %[[YT]], %[[C1]] : tensor<16x?xf32>
// CHECK-NEXT:    %[[Y_INIT:.*]] = tensor.empty(%[[M3]]) : tensor<?x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x?xf32>) outs(%[[Y_INIT]] : tensor<?x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<?x16xf32>
func.func @dynamic_tokens(%x: tensor<?x8xf32>, %w: tensor<16x8xf32, #CSR>) -> tensor<?x16xf32> {
  %y = smlir.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32, #CSR> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

/// A dynamic N read from W with a static result type: N comes from
/// tensor.dim of W, and the transposed result is cast to the linear's type.
// CHECK-LABEL: func.func @dynamic_weight_static_result(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<?x8xf32, #[[$CSR]]>) -> tensor<3x16xf32> {
// CHECK:         %[[N:.*]] = tensor.dim %[[W]], %{{.*}} : tensor<?x8xf32, #[[$CSR]]>
// CHECK:         %[[YT_EMPTY:.*]] = tensor.empty(%[[N]]) : tensor<?x3xf32>
// CHECK:         %[[YT:.*]] = linalg.generic {{.*}} ins(%[[W]], %{{.*}} : tensor<?x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%{{.*}} : tensor<?x3xf32>) {
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<?x3xf32>) outs(%{{.*}} : tensor<3x?xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[R:.*]] = tensor.cast %[[Y]] : tensor<3x?xf32> to tensor<3x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3x16xf32>
func.func @dynamic_weight_static_result(%x: tensor<3x8xf32>, %w: tensor<?x8xf32, #CSR>) -> tensor<3x16xf32> {
  %y = smlir.linear %x, %w : tensor<3x8xf32>, tensor<?x8xf32, #CSR> -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A bias is added after the transpose back, broadcast over the tokens:
/// y[m, n] += bias[n], in place on y.
// CHECK-DAG:   #[[$BIAS_N:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @bias(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<16xf32>) -> tensor<3x16xf32> {
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>)
// CHECK:         %[[YT:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[XT]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%{{.*}} : tensor<16x3xf32>) {
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x3xf32>) outs(%{{.*}} : tensor<3x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [#[[$BIAS_N]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[B]] : tensor<16xf32>) outs(%[[Y]] : tensor<3x16xf32>) {
// CHECK-NEXT:    ^bb0(%[[BV:.*]]: f32, %[[YV:.*]]: f32):
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[YV]], %[[BV]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3x16xf32>
func.func @bias(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>, %b: tensor<16xf32>) -> tensor<3x16xf32> {
  %y = smlir.linear %x, %w bias %b : tensor<3x8xf32>, tensor<16x8xf32, #CSR>, tensor<16xf32> -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

/// A dense W takes the same chain (the linears no micro-kernel took).
// CHECK-DAG:   #[[$W_NK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$XT_KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$YT_NM:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @dense_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x16xf32>, %[[W:[^:]*]]: tensor<8x16xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %[[XT_INIT:.*]] = tensor.empty() : tensor<16x4xf32>
// CHECK-NEXT:    %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<4x16xf32>) outs(%[[XT_INIT]] : tensor<16x4xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[YT_EMPTY:.*]] = tensor.empty() : tensor<8x4xf32>
// CHECK-NEXT:    %[[YT_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[YT_EMPTY]] : tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_NK]], #[[$XT_KM]], #[[$YT_NM]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[W]], %[[XT]] : tensor<8x16xf32>, tensor<16x4xf32>) outs(%[[YT_INIT]] : tensor<8x4xf32>) {
// CHECK-NEXT:    ^bb0(%[[WV:.*]]: f32, %[[XV:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[MUL:.*]] = arith.mulf %[[WV]], %[[XV]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[MUL]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<8x4xf32>
// CHECK-NEXT:    %[[Y_INIT:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<8x4xf32>) outs(%[[Y_INIT]] : tensor<4x8xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<4x8xf32>
func.func @dense_weight(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> tensor<4x8xf32> {
  %y = smlir.linear %x, %w : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Mixed precision (f16 x f16 -> f32): the body extends both operands before
/// multiplying, and the accumulator and bias are f32.
// CHECK-LABEL: func.func @f16_operands_f32_result(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x16xf16>, %[[W:[^:]*]]: tensor<8x16xf16, #{{.*}}>, %[[B:[^:]*]]: tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<4x16xf16>) outs(%{{.*}} : tensor<16x4xf16>) permutation = [1, 0]
// CHECK:         %[[YT:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[W]], %[[XT]] : tensor<8x16xf16, #{{.*}}>, tensor<16x4xf16>) outs(%{{.*}} : tensor<8x4xf32>) {
// CHECK-NEXT:    ^bb0(%[[WV:.*]]: f16, %[[XV:.*]]: f16, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[W32:.*]] = arith.extf %[[WV]] : f16 to f32
// CHECK-NEXT:      %[[X32:.*]] = arith.extf %[[XV]] : f16 to f32
// CHECK-NEXT:      %[[MUL:.*]] = arith.mulf %[[W32]], %[[X32]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[MUL]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<8x4xf32>
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<8x4xf32>)
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[B]] : tensor<8xf32>) outs(%[[Y]] : tensor<4x8xf32>)
func.func @f16_operands_f32_result(%x: tensor<4x16xf16>, %w: tensor<8x16xf16, #CSR>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = smlir.linear %x, %w bias %b : tensor<4x16xf16>, tensor<8x16xf16, #CSR>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Only smlir.linear is decomposed: a contraction still in linalg form (one
/// smlir-raise-linear did not raise) is left as it is.
// CHECK-LABEL: func.func @negative_linalg_matmul(
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[Y:.*]] = linalg.matmul
// CHECK-NEXT:    return %[[Y]]
func.func @negative_linalg_matmul(%x: tensor<4x16xf32>, %w: tensor<16x8xf32, #CSR>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<4x16xf32>, tensor<16x8xf32, #CSR>) outs(%out : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
