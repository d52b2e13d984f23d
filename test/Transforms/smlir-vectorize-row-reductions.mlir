// RUN: sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-vectorize-row-reductions{lanes=8 vectors=2}))' | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// 20 = one group of 2 x 8 lanes + a tail of 4 lanes: two accumulators, then
// one masked vector whose masked-off lanes add the neutral 0.
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME:    %[[X:.*]]: tensor<4x20xf32>
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG:     %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK:         scf.parallel (%[[I:.*]]) =
// CHECK:           %[[ACC:.*]]:2 = scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             vector.load %[[XB]][%[[I]], {{.*}}] : memref<4x20xf32>, vector<8xf32>
// CHECK:             vector.load %[[XB]][%[[I]], {{.*}}] : memref<4x20xf32>, vector<8xf32>
// CHECK:           %[[BOTH:.*]] = arith.addf %[[ACC]]#1, %[[ACC]]#0 : vector<8xf32>
// CHECK:           %[[MASK:.*]] = vector.constant_mask [4] : vector<8xi1>
// CHECK:           %[[TAIL:.*]] = vector.maskedload %[[XB]][%[[I]], %{{.*}}], %[[MASK]]
// CHECK:           %[[KEPT:.*]] = arith.select %[[MASK]], %[[TAIL]], %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK:           %[[ALL:.*]] = arith.addf %[[KEPT]], %[[BOTH]] : vector<8xf32>
// CHECK:           %[[SUM:.*]] = vector.reduction <add>, %[[ALL]] fastmath<reassoc> : vector<8xf32> into f32
// CHECK:           %[[RES:.*]] = arith.addf %[[SUM]], %{{.*}} : f32
// CHECK:           memref.store %[[RES]], %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK:         %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:         return %[[T]]
func.func @row_sum(%x: tensor<4x20xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x20xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#keep = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// Layer norm's sum of squared deviations, keepdim maps as torch-mlir writes
// them: the mean (constant along the row) is read once per row and
// broadcast; the body runs on vectors; the init is read from its buffer.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x16xf32>, %[[MEAN:.*]]: tensor<2x3x1xf32>, %[[INIT:.*]]: tensor<2x3x1xf32>
// CHECK-DAG:     %[[MB:.*]] = bufferization.to_buffer %[[MEAN]] read_only
// CHECK-DAG:     %[[IB:.*]] = bufferization.to_buffer %[[INIT]] read_only
// CHECK:         scf.parallel (%[[I:.*]], %[[J:.*]]) =
// CHECK:           %[[M:.*]] = memref.load %[[MB]][%[[I]], %[[J]], %{{.*}}] : memref<2x3x1xf32>
// CHECK:           %[[MV:.*]] = vector.broadcast %[[M]] : f32 to vector<8xf32>
// CHECK:           scf.for
// CHECK:             %[[D:.*]] = arith.subf %{{.*}}, %[[MV]] : vector<8xf32>
// CHECK:             %[[SQ:.*]] = arith.mulf %[[D]], %[[D]] : vector<8xf32>
// CHECK:             arith.addf %[[SQ]], %{{.*}} : vector<8xf32>
// CHECK-NOT:       vector.maskedload
// CHECK:           vector.reduction <add>
// CHECK:           %[[OLD:.*]] = memref.load %[[IB]][%[[I]], %[[J]], %{{.*}}] : memref<2x3x1xf32>
// CHECK:           arith.addf %{{.*}}, %[[OLD]] : f32
func.func @sum_of_squares(%x: tensor<2x3x16xf32>, %mean: tensor<2x3x1xf32>,
                          %init: tensor<2x3x1xf32>) -> tensor<2x3x1xf32> {
  %s = linalg.generic {indexing_maps = [#id3, #keep, #keep], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %mean : tensor<2x3x16xf32>, tensor<2x3x1xf32>) outs(%init : tensor<2x3x1xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %sq = arith.mulf %d, %d : f32
    %0 = arith.addf %sq, %out : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x1xf32>
  return %s : tensor<2x3x1xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Softmax's row max: accumulators start at -inf, the masked tail lanes too.
// CHECK-LABEL: func.func @row_max
// CHECK:         %[[NEG:.*]] = arith.constant dense<0xFF800000> : vector<8xf32>
// CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[NEG]], %{{.*}} = %[[NEG]])
// CHECK:           arith.maximumf {{.*}} : vector<8xf32>
// CHECK:         vector.constant_mask [2] : vector<8xi1>
// CHECK:         arith.select
// CHECK:         vector.reduction <maximumf>
// CHECK:         arith.maximumf {{.*}} : f32
func.func @row_max(%x: tensor<3x18xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<3x18xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<3xf32>
  return %s : tensor<3xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A column sum reduces the outer loop: left alone.
// CHECK-LABEL: func.func @column_sum
// CHECK:         linalg.generic
// CHECK-NOT:     vector.reduction
func.func @column_sum(%x: tensor<4x16xf32>, %init: tensor<16xf32>) -> tensor<16xf32> {
  %s = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// A matmul reads B along the reduced loop but not contiguously: left alone.
// CHECK-LABEL: func.func @matmul
// CHECK:         linalg.generic
// CHECK-NOT:     vector.reduction
func.func @matmul(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %init: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x16xf32>, tensor<16x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %p = arith.mulf %x, %y : f32
    %0 = arith.addf %p, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// linalg.index has no vector form: left alone.
// CHECK-LABEL: func.func @uses_index
// CHECK:         linalg.generic
// CHECK-NOT:     vector.reduction
func.func @uses_index(%x: tensor<4x16xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %k = linalg.index 1 : index
    %i = arith.index_cast %k : index to i32
    %f = arith.sitofp %i : i32 to f32
    %p = arith.mulf %in, %f : f32
    %0 = arith.addf %p, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// f64 keeps the scalar loops.
// CHECK-LABEL: func.func @row_sum_f64
// CHECK:         linalg.generic
// CHECK-NOT:     vector.reduction
func.func @row_sum_f64(%x: tensor<4x16xf64>, %init: tensor<4xf64>) -> tensor<4xf64> {
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf64>) outs(%init : tensor<4xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  } -> tensor<4xf64>
  return %s : tensor<4xf64>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// RMS norm's x^2 (math.fpowi, whose LLVM form needs a scalar exponent) is
// unrolled into multiplications on the vectors.
// CHECK-LABEL: func.func @sum_of_powers
// CHECK-NOT:     math.fpowi
// CHECK:         scf.for
// CHECK:           %[[X:.*]] = vector.load
// CHECK:           %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : vector<8xf32>
// CHECK:           arith.mulf %{{.*}}, %[[SQ]] : vector<8xf32>
// CHECK-NOT:     math.fpowi
func.func @sum_of_powers(%x: tensor<4x16xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %two = arith.constant 2 : i64
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = math.fpowi %in, %two : f32, i64
    %0 = arith.addf %p, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// An exponent only known at run time: left alone.
// CHECK-LABEL: func.func @sum_of_runtime_powers
// CHECK:         linalg.generic
// CHECK:           math.fpowi
func.func @sum_of_runtime_powers(%x: tensor<4x16xf32>, %init: tensor<4xf32>, %n: i64) -> tensor<4xf32> {
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = math.fpowi %in, %n : f32, i64
    %0 = arith.addf %p, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}
