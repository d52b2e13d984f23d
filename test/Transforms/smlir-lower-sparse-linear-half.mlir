// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=2 vectors=1 nm-rows=2 nm-vectors=1 lanes=8" -split-input-file | FileCheck %s

// Half precision linears (mixed-precision raising's form: x and W in bf16
// or f16, y in f32): the micro-kernels read x and the stored values in
// their type and extend them to f32 where they are loaded (x once, as it
// is packed into the f32 slab); the FMAs and y stay f32.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @csr_bf16(
// CHECK-SAME:    %[[W:.*]]: tensor<5x64xbf16, #{{.*}}>, %[[X:.*]]: tensor<16x64xbf16>)
// CHECK-NOT:     smlir.linear
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<16x64xbf16> to memref<16x64xbf16>
// CHECK-DAG:     memref.alloc() {alignment = 64 : i64} : memref<16x5xf32>
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[W]] : tensor<5x64xbf16, #{{.*}}> to memref<?xbf16>
// CHECK:         %[[SLABS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
// x is extended as it is packed.
// CHECK:         %[[ROW:.*]] = vector.load %[[XB]]{{.*}} : memref<16x64xbf16>, vector<8xbf16>
// CHECK:         arith.extf %[[ROW]] : vector<8xbf16> to vector<8xf32>
// CHECK:         vector.store {{.*}}, %[[SLABS]]
// A stored value: loaded as bf16, extended, broadcast, an f32 FMA.
// CHECK:         scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>)
// CHECK:           %[[V:.*]] = memref.load %[[VAL]]{{.*}} : memref<?xbf16>
// CHECK:           %[[V32:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK:           %[[B:.*]] = vector.broadcast %[[V32]] : f32 to vector<8xf32>
// CHECK:           vector.fma %[[B]], {{.*}} : vector<8xf32>
// CHECK-NOT:     arith.truncf
// CHECK:         return {{.*}} : tensor<16x5xf32>
func.func @csr_bf16(%w: tensor<5x64xbf16, #CSR>, %x: tensor<16x64xbf16>) -> tensor<16x5xf32> {
  %y = smlir.linear %x, %w : tensor<16x64xbf16>, tensor<5x64xbf16, #CSR> -> tensor<16x5xf32>
  return %y : tensor<16x5xf32>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_f16(
// CHECK-SAME:    %[[W:.*]]: tensor<4x32xf16, #{{.*}}>, %[[X:.*]]: tensor<8x32xf16>)
// CHECK-NOT:     smlir.linear
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[W]] : tensor<4x32xf16, #{{.*}}> to memref<?xf16>
// CHECK:         vector.load {{.*}} : memref<8x32xf16>, vector<8xf16>
// CHECK:         arith.extf {{.*}} : vector<8xf16> to vector<8xf32>
// CHECK:         memref.load %[[VAL]]{{.*}} : memref<?xf16>
// CHECK:         arith.extf {{.*}} : f16 to f32
// CHECK:         vector.fma {{.*}} : vector<8xf32>
func.func @nm_f16(%w: tensor<4x32xf16, #NM>, %x: tensor<8x32xf16>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x32xf16>, tensor<4x32xf16, #NM> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Decode (fewer than 4 tokens): x extended to f32 once, up front (AVX-512
/// has no 16-bit gathers), then gathered in f32; the values loaded in bf16
/// and extended before the FMA.
// CHECK-LABEL: func.func @csr_bf16_decode(
// CHECK-SAME:    %[[W:.*]]: tensor<5x64xbf16, #{{.*}}>, %[[X:.*]]: tensor<2x64xbf16>)
// CHECK-NOT:     smlir.linear
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<2x64xbf16> to memref<2x64xbf16>
// CHECK:         smlir.kernel
// CHECK:         %[[WIDE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x64xf32>
// CHECK:         %[[E:.*]] = memref.load %[[XB]]{{.*}} : memref<2x64xbf16>
// CHECK:         %[[E32:.*]] = arith.extf %[[E]] : bf16 to f32
// CHECK:         memref.store %[[E32]], %[[WIDE]]
// CHECK:         scf.parallel
// CHECK:         vector.gather %[[WIDE]]{{.*}} : memref<2x64xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK:         %[[WV:.*]] = vector.load {{.*}} : memref<?xbf16>, vector<8xbf16>
// CHECK:         arith.extf %[[WV]] : vector<8xbf16> to vector<8xf32>
// CHECK:         vector.fma {{.*}} : vector<8xf32>
func.func @csr_bf16_decode(%w: tensor<5x64xbf16, #CSR>, %x: tensor<2x64xbf16>) -> tensor<2x5xf32> {
  %y = smlir.linear %x, %w : tensor<2x64xbf16>, tensor<5x64xbf16, #CSR> -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// The kernels accumulate in f32: a half y (no wider accumulator) is left
/// to smlir-decompose-linear.
// CHECK-LABEL: func.func @negative_bf16_result(
// CHECK:         smlir.linear
func.func @negative_bf16_result(%w: tensor<5x64xbf16, #CSR>, %x: tensor<16x64xbf16>) -> tensor<16x5xbf16> {
  %y = smlir.linear %x, %w : tensor<16x64xbf16>, tensor<5x64xbf16, #CSR> -> tensor<16x5xbf16>
  return %y : tensor<16x5xbf16>
}
