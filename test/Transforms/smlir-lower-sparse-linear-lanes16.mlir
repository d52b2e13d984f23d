// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=16" -split-input-file | FileCheck %s

// 16 lanes (AVX-512) with the tiles measured for them: an n:m weight takes
// 6 rows x 2 vectors (32 tokens per block, 12 accumulators); x is still
// packed in 8 x 8 register transposes (8-lane vectors, whatever the lanes).

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_6x2(
// CHECK:         smlir.kernel "linear_2of4_32x64x12"
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<2048xf32>
// CHECK:         scf.parallel
// CHECK:           vector.load {{.*}} : memref<32x64xf32>, vector<8xf32>
// CHECK-COUNT-24:  vector.shuffle {{.*}} : vector<8xf32>, vector<8xf32>
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-12:    vector.fma {{.*}} : vector<16xf32>
// CHECK:             scf.yield
func.func @nm_6x2(%w: tensor<12x64xf32, #NM>, %x: tensor<32x64xf32>) -> tensor<32x12xf32> {
  %y = smlir.linear %x, %w : tensor<32x64xf32>, tensor<12x64xf32, #NM> -> tensor<32x12xf32>
  return %y : tensor<32x12xf32>
}

// -----

// A dense weight's 8 x 2 tile (16 accumulators of 16 lanes) is stored by
// the 4-row shuffle network within each 128-bit lane: per group of 4 rows,
// 8 shuffles, then each token's 4 values as a 4-lane slice, stored into the
// output stage.

// CHECK-LABEL: func.func @dense_8x2(
// CHECK:         smlir.kernel "linear_dense_32x64x8"
// CHECK:         scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xf32>, vector<16xf32>
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xf32>, vector<16xf32>
// CHECK:         vector.extract_strided_slice %{{.*}} {offsets = [0], sizes = [4], strides = [1]} : vector<16xf32> to vector<4xf32>
// CHECK:         vector.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<{{[0-9]+}}xf32>, vector<4xf32>
// CHECK-NOT:     vector.from_elements
func.func @dense_8x2(%w: tensor<8x64xf32>, %x: tensor<32x64xf32>) -> tensor<32x8xf32> {
  %y = smlir.linear %x, %w : tensor<32x64xf32>, tensor<8x64xf32> -> tensor<32x8xf32>
  return %y : tensor<32x8xf32>
}
