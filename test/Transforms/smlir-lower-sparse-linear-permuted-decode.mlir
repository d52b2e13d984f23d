// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=16 avx512=true" -split-input-file | FileCheck %s

// n:m decode on AVX-512 (m = 2n, up to 8 tokens): 16 stored entries are 8
// whole groups of 2:4, whose x lies in a 32-float window read as two
// vectors per token; vpermi2ps picks each entry's x by its coordinate plus
// the constant group offsets (smlir.permute2, vpermi2ps). 4 tokens: 4 rows x 4 tokens accumulators
// (clamp(24 / 4, 1, 4) rows), one permute and FMA per (row, token).

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_decode_4_tokens(
// CHECK:         smlir.kernel "linear_2of4p_4x64x12"
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:             vector.load {{.*}} : memref<?xi8>, vector<16xi8>
// CHECK:             arith.extui {{.*}} : vector<16xi8> to vector<16xi32>
// CHECK:             arith.constant dense<[0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28]> : vector<16xi32>
// CHECK-COUNT-16:    smlir.permute2
// CHECK-NOT:         vector.gather
// CHECK:             scf.yield
// CHECK-COUNT-16:  vector.reduction <add>
func.func @nm_decode_4_tokens(%w: tensor<12x64xf32, #NM>, %x: tensor<4x64xf32>) -> tensor<4x12xf32> {
  %y = smlir.linear %x, %w : tensor<4x64xf32>, tensor<12x64xf32, #NM> -> tensor<4x12xf32>
  return %y : tensor<4x12xf32>
}

// -----

// A row whose entries are no multiple of 16 (K = 40: 20 entries) ends with
// its last 4 entries scalar; 1 token takes 4 rows.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_decode_tail(
// CHECK:         smlir.kernel "linear_2of4p_1x40x8"
// CHECK:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4:     smlir.permute2
// CHECK:           vector.reduction <add>
// CHECK:           scf.for {{.*}} -> (f32)
// CHECK:             math.fma {{.*}} : f32
func.func @nm_decode_tail(%w: tensor<8x40xf32, #NM>, %x: tensor<1x40xf32>) -> tensor<1x8xf32> {
  %y = smlir.linear %x, %w : tensor<1x40xf32>, tensor<8x40xf32, #NM> -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

// Without AVX-512 (the default), or past 8 tokens, or where m != 2n, n:m
// decode keeps its gather / token blocks.

#NM14 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[1, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_1of4_decode(
// CHECK:         smlir.kernel "linear_1of4_1x64x8"
// CHECK-NOT:     smlir.permute2
// CHECK:         vector.gather
func.func @nm_1of4_decode(%w: tensor<8x64xf32, #NM14>, %x: tensor<1x64xf32>) -> tensor<1x8xf32> {
  %y = smlir.linear %x, %w : tensor<1x64xf32>, tensor<8x64xf32, #NM14> -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

// bf16 x and W (mixed precision: y f32): x is widened to f32 once, up
// front; the stored values are loaded as bf16 and extended; the permutes
// and FMAs are f32.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_decode_bf16(
// CHECK:         smlir.kernel "linear_2of4p_2x64x8"
// CHECK:           %[[WIDE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x64xf32>
// CHECK:           arith.extf {{.*}} : bf16 to f32
// CHECK:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:             vector.load {{.*}} : memref<?xbf16>, vector<16xbf16>
// CHECK:             arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:             vector.load %[[WIDE]]{{.*}} : memref<2x64xf32>, vector<16xf32>
// CHECK:             smlir.permute2
func.func @nm_decode_bf16(%w: tensor<8x64xbf16, #NM>, %x: tensor<2x64xbf16>) -> tensor<2x8xf32> {
  %y = smlir.linear %x, %w : tensor<2x64xbf16>, tensor<8x64xbf16, #NM> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
