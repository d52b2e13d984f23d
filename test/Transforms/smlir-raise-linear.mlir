// RUN: sparse-mlir-opt %s -smlir-raise-linear -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-raise-linear=dense-weights=true -split-input-file | FileCheck %s --check-prefix=DENSE

// torch-mlir imports F.linear(x, W) as
//   linalg.matmul(x, linalg.transpose(W) permutation = [1, 0]).
// With a sparse W the pass raises it to one `smlir.linear %x, %W` reading W
// itself (orientation out_in, W[N, K]); smlir-decompose-linear later lowers
// that to y = (W * x^T)^T (smlir-decompose-linear.mlir checks that chain).
// A non-zero outs is added back after the linear.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// The F.linear form with zero-filled outs: nothing is added back, and the
/// transpose of W and the zero fill of the M x N result, left dead, are
/// erased.
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @linear_zero_outs(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>) -> tensor<3x16xf32> {
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @linear_zero_outs(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// matmul accumulates into its outs: a non-zero outs (here a function
/// argument) is added back element-wise after the linear.
// CHECK-LABEL: func.func @linear_outs_is_argument(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<3x16xf32>)
/// The linear itself has no accumulator.
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[Y]] : tensor<3x16xf32>) outs(%[[B]] : tensor<3x16xf32>) {
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3x16xf32>
func.func @linear_outs_is_argument(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// Only a fill with zero is dropped: a fill with 1.0 is added back too.
// CHECK-LABEL: func.func @linear_outs_filled_with_one(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>)
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[ONES:.*]] = linalg.fill ins(%[[ONE]] : f32) outs(%{{.*}} : tensor<3x16xf32>)
// CHECK:         %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<3x16xf32>) outs(%[[ONES]] : tensor<3x16xf32>)
// CHECK:         return %[[R]] : tensor<3x16xf32>
func.func @linear_outs_filled_with_one(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %one = arith.constant 1.0 : f32
  %e2 = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%one : f32) outs(%e2 : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// The transposed W may also be read elsewhere: that transpose stays for its
/// other user, the linear still reads W directly.
// CHECK-LABEL: func.func @linear_transpose_has_other_user(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>)
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32, #[[$CSR]]>) outs(%{{.*}} : tensor<8x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]], %[[T]] : tensor<3x16xf32>, tensor<8x16xf32>
func.func @linear_transpose_has_other_user(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #CSR>) -> (tensor<3x16xf32>, tensor<8x16xf32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y, %t : tensor<3x16xf32>, tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A dynamic batch M: the linear's result keeps it dynamic, and the dim and
/// fill of the old outs, left dead, are erased.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @linear_dynamic_batch(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]>) -> tensor<?x16xf32> {
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<?x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<?x16xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<?x16xf32>
func.func @linear_dynamic_batch(%x: tensor<?x8xf32>, %w: tensor<16x8xf32, #CSR>) -> tensor<?x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e2 = tensor.empty(%m) : tensor<?x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<?x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

/// A dynamic N read from W but a static outs: the linear's result takes N
/// from W and is cast back to the matmul's type.
// CHECK-LABEL: func.func @linear_dynamic_weight_static_outs(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<?x8xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<?x8xf32, #[[$CSR]]> -> tensor<3x?xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.cast %[[Y]] : tensor<3x?xf32> to tensor<3x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3x16xf32>
func.func @linear_dynamic_weight_static_outs(%x: tensor<3x8xf32>, %w: tensor<?x8xf32, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %w, %c0 : tensor<?x8xf32, #CSR>
  %e = tensor.empty(%n) : tensor<8x?xf32>
  %t = linalg.transpose ins(%w : tensor<?x8xf32, #CSR>) outs(%e : tensor<8x?xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x?xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// Any sparse encoding of W is read directly by the linear: COO ...
// CHECK-DAG:   #[[$COO:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @linear_coo_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$COO]]>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$COO]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_coo_weight(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #COO>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #COO>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// ... and BSR (a non-identity dimension-to-level map).
// CHECK-LABEL: func.func @linear_bsr_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #[[$BSR]]>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$BSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear_bsr_weight(%x: tensor<3x8xf32>, %w: tensor<16x8xf32, #BSR>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #BSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#X_BMK = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#WT_KN = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
#Y_BMN = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

/// torch-mlir imports F.linear on a 3-d input as a linalg.generic
/// out[b, m, n] += x[b, m, k] * transpose(W)[k, n]. The batch dimensions are
/// collapsed into M, the 2-d linear is built as for the matmul, and the
/// result is expanded back. Zero-filled outs: nothing is added back, and the
/// transpose of W and the 3-d fill, left dead, are erased.
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @linear_3d_zero_outs(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #[[$CSR]]>)
// CHECK-NEXT:    %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x5x16xf32> into tensor<10x16xf32>
// CHECK-NEXT:    %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<10x16xf32>, tensor<12x16xf32, #[[$CSR]]> -> tensor<10x12xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.expand_shape %[[Y2D]] {{\[\[}}0, 1], [2]] output_shape [2, 5, 12] : tensor<10x12xf32> into tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<2x5x12xf32>
func.func @linear_3d_zero_outs(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32, #CSR>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%fill : tensor<2x5x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// A 3-d outs that is not a zero fill (here an argument) is collapsed too and
/// added back to the 2-d result before the expand. The body may also write
/// its operands the other way round (mulf w, x; addf mul, acc).
// CHECK-LABEL: func.func @linear_3d_outs_is_argument(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<2x5x12xf32>)
// CHECK-DAG:     %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x5x16xf32> into tensor<10x16xf32>
// CHECK-DAG:     %[[B2D:.*]] = tensor.collapse_shape %[[B]] {{\[\[}}0, 1], [2]] : tensor<2x5x12xf32> into tensor<10x12xf32>
// CHECK:         %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<10x16xf32>, tensor<12x16xf32, #[[$CSR]]> -> tensor<10x12xf32>
// CHECK-NEXT:    %[[R2D:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[Y2D]] : tensor<10x12xf32>) outs(%[[B2D]] : tensor<10x12xf32>) {
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<10x12xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[R2D]] {{\[\[}}0, 1], [2]] output_shape [2, 5, 12] : tensor<10x12xf32> into tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[R]] : tensor<2x5x12xf32>
func.func @linear_3d_outs_is_argument(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32, #CSR>, %b: tensor<2x5x12xf32>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%b : tensor<2x5x12xf32>) {
  ^bb0(%a: f32, %wv: f32, %c: f32):
    %m = arith.mulf %wv, %a : f32
    %s = arith.addf %m, %c : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// A dynamic batch: the expand takes its output shape from the 3-d outs.
// CHECK-LABEL: func.func @linear_3d_dynamic_batch(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<?x5x12xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<?x5x16xf32> into tensor<?x16xf32>
// CHECK:         %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<?x16xf32>, tensor<12x16xf32, #[[$CSR]]> -> tensor<?x12xf32>
// CHECK-NEXT:    %[[R2D:.*]] = linalg.generic {{.*}} ins(%[[Y2D]] : tensor<?x12xf32>) outs(%{{.*}} : tensor<?x12xf32>)
// CHECK:         %[[BATCH:.*]] = tensor.dim %[[B]], %[[C0]] : tensor<?x5x12xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[R2D]] {{\[\[}}0, 1], [2]] output_shape [%[[BATCH]], 5, 12] : tensor<?x12xf32> into tensor<?x5x12xf32>
// CHECK-NEXT:    return %[[R]] : tensor<?x5x12xf32>
func.func @linear_3d_dynamic_batch(%x: tensor<?x5x16xf32>, %w: tensor<12x16xf32, #CSR>, %b: tensor<?x5x12xf32>) -> tensor<?x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<?x5x16xf32>, tensor<16x12xf32>) outs(%b : tensor<?x5x12xf32>) {
  ^bb0(%a: f32, %wv: f32, %c: f32):
    %m = arith.mulf %a, %wv : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x5x12xf32>
  return %y : tensor<?x5x12xf32>
}

// -----

/// A dense W keeps the matmul by default: there is no sparse iteration to
/// reorder. With dense-weights=true (static f32) it is raised too, for the
/// dense micro-kernel of smlir-lower-sparse-linear.
// CHECK-LABEL: func.func @negative_dense_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NOT:     smlir.linear
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[T]] : tensor<3x8xf32>, tensor<8x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NEXT:    return %[[Y]]
// DENSE-LABEL: func.func @negative_dense_weight(
// DENSE-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[B:[^:]*]]: tensor<3x16xf32>)
// DENSE-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32> -> tensor<3x16xf32>
// DENSE-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<3x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// DENSE:         return %[[R]]
func.func @negative_dense_weight(%x: tensor<3x8xf32>, %w: tensor<16x8xf32>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A sparse left-hand side (W * x) already iterates W's rows outermost.
// CHECK-LABEL: func.func @negative_sparse_lhs(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32, #{{.*}}>, %[[X:[^:]*]]: tensor<8x3xf32>, %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%[[W]], %[[X]] : tensor<16x8xf32, #{{.*}}>, tensor<8x3xf32>) outs(%[[B]] : tensor<16x3xf32>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_sparse_lhs(%w: tensor<16x8xf32, #CSR>, %x: tensor<8x3xf32>, %b: tensor<16x3xf32>) -> tensor<16x3xf32> {
  %y = linalg.matmul ins(%w, %x : tensor<16x8xf32, #CSR>, tensor<8x3xf32>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  return %y : tensor<16x3xf32>
}

/// Both operands sparse (lhs sparse, rhs a transposed sparse W): the rewrite
/// would take a sparse x as the linear's dense input, so it is left alone.
// CHECK-LABEL: func.func @negative_sparse_lhs_and_transposed_sparse_rhs(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<3x8xf32, #{{.*}}>, %[[W:[^:]*]]: tensor<16x8xf32, #{{.*}}>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32, #{{.*}}>)
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%[[A]], %[[T]] : tensor<3x8xf32, #{{.*}}>, tensor<8x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_sparse_lhs_and_transposed_sparse_rhs(%a: tensor<3x8xf32, #CSR>, %w: tensor<16x8xf32, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%a, %t : tensor<3x8xf32, #CSR>, tensor<8x16xf32>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// A sparse right-hand side that is not a transpose (x * W with a sparse
// W[K, N]): smlir-raise-linear-rhs.mlir.

/// The linear is floating-point only: integer matmuls are left alone.
// CHECK-LABEL: func.func @negative_integer_matmul(
// CHECK-NOT:     smlir.linear
// CHECK:         %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<16x8xi32, #{{.*}}>)
// CHECK-NOT:     smlir.linear
// CHECK:         %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %[[T]] : tensor<3x8xi32>, tensor<8x16xi32>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_integer_matmul(%x: tensor<3x8xi32>, %w: tensor<16x8xi32, #CSR>) -> tensor<3x16xi32> {
  %e = tensor.empty() : tensor<8x16xi32>
  %t = linalg.transpose ins(%w : tensor<16x8xi32, #CSR>) outs(%e : tensor<8x16xi32>) permutation = [1, 0]
  %zero = arith.constant 0 : i32
  %e2 = tensor.empty() : tensor<3x16xi32>
  %fill = linalg.fill ins(%zero : i32) outs(%e2 : tensor<3x16xi32>) -> tensor<3x16xi32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xi32>, tensor<8x16xi32>) outs(%fill : tensor<3x16xi32>) -> tensor<3x16xi32>
  return %y : tensor<3x16xi32>
}

/// User-defined indexing maps (here x read as K x M) change what the operands
/// mean: left alone even though the rhs is a transposed sparse W.
// CHECK-LABEL: func.func @negative_user_defined_maps(
// CHECK-SAME:      %[[XT:[^:]*]]: tensor<8x3xf32>, %[[W:[^:]*]]: tensor<16x8xf32, #{{.*}}>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32, #{{.*}}>)
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul indexing_maps = [{{.*}}] ins(%[[XT]], %[[T]] : tensor<8x3xf32>, tensor<8x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_user_defined_maps(%xt: tensor<8x3xf32>, %w: tensor<16x8xf32, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%xt, %t : tensor<8x3xf32>, tensor<8x16xf32>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#X_BMK = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#WT_KN = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
#Y_BMN = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

/// The 3-d form with another body (out - x * w) is not a linear layer: the
/// generic, the transpose of W and the fill stay as they are.
// CHECK-LABEL: func.func @negative_3d_generic_other_body(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #{{.*}}>)
// CHECK-NOT:     smlir.linear
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<12x16xf32, #{{.*}}>) outs(%{{.*}} : tensor<16x12xf32>) permutation = [1, 0]
// CHECK-NOT:     smlir.linear
// CHECK:         %[[FILL:.*]] = linalg.fill
// CHECK-NEXT:    %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[T]] : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%[[FILL]] : tensor<2x5x12xf32>) {
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.subf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    } -> tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @negative_3d_generic_other_body(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32, #CSR>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%fill : tensor<2x5x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.subf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// The 3-d form with a dense W: no sparse iteration to reorder (with
/// dense-weights=true it is raised like a sparse one).
// CHECK-LABEL: func.func @negative_3d_generic_dense_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32>, %[[B:[^:]*]]: tensor<2x5x12xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<16x12xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<12x16xf32>) outs(%[[E]] : tensor<16x12xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[T]] : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%[[B]] : tensor<2x5x12xf32>) {
// CHECK:         } -> tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]]
// DENSE-LABEL: func.func @negative_3d_generic_dense_weight(
// DENSE-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32>, %[[B:[^:]*]]: tensor<2x5x12xf32>)
// DENSE:         %[[X2D:.*]] = tensor.collapse_shape %[[X]]
// DENSE:         smlir.linear %[[X2D]], %[[W]] : tensor<10x16xf32>, tensor<12x16xf32> -> tensor<10x12xf32>
// DENSE:         tensor.expand_shape
func.func @negative_3d_generic_dense_weight(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32>, %b: tensor<2x5x12xf32>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<2x5x16xf32>, tensor<16x12xf32>) outs(%b : tensor<2x5x12xf32>) {
  ^bb0(%a: f32, %wv: f32, %c: f32):
    %m = arith.mulf %a, %wv : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// Mixed precision (f16 operands accumulated in f32, the body extends them)
/// is left alone: only mixed-precision raises it, 2-d and into a zero fill
/// (smlir-raise-linear-mixed-precision.mlir).
// CHECK-LABEL: func.func @negative_3d_generic_mixed_precision(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf16>, %[[W:[^:]*]]: tensor<12x16xf16, #{{.*}}>, %[[B:[^:]*]]: tensor<2x5x12xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<16x12xf16>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<12x16xf16, #{{.*}}>) outs(%{{.*}} : tensor<16x12xf16>) permutation = [1, 0]
// CHECK-NEXT:    %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[T]] : tensor<2x5x16xf16>, tensor<16x12xf16>) outs(%[[B]] : tensor<2x5x12xf32>) {
// CHECK:         } -> tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @negative_3d_generic_mixed_precision(%x: tensor<2x5x16xf16>, %w: tensor<12x16xf16, #CSR>, %b: tensor<2x5x12xf32>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf16>
  %t = linalg.transpose ins(%w : tensor<12x16xf16, #CSR>) outs(%e : tensor<16x12xf16>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [#X_BMK, #WT_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %t : tensor<2x5x16xf16>, tensor<16x12xf16>) outs(%b : tensor<2x5x12xf32>) {
  ^bb0(%a: f16, %wv: f16, %c: f32):
    %a32 = arith.extf %a : f16 to f32
    %w32 = arith.extf %wv : f16 to f32
    %m = arith.mulf %a32, %w32 : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// linalg.matmul accepts f16 operands into an f32 result (it extends them):
/// left alone without mixed-precision.
// CHECK-LABEL: func.func @negative_matmul_mixed_precision(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf16>, %[[W:[^:]*]]: tensor<16x8xf16, #{{.*}}>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf16>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf16, #{{.*}}>) outs(%{{.*}} : tensor<8x16xf16>) permutation = [1, 0]
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[T]] : tensor<3x8xf16>, tensor<8x16xf16>) outs(%[[B]] : tensor<3x16xf32>) -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @negative_matmul_mixed_precision(%x: tensor<3x8xf16>, %w: tensor<16x8xf16, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e = tensor.empty() : tensor<8x16xf16>
  %t = linalg.transpose ins(%w : tensor<16x8xf16, #CSR>) outs(%e : tensor<8x16xf16>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf16>, tensor<8x16xf16>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

// A dense W is left alone by default; with dense-weights=true it is raised
// to smlir.linear as well, for the dense micro-kernel of
// smlir-lower-sparse-linear.

// CHECK-LABEL: func.func @dense_weight(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.matmul
// DENSE-LABEL: func.func @dense_weight(
// DENSE-SAME:      %[[X:[^:]*]]: tensor<4x16xf32>, %[[W:[^:]*]]: tensor<8x16xf32>)
// DENSE-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
// DENSE-NEXT:    return %[[Y]] : tensor<4x8xf32>
func.func @dense_weight(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<16x8xf32>
  %t = linalg.transpose ins(%w : tensor<8x16xf32>) outs(%e : tensor<16x8xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%x, %t : tensor<4x16xf32>, tensor<16x8xf32>) outs(%acc : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

/// A sparse output is left alone: smlir.linear writes a dense y (and the 3-d
/// encoding would have stayed on the collapsed 2-d type: an abort).
// CHECK-LABEL: func.func @sparse_3d_output(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.generic
// CHECK-NOT:     smlir.linear
// DENSE-LABEL: func.func @sparse_3d_output(
// DENSE-NOT:     smlir.linear
// DENSE:         linalg.generic
#CSR3 = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#m0 = affine_map<(b, m, n, k) -> (b, m, k)>
#m1 = affine_map<(b, m, n, k) -> (k, n)>
#m2 = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @sparse_3d_output(%x: tensor<2x3x8xf32>, %w: tensor<16x8xf32, #CSR>, %o: tensor<2x3x16xf32, #CSR3>) -> tensor<2x3x16xf32, #CSR3> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [#m0, #m1, #m2], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %t : tensor<2x3x8xf32>, tensor<8x16xf32>) outs(%o : tensor<2x3x16xf32, #CSR3>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x3x16xf32, #CSR3>
  return %y : tensor<2x3x16xf32, #CSR3>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#W_KN = affine_map<(d0, d1, d2) -> (d1, d2)>
#ID3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

/// F.linear on a non-contiguous reshape (LLaMA's o_proj after SDPA,
/// MLP-Mixer's token mixing on x.transpose(1, 2)) is decomposed into expand +
/// bmm: linalg.batch_matmul(x, broadcast_b(transpose(W))). Every batch reads
/// the same W: collapse (b, m), one linear, expand back, as for the batched
/// linear. The broadcast and the transpose of W, left dead, are erased.
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @bmm_broadcast_generic_zero_outs(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #[[$CSR]]>)
// CHECK-NEXT:    %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x5x16xf32> into tensor<10x16xf32>
// CHECK-NEXT:    %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<10x16xf32>, tensor<12x16xf32, #[[$CSR]]> -> tensor<10x12xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.expand_shape %[[Y2D]] {{\[\[}}0, 1], [2]] output_shape [2, 5, 12] : tensor<10x12xf32> into tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<2x5x12xf32>
// DENSE-LABEL: func.func @bmm_broadcast_generic_zero_outs(
// DENSE:         smlir.linear %{{.*}}, %{{.*}} : tensor<10x16xf32>, tensor<12x16xf32, #{{.*}}> -> tensor<10x12xf32>
// DENSE-NOT:     linalg.batch_matmul
func.func @bmm_broadcast_generic_zero_outs(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32, #CSR>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<2x16x12xf32>
  %bt = linalg.generic {indexing_maps = [#W_KN, #ID3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<16x12xf32>) outs(%eb : tensor<2x16x12xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x16x12xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.batch_matmul ins(%x, %bt : tensor<2x5x16xf32>, tensor<2x16x12xf32>) outs(%fill : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

/// The named linalg.broadcast (dimensions = [0]) is seen through too; an outs
/// that is not a zero fill is collapsed and added back before the expand.
// CHECK-LABEL: func.func @bmm_broadcast_op_outs_is_argument(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32, #[[$CSR]]>, %[[B:[^:]*]]: tensor<?x5x12xf32>)
// CHECK-DAG:     %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<?x5x16xf32> into tensor<?x16xf32>
// CHECK-DAG:     %[[B2D:.*]] = tensor.collapse_shape %[[B]] {{\[\[}}0, 1], [2]] : tensor<?x5x12xf32> into tensor<?x12xf32>
// CHECK:         %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<?x16xf32>, tensor<12x16xf32, #[[$CSR]]> -> tensor<?x12xf32>
// CHECK-NEXT:    %[[R2D:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[Y2D]] : tensor<?x12xf32>) outs(%[[B2D]] : tensor<?x12xf32>) {
// CHECK:         %[[R:.*]] = tensor.expand_shape %[[R2D]] {{\[\[}}0, 1], [2]] output_shape [%{{.*}}, 5, 12] : tensor<?x12xf32> into tensor<?x5x12xf32>
// CHECK-NEXT:    return %[[R]] : tensor<?x5x12xf32>
// CHECK-NOT:     linalg.broadcast
func.func @bmm_broadcast_op_outs_is_argument(%x: tensor<?x5x16xf32>, %w: tensor<12x16xf32, #CSR>, %b: tensor<?x5x12xf32>) -> tensor<?x5x12xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x5x16xf32>
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32, #CSR>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %eb = tensor.empty(%n) : tensor<?x16x12xf32>
  %bt = linalg.broadcast ins(%t : tensor<16x12xf32>) outs(%eb : tensor<?x16x12xf32>) dimensions = [0]
  %y = linalg.batch_matmul ins(%x, %bt : tensor<?x5x16xf32>, tensor<?x16x12xf32>) outs(%b : tensor<?x5x12xf32>) -> tensor<?x5x12xf32>
  return %y : tensor<?x5x12xf32>
}

/// A broadcast sparse W[K, N] itself (no transpose) is raised with
/// orientation <in_out>.
// CHECK-LABEL: func.func @bmm_broadcast_sparse_kn_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<16x12xf32, #[[$CSR]]>)
// CHECK-NEXT:    %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x5x16xf32> into tensor<10x16xf32>
// CHECK-NEXT:    %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] orientation <in_out> : tensor<10x16xf32>, tensor<16x12xf32, #[[$CSR]]> -> tensor<10x12xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.expand_shape %[[Y2D]] {{\[\[}}0, 1], [2]] output_shape [2, 5, 12] : tensor<10x12xf32> into tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<2x5x12xf32>
// CHECK-NOT:     linalg.batch_matmul
func.func @bmm_broadcast_sparse_kn_weight(%x: tensor<2x5x16xf32>, %w: tensor<16x12xf32, #CSR>) -> tensor<2x5x12xf32> {
  %eb = tensor.empty() : tensor<2x16x12xf32>
  %bt = linalg.broadcast ins(%w : tensor<16x12xf32, #CSR>) outs(%eb : tensor<2x16x12xf32>) dimensions = [0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.batch_matmul ins(%x, %bt : tensor<2x5x16xf32>, tensor<2x16x12xf32>) outs(%fill : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#B_N = affine_map<(d0, d1, d2) -> (d0, d2)>
#ID3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

/// A broadcast that is not over the batch dimension reads a different slice
/// of its source per batch: not a linear, left alone.
// CHECK-LABEL: func.func @negative_bmm_broadcast_not_over_batch(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.broadcast
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.batch_matmul
// DENSE-LABEL: func.func @negative_bmm_broadcast_not_over_batch(
// DENSE-NOT:     smlir.linear
// DENSE:         linalg.batch_matmul
func.func @negative_bmm_broadcast_not_over_batch(%x: tensor<12x5x16xf32>, %w: tensor<2x12xf32, #CSR>) -> tensor<12x5x2xf32> {
  %e = tensor.empty() : tensor<12x2xf32>
  %t = linalg.transpose ins(%w : tensor<2x12xf32, #CSR>) outs(%e : tensor<12x2xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<12x16x2xf32>
  %bt = linalg.broadcast ins(%t : tensor<12x2xf32>) outs(%eb : tensor<12x16x2xf32>) dimensions = [1]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<12x5x2xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<12x5x2xf32>) -> tensor<12x5x2xf32>
  %y = linalg.batch_matmul ins(%x, %bt : tensor<12x5x16xf32>, tensor<12x16x2xf32>) outs(%fill : tensor<12x5x2xf32>) -> tensor<12x5x2xf32>
  return %y : tensor<12x5x2xf32>
}

/// The generic form of such a broadcast, (b, k, n) -> (b, n): left alone too.
// CHECK-LABEL: func.func @negative_bmm_generic_broadcast_not_over_batch(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.batch_matmul
// DENSE-LABEL: func.func @negative_bmm_generic_broadcast_not_over_batch(
// DENSE-NOT:     smlir.linear
// DENSE:         linalg.batch_matmul
func.func @negative_bmm_generic_broadcast_not_over_batch(%x: tensor<12x5x16xf32>, %w: tensor<2x12xf32, #CSR>) -> tensor<12x5x2xf32> {
  %e = tensor.empty() : tensor<12x2xf32>
  %t = linalg.transpose ins(%w : tensor<2x12xf32, #CSR>) outs(%e : tensor<12x2xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<12x16x2xf32>
  %bt = linalg.generic {indexing_maps = [#B_N, #ID3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<12x2xf32>) outs(%eb : tensor<12x16x2xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<12x16x2xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<12x5x2xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<12x5x2xf32>) -> tensor<12x5x2xf32>
  %y = linalg.batch_matmul ins(%x, %bt : tensor<12x5x16xf32>, tensor<12x16x2xf32>) outs(%fill : tensor<12x5x2xf32>) -> tensor<12x5x2xf32>
  return %y : tensor<12x5x2xf32>
}

/// A dense W keeps the batch_matmul by default; with dense-weights=true it
/// is raised to smlir.linear reading the dense W.
// CHECK-LABEL: func.func @negative_bmm_broadcast_dense_weight(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<12x16xf32>)
// CHECK:         linalg.broadcast
// CHECK:         linalg.batch_matmul
// DENSE-LABEL: func.func @negative_bmm_broadcast_dense_weight(
// DENSE-SAME:      %[[X:[^:]*]]: tensor<2x5x16xf32>, %[[W:[^:]*]]: tensor<12x16xf32>)
// DENSE-NEXT:    %[[X2D:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x5x16xf32> into tensor<10x16xf32>
// DENSE-NEXT:    %[[Y2D:.*]] = smlir.linear %[[X2D]], %[[W]] : tensor<10x16xf32>, tensor<12x16xf32> -> tensor<10x12xf32>
// DENSE-NEXT:    %[[Y:.*]] = tensor.expand_shape %[[Y2D]]
// DENSE-NEXT:    return %[[Y]]
// DENSE-NOT:     linalg.batch_matmul
func.func @negative_bmm_broadcast_dense_weight(%x: tensor<2x5x16xf32>, %w: tensor<12x16xf32>) -> tensor<2x5x12xf32> {
  %e = tensor.empty() : tensor<16x12xf32>
  %t = linalg.transpose ins(%w : tensor<12x16xf32>) outs(%e : tensor<16x12xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<2x16x12xf32>
  %bt = linalg.broadcast ins(%t : tensor<16x12xf32>) outs(%eb : tensor<2x16x12xf32>) dimensions = [0]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.batch_matmul ins(%x, %bt : tensor<2x5x16xf32>, tensor<2x16x12xf32>) outs(%fill : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}
