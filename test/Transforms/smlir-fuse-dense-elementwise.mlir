// RUN: sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-fuse-dense-elementwise))' | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// Bias add + ReLU: one op.
// CHECK-LABEL: func.func @bias_relu
// CHECK:         linalg.generic
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK-NOT:     linalg.generic
func.func @bias_relu(%y: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Layer norm's squared deviations, read once each by the row sum: fused
// into it (never written to memory).
// CHECK-LABEL: func.func @squares_into_row_sum
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         return %[[S]]
func.func @squares_into_row_sum(%x: tensor<4x8xf32>, %mean: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %p = arith.mulf %d, %d : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Softmax's exp has two readers (the row sum and the division): it is
// computed once and stored, not fused into either.
// CHECK-LABEL: func.func @shared_exp
// CHECK:         %[[E:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<4x8xf32>)
// CHECK-NOT:       math.exp
// CHECK:         linalg.generic {{.*}} ins(%[[E]], %[[S]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK-NOT:       math.exp
// CHECK:           arith.divf
func.func @shared_exp(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %s : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %sum: f32, %out: f32):
    %0 = arith.divf %in, %sum : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// A matmul reads each element of A once per output column: A's producer
// is not fused into it.
// CHECK-LABEL: func.func @not_into_matmul
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:           arith.mulf
// CHECK:         linalg.generic {{.*}} ins(%[[A]], %{{.*}} : tensor<4x16xf32>, tensor<16x8xf32>)
func.func @not_into_matmul(%x: tensor<4x16xf32>, %b: tensor<16x8xf32>, %init: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x16xf32>
  %s = linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x16xf32>, tensor<16x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %m = arith.mulf %p, %q : f32
    %0 = arith.addf %m, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
