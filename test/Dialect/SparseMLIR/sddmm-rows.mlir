// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.sddmm_rows and smlir.sparse_attention survive parse -> print ->
// parse; attributes at their defaults are elided.

/// Any batch and nnz, D = 64, every decision spelled out (defaults elided).
// CHECK-LABEL: func.func @sddmm_rows_scaled(
// CHECK-SAME:      %[[P:.*]]: tensor<?xi32>, %[[C:.*]]: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %[[A:.*]]: tensor<?x128x64xf32>, %[[B:.*]]: tensor<?x256x64xf32>)
// CHECK:         %[[S:.*]] = smlir.sddmm_rows %[[P]], %[[C]], %[[V]], %[[A]], %[[B]] scaled {lanes = 16 : i64, prefetch = 4 : i64, tile_rows = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x128x64xf32>, tensor<?x256x64xf32> -> tensor<?x?xf32>
// CHECK:         return %[[S]]
func.func @sddmm_rows_scaled(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x128x64xf32>, %b: tensor<?x256x64xf32>) -> tensor<?x?xf32> {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b scaled {group = 8 : i64, lanes = 16 : i64, tile_rows = 16 : i64, l1_budget = 32768 : i64, min_reuse = 8 : i64, prefetch = 4 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x128x64xf32>, tensor<?x256x64xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// One entry at a time, static batch and nnz, i64 indices.
// CHECK-LABEL: func.func @sddmm_rows_per_entry(
// CHECK:         smlir.sddmm_rows %{{.*}} {group = 1 : i64} : tensor<5xi64>, tensor<7xi64>, tensor<7xf32>, tensor<2x4x7xf32>, tensor<2x9x7xf32> -> tensor<2x7xf32>
func.func @sddmm_rows_per_entry(%pos: tensor<5xi64>, %crd: tensor<7xi64>, %values: tensor<7xf32>, %a: tensor<2x4x7xf32>, %b: tensor<2x9x7xf32>) -> tensor<2x7xf32> {
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {group = 1 : i64} : tensor<5xi64>, tensor<7xi64>, tensor<7xf32>, tensor<2x4x7xf32>, tensor<2x9x7xf32> -> tensor<2x7xf32>
  return %s : tensor<2x7xf32>
}

// -----

// CHECK-LABEL: func.func @sparse_attention(
// CHECK:         %[[O:.*]] = smlir.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {lanes = 16 : i64, scale = 1.250000e-01 : f32} : tensor<?xi32>, tensor<?xi32>, tensor<?x64x32xf32>, tensor<?x80x32xf32>, tensor<?x80x24xf32> -> tensor<?x64x24xf32>
// CHECK:         return %[[O]]
func.func @sparse_attention(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x64x32xf32>, %k: tensor<?x80x32xf32>, %v: tensor<?x80x24xf32>) -> tensor<?x64x24xf32> {
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 0.125 : f32, lanes = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?x64x32xf32>, tensor<?x80x32xf32>, tensor<?x80x24xf32> -> tensor<?x64x24xf32>
  return %o : tensor<?x64x24xf32>
}
