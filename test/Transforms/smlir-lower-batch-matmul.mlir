// RUN: sparse-mlir-opt %s -smlir-lower-batch-matmul="rows=2 vectors=1 lanes=8" -split-input-file | FileCheck %s
// RUN: not sparse-mlir-opt %s -smlir-lower-batch-matmul="rows=17" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not sparse-mlir-opt %s -smlir-lower-batch-matmul="lanes=7" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// OPTIONS: error: smlir-lower-batch-matmul: lanes must be 4, 8, 16 or 32 and tile sizes 1 to 16
// RUN: not sparse-mlir-opt %s -smlir-lower-batch-matmul="vectors=x" -split-input-file 2>&1 | FileCheck %s --check-prefix=UNPARSED
// UNPARSED: error: smlir-lower-batch-matmul: option 'vectors' expects an integer (int64), got 'x'

// A dense batch_matmul (attention) needs no packing: B's rows are
// contiguous along n. Threads split (batch, block of 2 rows of y); each
// 2 x 8 tile loads B[b, k, n0:n0+8] (masked: N = 5) and broadcasts
// A[b, m, k] for each row; its 2 accumulators are stored as rows of y.

// CHECK-LABEL: func.func @batch_matmul(
// CHECK-SAME:    %[[A:.*]]: tensor<3x12x16xf32>, %[[B:.*]]: tensor<3x16x5xf32>)
// CHECK-DAG:     %[[AB:.*]] = bufferization.to_buffer %[[A]] read_only : tensor<3x12x16xf32> to memref<3x12x16xf32>
// CHECK-DAG:     %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only : tensor<3x16x5xf32> to memref<3x16x5xf32>
// CHECK-DAG:     %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<3x12x5xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         scf.parallel (%[[BATCH:.*]], %[[MB:.*]]) = ({{.*}}) to (%{{.*}}, %{{.*}}) step
// CHECK:           scf.for %[[N0:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             %[[MASK:.*]] = vector.create_mask {{.*}} : vector<8xi1>
// CHECK:             %[[ACC:.*]]:2 = scf.for %[[K:.*]] = {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:               %[[BV:.*]] = vector.maskedload %[[BB]][%[[BATCH]], %[[K]], %{{.*}}], %[[MASK]]
// CHECK:               %[[A0:.*]] = memref.load %[[AB]][%[[BATCH]], %{{.*}}, %[[K]]]
// CHECK:               %[[A0V:.*]] = vector.broadcast %[[A0]] : f32 to vector<8xf32>
// CHECK:               vector.fma %[[A0V]], %[[BV]]
// CHECK:               memref.load %[[AB]][%[[BATCH]], %{{.*}}, %[[K]]]
// CHECK:               vector.fma
// Rows past M = 12 are skipped.
// CHECK:             scf.if
// CHECK:               vector.maskedstore %[[Y]][%[[BATCH]], {{.*}}], %[[MASK]], %[[ACC]]#0
// CHECK:             scf.if
// CHECK:               vector.maskedstore %[[Y]][%[[BATCH]], {{.*}}], %[[MASK]], %[[ACC]]#1
// CHECK:         %[[RES:.*]] = bufferization.to_tensor %[[Y]] restrict writable : memref<3x12x5xf32> to tensor<3x12x5xf32>
// CHECK-NOT:     linalg.batch_matmul
// CHECK:         return %[[RES]]
func.func @batch_matmul(%a: tensor<3x12x16xf32>, %b: tensor<3x16x5xf32>) -> tensor<3x12x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x12x5xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<3x12x5xf32>) -> tensor<3x12x5xf32>
  %y = linalg.batch_matmul ins(%a, %b : tensor<3x12x16xf32>, tensor<3x16x5xf32>) outs(%fill : tensor<3x12x5xf32>) -> tensor<3x12x5xf32>
  return %y : tensor<3x12x5xf32>
}

// -----

// A batch_matmul accumulating into a non-zero init keeps upstream's loops.

// CHECK-LABEL: func.func @batch_matmul_accumulate(
// CHECK:         linalg.batch_matmul
func.func @batch_matmul_accumulate(%a: tensor<3x12x16xf32>, %b: tensor<3x16x5xf32>, %c: tensor<3x12x5xf32>) -> tensor<3x12x5xf32> {
  %y = linalg.batch_matmul ins(%a, %b : tensor<3x12x16xf32>, tensor<3x16x5xf32>) outs(%c : tensor<3x12x5xf32>) -> tensor<3x12x5xf32>
  return %y : tensor<3x12x5xf32>
}
