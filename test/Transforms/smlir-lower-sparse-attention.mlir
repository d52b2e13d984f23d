// RUN: sparse-mlir-opt %s -smlir-lower-sparse-attention -split-input-file | FileCheck %s

/// One pass per (head, row): the scores 8 at a time at 16 lanes (transpose
/// tree), scaled, into a stack scratch of N + 16 floats, with their max;
/// the last n mod 8 one at a time; exp 16 lanes at a time (masked past
/// n) and their sum; the weighted sum of v's rows in one F-lane FMA
/// vector; out = acc / l (1 where l = 0: an empty row stays zero).
// CHECK-LABEL: func.func @sparse_attention_grouped(
// CHECK-NOT:     smlir.sparse_attention
// CHECK:         %[[OUT:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x24x8xf32>
// CHECK:         smlir.kernel "sparse_attention_csr_24x40x16x8_g8w16" {
// CHECK:           scf.parallel
// CHECK:             memref.alloca() {alignment = 64 : i64} : memref<56xf32>
// CHECK:             scf.for {{.*}} -> (vector<8xf32>)
// CHECK:               vector.shuffle
// CHECK:               vector.store %{{.*}} : memref<56xf32>, vector<8xf32>
// CHECK:               arith.maxnumf
// CHECK:             vector.reduction <maxnumf>
// CHECK:             scf.for {{.*}} -> (f32)
// CHECK:               vector.reduction <add>
// CHECK:             scf.for {{.*}} -> (vector<16xf32>)
// CHECK:               vector.create_mask
// CHECK:               math.exp
// CHECK:             scf.for {{.*}} -> (vector<8xf32>)
// CHECK:               vector.fma
// CHECK:             arith.cmpf oeq
// CHECK:             arith.divf
// CHECK:             vector.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x24x8xf32>, vector<8xf32>
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:         return %[[R]]
func.func @sparse_attention_grouped(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x24x16xf32>, %k: tensor<?x40x16xf32>, %v: tensor<?x40x8xf32>) -> tensor<?x24x8xf32> {
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 2.5e-01 : f32, lanes = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?x24x16xf32>, tensor<?x40x16xf32>, tensor<?x40x8xf32> -> tensor<?x24x8xf32>
  return %o : tensor<?x24x8xf32>
}

// -----

/// group = 1: every score one at a time (no transpose tree, no group max).
// CHECK-LABEL: func.func @sparse_attention_per_entry(
// CHECK:         smlir.kernel "sparse_attention_csr_4x6x8x8_g1w8"
// CHECK-NOT:       vector.shuffle
// CHECK-NOT:       vector.reduction <maxnumf>
// CHECK:           math.exp
// CHECK:         return
func.func @sparse_attention_per_entry(%pos: tensor<?xi64>, %crd: tensor<?xi64>, %q: tensor<?x4x8xf32>, %k: tensor<?x6x8xf32>, %v: tensor<?x6x8xf32>) -> tensor<?x4x8xf32> {
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 1.0 : f32, group = 1 : i64} : tensor<?xi64>, tensor<?xi64>, tensor<?x4x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x4x8xf32>
  return %o : tensor<?x4x8xf32>
}
