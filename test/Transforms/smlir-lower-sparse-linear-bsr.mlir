// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8" -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=8 bsr-rows=2 bsr-vectors=1" -split-input-file | FileCheck %s --check-prefix=TILE

/// A BSR W[N, K] (4 x 4 blocks) gets the BSR micro-kernel: a tile of the 4
/// rows of one block row; per stored block one coordinate load, then per
/// block column the token vectors of the slab are loaded once and serve the
/// 4 rows (weights broadcast from the block's values). 16 tokens: 2 vectors.

#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @bsr_4x4(
// CHECK-SAME:    %[[W:.*]]: tensor<8x64xf32, #{{.*}}>, %[[X:.*]]: tensor<16x64xf32>)
// CHECK-NOT:     smlir.linear
// CHECK-DAG:     %[[POS:.*]] = sparse_tensor.positions %[[W]] {level = 1 : index}
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %[[W]] {level = 1 : index}
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[W]]
// CHECK:         smlir.kernel "linear_bsr4x4_16x64x8"
// CHECK:           memref.load %[[POS]]
// CHECK:           memref.load %[[POS]]
// Over the block row's stored blocks: 4 rows x 2 token vectors.
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:             memref.load %[[CRD]]
// CHECK-NOT:         memref.load %[[CRD]]
// Block column 0: two slab vectors, then each row's weight broadcast to
// two FMAs.
// CHECK:             vector.load %[[SLAB:[a-z_0-9]+]][
// CHECK:             vector.load %[[SLAB]][
// CHECK:             memref.load %[[VAL]]
// CHECK:             vector.broadcast
// CHECK-COUNT-2:     vector.fma
// CHECK:             memref.load %[[VAL]]
// CHECK:             vector.broadcast
// CHECK-COUNT-2:     vector.fma
// CHECK-NOT:         memref.load %[[CRD]]
// CHECK:             scf.yield
// CHECK-NOT:     smlir.linear
// CHECK:         return

// The tile options: 2 rows x 1 vector, tiles at rows 0 and 2 of a block
// (the row in the block: n0 mod 4).
// TILE-LABEL: func.func @bsr_4x4(
// TILE:         arith.remui %{{.*}}, %{{.*}} : index
// TILE:         scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
func.func @bsr_4x4(%w: tensor<8x64xf32, #BSR>, %x: tensor<16x64xf32>) -> tensor<16x8xf32> {
  %y = smlir.linear %x, %w : tensor<16x64xf32>, tensor<8x64xf32, #BSR> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

/// 8 x 8 blocks: 8 rows x 1 vector would load a slab vector and 8
/// broadcasts per 8 FMAs; the tile is 4 rows x 2 vectors (8 FMAs per 2 slab
/// loads and 4 broadcasts), half a block row, the tile's first row within
/// the block from n0 mod 8.

#BSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 8 : dense, j floordiv 8 : compressed, i mod 8 : dense, j mod 8 : dense), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @bsr_8x8_half_block_rows(
// CHECK:         smlir.kernel "linear_bsr8x8_32x64x16"
// CHECK:           arith.divui %{{.*}}, %{{.*}} : index
// CHECK:           arith.remui %{{.*}}, %{{.*}} : index
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-2:     vector.load
// CHECK:             vector.broadcast
// CHECK-COUNT-2:     vector.fma
func.func @bsr_8x8_half_block_rows(%w: tensor<16x64xf32, #BSR8>, %x: tensor<32x64xf32>) -> tensor<32x16xf32> {
  %y = smlir.linear %x, %w : tensor<32x64xf32>, tensor<16x64xf32, #BSR8> -> tensor<32x16xf32>
  return %y : tensor<32x16xf32>
}

// -----

/// Decode (2 tokens): per stored block, x's 4 columns as one vector shared
/// by the tile's rows, each row's 4 block values one vector load and FMA,
/// reduced at the end.

#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @bsr_decode(
// CHECK-SAME:    %[[W:.*]]: tensor<8x64xf32, #{{.*}}>, %[[X:.*]]: tensor<2x64xf32>)
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]]
// CHECK:         %[[VAL:.*]] = sparse_tensor.values %[[W]]
// CHECK:         smlir.kernel "linear_bsr4x4_2x64x8"
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK:             vector.load %[[XB]][{{.*}}] : memref<2x64xf32>, vector<4xf32>
// CHECK:             vector.load %[[VAL]][{{.*}}] : memref<?xf32>, vector<4xf32>
// CHECK:             vector.fma {{.*}} : vector<4xf32>
// CHECK:           vector.reduction <add>
func.func @bsr_decode(%w: tensor<8x64xf32, #BSR>, %x: tensor<2x64xf32>) -> tensor<2x8xf32> {
  %y = smlir.linear %x, %w : tensor<2x64xf32>, tensor<8x64xf32, #BSR> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

/// Blocks stored block-column-major (BSC-like: j floordiv 4 outer) are not
/// BSR rows: left to upstream sparsification.

#BSC = #sparse_tensor.encoding<{ map = (i, j) -> (j floordiv 4 : dense, i floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @negative_bsc_untouched(
// CHECK:         smlir.linear
// CHECK-NOT:     smlir.kernel
func.func @negative_bsc_untouched(%w: tensor<8x64xf32, #BSC>, %x: tensor<16x64xf32>) -> tensor<16x8xf32> {
  %y = smlir.linear %x, %w : tensor<16x64xf32>, tensor<8x64xf32, #BSC> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
