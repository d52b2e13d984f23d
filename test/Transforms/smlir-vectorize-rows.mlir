// RUN: sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-vectorize-rows{lanes=8 vectors=2}))' | FileCheck %s
// RUN: not sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-vectorize-rows{lanes=7}))' 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-vectorize-rows{vectors=17}))' 2>&1 | FileCheck %s --check-prefix=OPTIONS
// OPTIONS: error: smlir-vectorize-rows: lanes must be 4, 8, 16 or 32 and vectors 1 to 16
// RUN: not sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-vectorize-rows{lanes=sixteen}))' 2>&1 | FileCheck %s --check-prefix=UNPARSED
// UNPARSED: error: smlir-vectorize-rows: option 'lanes' expects an integer (int64), got 'sixteen'

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

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// Element-wise: bias add + ReLU, 8 lanes at a time along each row (the
// bias is contiguous along it too), 20 = 2 whole vectors + a masked one.
// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME:    %[[Y:.*]]: tensor<4x20xf32>, %[[B:.*]]: tensor<20xf32>
// CHECK-DAG:     %[[YB:.*]] = bufferization.to_buffer %[[Y]] read_only
// CHECK-DAG:     %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK-DAG:     %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x20xf32>
// CHECK:         smlir.kernel "rows_4_20" {
// CHECK:           scf.parallel (%[[I:.*]]) =
// CHECK:             scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:               %[[V:.*]] = vector.load %[[YB]][%[[I]], %[[K]]] : memref<4x20xf32>, vector<8xf32>
// CHECK:               %[[BV:.*]] = vector.load %[[BB]][%[[K]]] : memref<20xf32>, vector<8xf32>
// CHECK:               %[[S:.*]] = arith.addf %[[V]], %[[BV]] : vector<8xf32>
// CHECK:               %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : vector<8xf32>
// CHECK:               vector.store %[[R]], %[[OUT]][%[[I]], %[[K]]] : memref<4x20xf32>, vector<8xf32>
// CHECK:             %[[MASK:.*]] = vector.constant_mask [4] : vector<8xi1>
// CHECK:             vector.maskedload %[[YB]]
// CHECK:             vector.maskedstore %[[OUT]][%[[I]], %{{.*}}], %[[MASK]]
// CHECK:         }
// CHECK:         bufferization.to_tensor %[[OUT]] restrict writable
func.func @bias_relu(%y: tensor<4x20xf32>, %b: tensor<20xf32>) -> tensor<4x20xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x20xf32>
  %0 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x20xf32>, tensor<20xf32>) outs(%e : tensor<4x20xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x20xf32>
  return %0 : tensor<4x20xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>

// Layer norm's output: the row's statistics are read once per row.
// CHECK-LABEL: func.func @normalize
// CHECK:         scf.parallel (%[[I:.*]]) =
// CHECK:           %[[M:.*]] = memref.load %{{.*}}[%[[I]], %{{.*}}] : memref<4x1xf32>
// CHECK:           vector.broadcast %[[M]] : f32 to vector<8xf32>
// CHECK:           scf.for
// CHECK-NOT:         memref.load
// CHECK:             arith.subf {{.*}} : vector<8xf32>
// CHECK:             vector.store
func.func @normalize(%x: tensor<4x16xf32>, %mean: tensor<4x1xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %0 = linalg.generic {indexing_maps = [#id, #keep, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : tensor<4x16xf32>, tensor<4x1xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// A transposing read is not contiguous along the row: left alone.
// CHECK-LABEL: func.func @transpose
// CHECK:         linalg.generic
// CHECK-NOT:     vector.load
func.func @transpose(%x: tensor<16x4xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %0 = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x4xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.negf %in : f32
    linalg.yield %d : f32
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#CSR = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>

// A streaming sparsifier will fuse into the op that produces its input:
// that op stays a linalg.generic.
// CHECK-LABEL: func.func @sparsified_result
// CHECK:         linalg.generic
// CHECK-NOT:     vector.store
// CHECK:         smlir.sparsify
func.func @sparsified_result(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %e = tensor.empty() : tensor<8x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.negf %in : f32
    linalg.yield %d : f32
  } -> tensor<8x8xf32>
  %s = smlir.sparsify %0 : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %s : tensor<8x8xf32, #CSR>
}

// -----

// Attention's head split keeps the innermost dimension: a row copy, 8
// lanes at a time, read at the permuted indices.
// CHECK-LABEL: func.func @head_split
// CHECK-SAME:    %[[X:.*]]: tensor<2x4x3x16xf32>
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         scf.parallel (%[[A:.*]], %[[B:.*]], %[[C:.*]]) =
// CHECK:           scf.for %[[K:.*]] =
// CHECK:             %[[V:.*]] = vector.load %[[XB]][%[[A]], %[[C]], %[[B]], %[[K]]] : memref<2x4x3x16xf32>, vector<8xf32>
// CHECK:             vector.store %[[V]], %{{.*}}[%[[A]], %[[B]], %[[C]], %[[K]]] : memref<2x3x4x16xf32>, vector<8xf32>
// CHECK-NOT:     linalg.transpose
func.func @head_split(%x: tensor<2x4x3x16xf32>) -> tensor<2x3x4x16xf32> {
  %e = tensor.empty() : tensor<2x3x4x16xf32>
  %t = linalg.transpose ins(%x : tensor<2x4x3x16xf32>) outs(%e : tensor<2x3x4x16xf32>) permutation = [0, 2, 1, 3]
  return %t : tensor<2x3x4x16xf32>
}

// -----

// k^T moves the innermost dimension (a = 2 goes to position 1, c = 1
// becomes innermost): per batch (in parallel), 8 x 8 tiles of (c, a) are
// 8 contiguous loads, a register transpose and 8 contiguous stores; the c
// rows past the last whole tile (4 of 12) go one element at a time.
// CHECK-LABEL: func.func @key_transpose
// CHECK-SAME:    %[[X:.*]]: tensor<2x12x16xf32>
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x12xf32>
// CHECK:         smlir.kernel "transpose_2_12_16_p0_p2_p1" {
// CHECK:         scf.parallel (%[[B:.*]]) =
// CHECK:           scf.for %[[KC:.*]] = %{{.*}} to %c8{{.*}} step %c8
// CHECK:             scf.for %[[KA:.*]] = %{{.*}} to %c16{{.*}} step %c8
// CHECK:               %[[C0:.*]] = arith.addi %[[KC]], %c0
// CHECK:               vector.load %[[XB]][%[[B]], %[[C0]], %[[KA]]] : memref<2x12x16xf32>, vector<8xf32>
// CHECK-COUNT-24:      vector.shuffle
// CHECK:               %[[A0:.*]] = arith.addi %[[KA]], %c0
// CHECK:               vector.store %{{.*}}, %[[Y]][%[[B]], %[[A0]], %[[KC]]] : memref<2x16x12xf32>, vector<8xf32>
// CHECK:           scf.for %{{.*}} = %c8{{.*}} to %c12
// CHECK:             memref.load %[[XB]]
// CHECK:             memref.store %{{.*}}, %[[Y]]
// CHECK-NOT:     linalg.transpose
func.func @key_transpose(%x: tensor<2x12x16xf32>) -> tensor<2x16x12xf32> {
  %e = tensor.empty() : tensor<2x16x12xf32>
  %t = linalg.transpose ins(%x : tensor<2x12x16xf32>) outs(%e : tensor<2x16x12xf32>) permutation = [0, 2, 1]
  return %t : tensor<2x16x12xf32>
}
