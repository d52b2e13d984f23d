// RUN: sparse-mlir-opt %s -smlir-raise-linear -split-input-file | FileCheck %s

// x * W with a sparse W[K, N] itself on the right (HF GPT-2's Conv1D
// `torch.addmm(b, x, W)`, `x @ W`, `F.linear(x, W.t())`: torch-mlir gives a
// plain linalg.matmul(x, W)) is raised to `smlir.linear %x, %W orientation
// <in_out>`, reading W[K, N] itself (smlir-decompose-linear later reads it
// through (k, n) in the yT[n, m] += W[k, n] * xT[k, m] kernel).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// CSR W[K, N], zero-filled outs: nothing is added back, the fill is erased.
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @xw_csr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$CSR:[^>]*]]>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] orientation <in_out> : tensor<3x8xf32>, tensor<8x16xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<3x16xf32>
func.func @xw_csr(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #CSR>) -> tensor<3x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #CSR>) outs(%fill : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// A non-zero outs (here an argument) is added back; a dynamic M stays
/// dynamic in the linear's result.
// CHECK-LABEL: func.func @xw_csr_outs_dynamic_m(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #{{.*}}>, %[[B:[^:]*]]: tensor<?x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] orientation <in_out> : tensor<?x8xf32>, tensor<8x16xf32, #[[$CSR]]> -> tensor<?x16xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[Y]] : tensor<?x16xf32>) outs(%[[B]] : tensor<?x16xf32>) {
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<?x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<?x16xf32>
func.func @xw_csr_outs_dynamic_m(%x: tensor<?x8xf32>, %w: tensor<8x16xf32, #CSR>, %b: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x16xf32, #CSR>) outs(%b : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>

/// A CSC W[K, N] stores CSR W^T[N, K]: reinterpreted as that (no copy), it
/// is the W[N, K] of an out_in linear, the form smlir-lower-sparse-linear's
/// CSR micro-kernel takes.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$CSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @xw_csc(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$CSC]]>)
// CHECK-NEXT:    %[[WT:.*]] = sparse_tensor.reinterpret_map %[[W]] : tensor<8x16xf32, #[[$CSC]]> to tensor<16x8xf32, #[[$CSR]]>
/// out_in: no orientation printed.
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[WT]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
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

/// COO and BSR W[K, N] are raised in_out as CSR is (no reinterpretation).
// CHECK-LABEL: func.func @xw_coo(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$COO:[^>]*]]>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] orientation <in_out> : tensor<3x8xf32>, tensor<8x16xf32, #[[$COO]]> -> tensor<3x16xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<3x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NOT:     linalg.matmul
func.func @xw_coo(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #COO>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #COO>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// CHECK-LABEL: func.func @xw_bsr(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32, #[[$BSR:[^>]*]]>, %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] orientation <in_out> : tensor<3x8xf32>, tensor<8x16xf32, #[[$BSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<3x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
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
/// (b, m) collapsed, the 2-d in_out linear, expanded back.
// CHECK-LABEL: func.func @xw_3d_generic(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x5x8xf32>, %[[W:[^:]*]]: tensor<8x12xf32, #[[$CSR:[^>]*]]>)
// CHECK-NEXT:    %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x5x8xf32> into tensor<10x8xf32>
// CHECK-NEXT:    %[[Y2:.*]] = smlir.linear %[[X2]], %[[W]] orientation <in_out> : tensor<10x8xf32>, tensor<8x12xf32, #[[$CSR]]> -> tensor<10x12xf32>
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
// CHECK-NOT:     smlir.linear
func.func @negative_xw_nm(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #NM>, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #NM>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// Integer x * W: smlir.linear is floating-point only, left alone.
// CHECK-LABEL: func.func @negative_xw_integer(
// CHECK-NEXT:    %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x8xi32>, tensor<8x16xi32, #{{.*}}>)
// CHECK-NEXT:    return %[[Y]]
func.func @negative_xw_integer(%x: tensor<3x8xi32>, %w: tensor<8x16xi32, #CSR>, %b: tensor<3x16xi32>) -> tensor<3x16xi32> {
  %y = linalg.matmul ins(%x, %w : tensor<3x8xi32>, tensor<8x16xi32, #CSR>) outs(%b : tensor<3x16xi32>) -> tensor<3x16xi32>
  return %y : tensor<3x16xi32>
}

/// Both operands sparse: smlir.linear takes a dense x only.
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
