// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=16 avx512bf16=true nm-rows=2 nm-vectors=1" -split-input-file | FileCheck %s

// bf16 2:4 on AVX-512 BF16 (4 tokens and more): each token block packs,
// after its f32 slab (K x MB), the 6 column pairs of every group of 4 as
// 32-bit bf16 pairs (MB words each), and a row's group is one broadcast
// of its two stored values as a pair and a vdpbf16ps (smlir.dot_bf16_pairs)
// per token vector on the pair's slab row: no f32 FMA.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// One token block (16 tokens): the entry loop reads each group's two
/// coordinates and values. Slab: 32 x 16 f32 + 8 groups x 6 pairs x 16.
// CHECK-LABEL: func.func @nm_bf16_pairs(
// CHECK-SAME:    %[[W:.*]]: tensor<6x32xbf16, #{{.*}}>, %[[X:.*]]: tensor<16x32xbf16>)
// CHECK:         smlir.kernel "linear_2of4dp_16x32x6"
// CHECK:         %[[SLABS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1280xf32>
// CHECK:         scf.parallel
// CHECK:           arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
// The pair slab: a group's 4 columns loaded once, 6 pairs stored.
// CHECK:           scf.for
// CHECK-COUNT-4:     vector.load %[[SLABS]]{{.*}} : memref<1280xf32>, vector<16xf32>
// CHECK:             %[[HIGH:.*]] = arith.andi {{.*}} : vector<16xi32>
// CHECK:             %[[LOW:.*]] = arith.shrui {{.*}} : vector<16xi32>
// CHECK:             arith.ori %[[HIGH]], %[[LOW]] : vector<16xi32>
// CHECK-COUNT-6:     vector.store {{.*}}, %[[SLABS]]{{.*}} : memref<1280xf32>, vector<16xf32>
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>)
// CHECK:             vector.load {{.*}} : memref<?xbf16>, vector<2xbf16>
// CHECK:             vector.bitcast {{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK:             %[[WORD:.*]] = vector.broadcast {{.*}} : i32 to vector<16xi32>
// CHECK:             %[[PAIR:.*]] = vector.bitcast %[[WORD]] : vector<16xi32> to vector<32xbf16>
// CHECK:             %[[XV:.*]] = vector.load {{.*}} : memref<1280xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK:             %[[XP:.*]] = vector.bitcast %[[XV]] : vector<16xf32> to vector<32xbf16>
// CHECK:             smlir.dot_bf16_pairs {{.*}}, %[[XP]], %[[PAIR]] : vector<16xf32>, vector<32xbf16>
// CHECK-NOT:     vector.fma
// CHECK:         return
func.func @nm_bf16_pairs(%w: tensor<6x32xbf16, #NM>, %x: tensor<16x32xbf16>) -> tensor<16x6xf32> {
  %y = smlir.linear %x, %w : tensor<16x32xbf16>, tensor<6x32xbf16, #NM> -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// 4 token blocks: the weight interleaved once per call, one i64 per row
/// and group (3 row blocks x 8 groups x 2 rows): the pair's slab offset
/// above its bits.
// CHECK-LABEL: func.func @nm_bf16_pairs_interleaved(
// CHECK:         smlir.kernel "linear_2of4dp_64x32x6"
// CHECK:         %[[PACKED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<48xi64>
// CHECK:         scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>)
// CHECK:           %[[E:.*]] = memref.load %[[PACKED]]{{.*}} : memref<48xi64>
// CHECK:           arith.trunci %[[E]] : i64 to i32
// CHECK:           arith.shrui %[[E]], {{.*}} : i64
// CHECK:           smlir.dot_bf16_pairs {{.*}} : vector<16xf32>, vector<32xbf16>
// CHECK-NOT:     vector.fma
// CHECK:         return
func.func @nm_bf16_pairs_interleaved(%w: tensor<6x32xbf16, #NM>, %x: tensor<64x32xbf16>) -> tensor<64x6xf32> {
  %y = smlir.linear %x, %w : tensor<64x32xbf16>, tensor<6x32xbf16, #NM> -> tensor<64x6xf32>
  return %y : tensor<64x6xf32>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// f16 has no such instruction: f32 FMAs.
// CHECK-LABEL: func.func @negative_f16(
// CHECK:         smlir.kernel "linear_2of4_16x32x6"
// CHECK-NOT:     smlir.dot_bf16_pairs
// CHECK:         vector.fma
func.func @negative_f16(%w: tensor<6x32xf16, #NM>, %x: tensor<16x32xf16>) -> tensor<16x6xf32> {
  %y = smlir.linear %x, %w : tensor<16x32xf16>, tensor<6x32xf16, #NM> -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#NM48 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[4, 8]), crdWidth = 8 }>

/// 4:8 would need 28 pair rows per group: f32 FMAs.
// CHECK-LABEL: func.func @negative_bf16_4of8(
// CHECK:         smlir.kernel "linear_4of8_16x32x6"
// CHECK-NOT:     smlir.dot_bf16_pairs
// CHECK:         vector.fma
func.func @negative_bf16_4of8(%w: tensor<6x32xbf16, #NM48>, %x: tensor<16x32xbf16>) -> tensor<16x6xf32> {
  %y = smlir.linear %x, %w : tensor<16x32xbf16>, tensor<6x32xbf16, #NM48> -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Rows sharing one pattern in pairs: a group's coordinates read from the
/// first row, its pair slab vector loaded once, then per row one 32-bit
/// value pair broadcast and a dot product.
// CHECK-LABEL: func.func @nm_bf16_pairs_shared_rows(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 2 : index} : tensor<4x32xbf16, #{{.*}}> to memref<?xi8>
// CHECK:         smlir.kernel "linear_2of4r2dp_16x32x4"
// CHECK:         scf.for %{{.*}} iter_args(%[[A0:arg[0-9]+]] = %{{.*}}, %[[A1:arg[0-9]+]] = %{{.*}}) -> (vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-2:   memref.load %[[CRD]]
// CHECK:           %[[XV:.*]] = vector.load
// CHECK:           %[[XP:.*]] = vector.bitcast %[[XV]] : vector<16xf32> to vector<32xbf16>
// CHECK:           smlir.dot_bf16_pairs %[[A0]], %[[XP]], %{{.*}} : vector<16xf32>, vector<32xbf16>
// CHECK:           smlir.dot_bf16_pairs %[[A1]], %[[XP]], %{{.*}} : vector<16xf32>, vector<32xbf16>
// CHECK-NOT:       memref.load %[[CRD]]
// CHECK:           scf.yield
func.func @nm_bf16_pairs_shared_rows(%w: tensor<4x32xbf16, #NM> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 2>},
                                     %x: tensor<16x32xbf16>) -> tensor<16x4xf32> {
  %y = smlir.linear %x, %w : tensor<16x32xbf16>, tensor<4x32xbf16, #NM> -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}
