// RUN: sparse-mlir-opt %s -smlir-rewrite-sparse-matmul -split-input-file | FileCheck %s

// x * W with a sparse W[K, N] itself on the right (HF GPT-2's Conv1D
// `torch.addmm(b, x, W)`, `x @ W`, `F.linear(x, W.t())`: torch-mlir gives a
// plain linalg.matmul(x, W)) takes the loop order of x * W^T: yT[n, m] +=
// W[k, n] * xT[k, m], tagged smlir.sparse_kernel, reading W through (k, n).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// CSR W[K, N], zero-filled outs: nothing is added back.
// CHECK-DAG:   #[[$W_KN:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[$XT_KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$YT_NM:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @xw_csr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$CSR:[^>]*]]>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>) outs(%{{.*}} : tensor<8x3xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[YT_EMPTY:.*]] = tensor.empty() : tensor<16x3xf32>
// CHECK-NEXT:    %[[YT_INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[YT_EMPTY]] : tensor<16x3xf32>) -> tensor<16x3xf32>
// CHECK-NEXT:    %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_KN]], #[[$XT_KM]], #[[$YT_NM]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[W]], %[[XT]] : tensor<8x16xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%[[YT_INIT]] : tensor<16x3xf32>) attrs =  {smlir.sparse_kernel} {
// CHECK-NEXT:    ^bb0(%[[WV:.*]]: f32, %[[XV:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[MUL:.*]] = arith.mulf %[[WV]], %[[XV]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[MUL]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<16x3xf32>
// CHECK-NEXT:    %[[Y_INIT:.*]] = tensor.empty() : tensor<3x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x3xf32>) outs(%[[Y_INIT]] : tensor<3x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @xw_csr(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #CSR>) -> tensor<3x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #CSR>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// A non-zero outs (here an argument) is added back; a dynamic M is read
/// from x.
// CHECK-LABEL: func.func @xw_csr_outs_dynamic_m(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #{{.*}}>, %[[B:[^:]*]]: tensor<?x16xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<?x8xf32>)
// CHECK:         %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_KN]], #[[$XT_KM]], #[[$YT_NM]]], {{.*}}} ins(%[[W]], %[[XT]] : tensor<8x16xf32, #{{.*}}>, tensor<8x?xf32>) outs(%{{.*}} : tensor<16x?xf32>) attrs =  {smlir.sparse_kernel}
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x?xf32>) outs(%{{.*}} : tensor<?x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<?x16xf32>) outs(%[[B]] : tensor<?x16xf32>)
// CHECK:         return %[[R]] : tensor<?x16xf32>
func.func @xw_csr_outs_dynamic_m(%x: tensor<?x8xf32>, %w: tensor<8x16xf32, #CSR>, %b: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x16xf32, #CSR>) outs(%b : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>

/// A CSC W[K, N] stores CSR W^T[N, K]: reinterpreted as that (no copy), it
/// is read through (n, k), the kernel smlir-lower-sparse-linear takes.
// CHECK-DAG:   #[[$W_NK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$XT_KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$YT_NM:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$CSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @xw_csc(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$CSC]]>)
// CHECK:         %[[WT:.*]] = sparse_tensor.reinterpret_map %[[W]] : tensor<8x16xf32, #[[$CSC]]> to tensor<16x8xf32, #[[$CSR]]>
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>)
// CHECK:         %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_NK]], #[[$XT_KM]], #[[$YT_NM]]], {{.*}}} ins(%[[WT]], %[[XT]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%{{.*}} : tensor<16x3xf32>) attrs =  {smlir.sparse_kernel}
// CHECK:         %[[Y:.*]] = linalg.transpose ins(%[[YT]] : tensor<16x3xf32>) outs(%{{.*}} : tensor<3x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @xw_csc(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #CSC>) -> tensor<3x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #CSC>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// COO and BSR W[K, N] are read through (k, n) as CSR is.
// CHECK-DAG:   #[[$W_KN:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func.func @xw_coo(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$COO:[^>]*]]>, %{{.*}}: tensor<3x16xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[$W_KN]], {{.*}}} ins(%[[W]], %[[XT]] : tensor<8x16xf32, #[[$COO]]>, tensor<8x3xf32>) outs(%{{.*}} : tensor<16x3xf32>) attrs =  {smlir.sparse_kernel}
// CHECK-NOT:     linalg.matmul
func.func @xw_coo(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #COO>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #COO>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// CHECK-LABEL: func.func @xw_bsr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$BSR:[^>]*]]>, %{{.*}}: tensor<3x16xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<3x8xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[$W_KN]], {{.*}}} ins(%[[W]], %[[XT]] : tensor<8x16xf32, #[[$BSR]]>, tensor<8x3xf32>) outs(%{{.*}} : tensor<16x3xf32>) attrs =  {smlir.sparse_kernel}
// CHECK-NOT:     linalg.matmul
func.func @xw_bsr(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #BSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #BSR>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#X_BMK = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#W_KN = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
#Y_BMN = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

/// The 3-d form out[b, m, n] += x[b, m, k] * W[k, n] with W itself sparse:
/// (b, m) collapsed, the 2-d kernel, expanded back.
// CHECK-DAG:   #[[$W_KN2:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func.func @xw_3d_generic(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x8xf32>, %[[W:[^:]*]]: tensor<8x12xf32, #[[$CSR:[^>]*]]>)
// CHECK:         %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x5x8xf32> into tensor<10x8xf32>
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X2]] : tensor<10x8xf32>)
// CHECK:         %[[YT:.*]] = linalg.generic {indexing_maps = [#[[$W_KN2]], {{.*}}} ins(%[[W]], %[[XT]] : tensor<8x12xf32, #[[$CSR]]>, tensor<8x10xf32>) outs(%{{.*}} : tensor<12x10xf32>) attrs =  {smlir.sparse_kernel}
// CHECK:         %[[Y2:.*]] = linalg.transpose ins(%[[YT]] : tensor<12x10xf32>) outs(%{{.*}} : tensor<10x12xf32>)
// CHECK-NEXT:    %[[Y:.*]] = tensor.expand_shape %[[Y2]] {{\[}}[0, 1], [2]] output_shape [2, 5, 12] : tensor<10x12xf32> into tensor<2x5x12xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @xw_3d_generic(%x: tensor<2x5x8xf32>, %w: tensor<8x12xf32, #CSR>) -> tensor<2x5x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x5x12xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<2x5x12xf32>) -> tensor<2x5x12xf32>
  %y = linalg.generic {indexing_maps = [#X_BMK, #W_KN, #Y_BMN], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %w : tensor<2x5x8xf32>, tensor<8x12xf32, #CSR>) outs(%fill : tensor<2x5x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// An n:m W[K, N] is left alone (upstream sparsification cannot read a
/// structured level through (k, n)): smlir-sparse-fallback reads it densely.
// CHECK-LABEL: func.func @negative_xw_nm(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #{{.*}}>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<3x8xf32>, tensor<8x16xf32, #{{.*}}>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NEXT:    return %[[Y]]
// CHECK-NOT:     smlir.sparse_kernel
func.func @negative_xw_nm(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #NM>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #NM>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// Integer x * W: the body is mulf/addf, left alone.
// CHECK-LABEL: func.func @negative_xw_integer(
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x8xi32>, tensor<8x16xi32, #{{.*}}>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_xw_integer(%x: tensor<3x8xi32>, %w: tensor<8x16xi32, #CSR>, %b: tensor<3x16xi32>) -> tensor<3x16xi32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xi32>, tensor<8x16xi32, #CSR>) outs(%b : tensor<3x16xi32>) -> tensor<3x16xi32>
  return %y : tensor<3x16xi32>
}

/// Both operands sparse: x would be transposed as if it were dense.
// CHECK-LABEL: func.func @negative_xw_sparse_lhs(
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x8xf32, #{{.*}}>, tensor<8x16xf32, #{{.*}}>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_xw_sparse_lhs(%x: tensor<3x8xf32, #CSR>, %w: tensor<8x16xf32, #CSR>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32, #CSR>, tensor<8x16xf32, #CSR>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// A dense W[K, N] has no sparse iteration to reorder.
// CHECK-LABEL: func.func @negative_xw_dense(
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x16xf32>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_xw_dense(%x: tensor<3x8xf32>, %w: tensor<8x16xf32>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}
