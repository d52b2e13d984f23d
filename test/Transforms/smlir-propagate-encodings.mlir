// RUN: sparse-mlir-opt %s -smlir-propagate-encodings -split-input-file | FileCheck %s

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// ReLU of a CSR activation read by a matmul (left operand): relu(0) = 0 by
/// the table (select of x and 0), so the result stays CSR, computed on the
/// stored entries only (sparse_tensor.unary with no absent region), and the
/// matmul reads it sparsely.
// CHECK-LABEL: func.func @relu_keeps_csr(
// CHECK:         %[[S:.*]] = smlir.sparsify
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xf32, #sparse>
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[S]] : tensor<4x8xf32, #sparse>) outs(%[[E]] : tensor<4x8xf32, #sparse>)
// CHECK-SAME:        attrs = {smlir.inferred_encoding = "x"}
// CHECK:           %[[U:.*]] = sparse_tensor.unary %{{.*}} : f32 to f32
// CHECK-NEXT:        present = {
// CHECK:               arith.cmpf ugt
// CHECK:               arith.select
// CHECK:               sparse_tensor.yield
// CHECK:             }
// CHECK-NEXT:        absent = {
// CHECK-NEXT:        }
// CHECK:           linalg.yield %[[U]] : f32
// CHECK:         linalg.matmul ins(%[[R]], %{{.*}} : tensor<4x8xf32, #sparse>, tensor<8x2xf32>)
func.func @relu_keeps_csr(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %s = smlir.sparsify %x : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "x"} -> tensor<4x8xf32, #CSR>
  %init = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.cmpf ugt, %a, %zero : f32
    %m = arith.select %c, %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%r, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// GELU, x * 0.5 * (1 + erf(x / sqrt 2)): an intersection (mulf) with x.
// CHECK-LABEL: func.func @gelu_keeps_csr(
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK-SAME:        smlir.inferred_encoding = "x"
// CHECK:           sparse_tensor.unary
// CHECK:             math.erf
func.func @gelu_keeps_csr(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %sqrt2 = arith.constant 1.41421354 : f32
  %s = smlir.sparsify %x : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "x"} -> tensor<4x8xf32, #CSR>
  %init = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %sqrt2 : f32
    %e = math.erf %d : f32
    %p = arith.addf %e, %one : f32
    %h = arith.mulf %p, %half : f32
    %r = arith.mulf %a, %h : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// exp(0) = 1: the table says dense, nothing is inferred.
// CHECK-LABEL: func.func @negative_exp_is_dense(
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32>)
// CHECK-NOT:     smlir.inferred_encoding
// CHECK-NOT:     sparse_tensor.unary
func.func @negative_exp_is_dense(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %s = smlir.sparsify %x : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "x"} -> tensor<4x8xf32, #CSR>
  %init = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

/// Adding a dense bias is a union with a dense operand: dense.
// CHECK-LABEL: func.func @negative_bias_add_is_dense(
// CHECK-NOT:     smlir.inferred_encoding
func.func @negative_bias_add_is_dense(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %s = smlir.sparsify %x : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "x"} -> tensor<4x8xf32, #CSR>
  %init = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#map, #row, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s, %b : tensor<4x8xf32, #CSR>, tensor<8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %e = arith.addf %a, %c : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// Inferred only where it makes the code faster: a result that is returned
/// (read densely) stays dense.
// CHECK-LABEL: func.func @negative_no_faster_reader(
// CHECK-NOT:     smlir.inferred_encoding
func.func @negative_no_faster_reader(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = smlir.sparsify %x : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "x"} -> tensor<4x8xf32, #CSR>
  %init = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.tanh %a : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// The element-wise body yields a value defined outside the generic (a
/// constant): it is used as is in the sparse_tensor.unary.
// CHECK-LABEL: func.func @yields_a_value_from_outside(
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         sparse_tensor.unary
// CHECK:           sparse_tensor.yield %[[ZERO]] : f32
func.func @yields_a_value_from_outside(%x: tensor<4x8xf32, #CSR>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %zero : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%r, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// An element-type-changing body (truncf f64 -> f32): the present block
/// takes the stored f64.
// CHECK-LABEL: func.func @changes_the_element_type(
// CHECK:         sparse_tensor.unary %{{.*}} : f64 to f32
// CHECK:         present = {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f64):
// CHECK-NEXT:      arith.truncf %[[V]] : f64 to f32
func.func @changes_the_element_type(%x: tensor<4x8xf64, #CSR>, %w: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf64, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f64, %o: f32):
    %m = arith.truncf %a : f64 to f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%r, %w : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// A chain (`relu(w * 3) @ x`): the scaling's reader is the ReLU, which keeps
/// the encoding for the matmul, so both keep it (the whole chain or none).
// CHECK-LABEL: func.func @chain_keeps_csr(
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:           sparse_tensor.unary
// CHECK:             arith.mulf
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[S]] : tensor<4x8xf32, #sparse>) outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:           sparse_tensor.unary
// CHECK:             arith.select
// CHECK:         linalg.matmul ins(%[[R]], %{{.*}} : tensor<4x8xf32, #sparse>, tensor<8x2xf32>)
func.func @chain_keeps_csr(%w: tensor<4x8xf32, #CSR>, %x: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %three = arith.constant 3.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %three : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.cmpf ugt, %a, %zero : f32
    %m = arith.select %c, %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%r, %x : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// `w * w + 2 * w`, as torch-mlir imports it: the square reads the same
/// sparse value twice (one sparse_tensor.unary), and the sum of the two
/// sparse results is a union (sparse_tensor.binary: where only one is
/// stored, the body with the other zero).
// CHECK-LABEL: func.func @polynomial_keeps_csr(
// CHECK:         %[[SQ:.*]] = linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:           sparse_tensor.unary
// CHECK-NEXT:        present = {
// CHECK-NEXT:        ^bb0(%[[V:.*]]: f32):
// CHECK-NEXT:          arith.mulf %[[V]], %[[V]] : f32
// CHECK:         %[[TW:.*]] = linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:         %[[SUM:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[SQ]], %[[TW]] : tensor<4x8xf32, #sparse>, tensor<4x8xf32, #sparse>) outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:           sparse_tensor.binary
// CHECK-NEXT:        overlap = {
// CHECK:               arith.addf
// CHECK:             left = {
// CHECK:               arith.constant 0.000000e+00
// CHECK:               arith.addf
// CHECK:             right = {
// CHECK:               arith.constant 0.000000e+00
// CHECK:               arith.addf
// CHECK:         linalg.matmul ins(%[[SUM]], %{{.*}} : tensor<4x8xf32, #sparse>, tensor<8x2xf32>)
func.func @polynomial_keeps_csr(%w: tensor<4x8xf32, #CSR>, %x: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %two = arith.constant 2.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%w, %w : tensor<4x8xf32, #CSR>, tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %tw = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%sq, %tw : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%sum, %x : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// The product of two sparse tensors of one encoding is an intersection:
/// zero where either is absent, so the binary's left and right regions stay
/// empty.
// CHECK-LABEL: func.func @product_is_an_intersection(
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:           sparse_tensor.binary
// CHECK-NEXT:        overlap = {
// CHECK:               arith.mulf
// CHECK:             left = {
// CHECK-NEXT:        }
// CHECK-NEXT:        right = {
// CHECK-NEXT:        }
func.func @product_is_an_intersection(%a: tensor<4x8xf32, #CSR>, %b: tensor<4x8xf32, #CSR>, %x: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32, #CSR>, tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%p, %x : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// A chain whose end is returned (read densely): none of it is worth
/// computing sparsely, so nothing is inferred, its first link included.
// CHECK-LABEL: func.func @negative_chain_to_a_dense_reader(
// CHECK-NOT:     smlir.inferred_encoding
// CHECK-NOT:     sparse_tensor.unary
func.func @negative_chain_to_a_dense_reader(%w: tensor<4x8xf32, #CSR>) -> tensor<4x8xf32> {
  %three = arith.constant 3.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<4x8xf32, #CSR>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %three : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.tanh %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// Two sparse operands of different encodings: no single encoding to keep.
// CHECK-LABEL: func.func @negative_two_encodings(
// CHECK-NOT:     smlir.inferred_encoding
func.func @negative_two_encodings(%a: tensor<4x8xf32, #CSR>, %b: tensor<4x8xf32, #CSC>, %x: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32, #CSR>, tensor<4x8xf32, #CSC>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%p, %x : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

/// A row scale `w * s[:, None]` is a product with a dense operand: zero where
/// w is, so the result keeps w's encoding; the dense element is read inside
/// the unary (at stored entries only).
// CHECK-LABEL: func.func @dense_row_scale_keeps_csr(
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>)
// CHECK:         ^bb0(%[[W:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK:           sparse_tensor.unary %[[W]] : f32 to f32
// CHECK-NEXT:        present = {
// CHECK-NEXT:        ^bb0(%[[V:.*]]: f32):
// CHECK-NEXT:          arith.mulf %[[V]], %[[S]] : f32
func.func @dense_row_scale_keeps_csr(%w: tensor<4x8xf32, #CSR>, %s: tensor<4xf32>, %x: tensor<8x2xf32>, %out: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#map, #row, #map], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<4x8xf32, #CSR>, tensor<4xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %y = linalg.matmul ins(%p, %x : tensor<4x8xf32>, tensor<8x2xf32>) outs(%out : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
