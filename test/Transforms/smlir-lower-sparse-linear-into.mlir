// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=2 vectors=1 lanes=8" -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=16 avx512=true" -split-input-file | FileCheck %s --check-prefix=PERMUTED

// Accumulate-into (`into`): the kernel's output stage reads y and adds the
// product instead of storing it, in `into`'s buffer (no new y); with
// `columns`, row n of W goes to y's column columns[n] (one scalar
// read-modify-write each).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @csr_into(
// CHECK-SAME:    %[[W:.*]]: tensor<5x64xf32, #{{.*}}>, %[[X:.*]]: tensor<16x64xf32>, %[[INTO:.*]]: tensor<16x5xf32>)
// CHECK-NOT:     memref.alloc() {{.*}} : memref<16x5xf32>
// CHECK:         %[[Y:.*]] = bufferization.to_buffer %[[INTO]] : tensor<16x5xf32> to memref<16x5xf32>
// CHECK-NOT:     memref.alloc() {{.*}} : memref<16x5xf32>
// CHECK:         smlir.kernel "linear_csr_16x64x5"
// The stage's full vectors: y's tile loaded, the product added, stored.
// CHECK:           %[[OLD:.*]] = vector.load %[[Y]]
// CHECK:           %[[SUM:.*]] = arith.addf %[[OLD]], %{{.*}} : vector<8xf32>
// CHECK:           vector.store %[[SUM]], %[[Y]]
// A partial one: masked load, add, masked store.
// CHECK:           %[[MOLD:.*]] = vector.maskedload %[[Y]]
// CHECK:           %[[MSUM:.*]] = arith.addf %[[MOLD]], %{{.*}} : vector<8xf32>
// CHECK:           vector.maskedstore %[[Y]][{{.*}}], %{{.*}}, %[[MSUM]]
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[Y]]
// CHECK-NOT:     smlir.linear
// CHECK:         return %[[R]]
func.func @csr_into(%w: tensor<5x64xf32, #CSR>, %x: tensor<16x64xf32>, %into: tensor<16x5xf32>) -> tensor<16x5xf32> {
  %y = smlir.linear %x, %w into(%into : tensor<16x5xf32>) : tensor<16x64xf32>, tensor<5x64xf32, #CSR> -> tensor<16x5xf32>
  return %y : tensor<16x5xf32>
}

// -----

/// A remainder of 3 rows adding into 3 of y's 40 columns: each of the
/// stage's columns n goes to y[m, columns[n]], a scalar read-modify-write
/// (no vector store of y at all).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @csr_into_columns(
// CHECK-SAME:    %[[W:.*]]: tensor<3x64xf32, #{{.*}}>, %[[X:.*]]: tensor<16x64xf32>, %[[INTO:.*]]: tensor<16x40xf32>, %[[COLS:.*]]: tensor<3xi64>)
// CHECK-DAG:     %[[Y:[0-9]+]] = bufferization.to_buffer %[[INTO]] : tensor<16x40xf32> to memref<16x40xf32>
// CHECK-DAG:     %[[C:[0-9]+]] = bufferization.to_buffer %[[COLS]] read_only : tensor<3xi64> to memref<3xi64>
// CHECK:         smlir.kernel "linear_csr_16x64x3"
// CHECK-NOT:       vector.store {{.*}}%[[Y]]
// CHECK:           %[[N:.*]] = memref.load %[[C]][%{{.*}}] : memref<3xi64>
// CHECK:           %[[COL:.*]] = arith.index_cast %[[N]] : i64 to index
// CHECK:           %[[OLD:.*]] = memref.load %[[Y]][%{{.*}}, %[[COL]]] : memref<16x40xf32>
// CHECK:           %[[SUM:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK:           memref.store %[[SUM]], %[[Y]][%{{.*}}, %[[COL]]] : memref<16x40xf32>
// CHECK-NOT:       vector.store {{.*}}%[[Y]]
// CHECK-NOT:     smlir.linear
func.func @csr_into_columns(%w: tensor<3x64xf32, #CSR>, %x: tensor<16x64xf32>, %into: tensor<16x40xf32>,
                            %cols: tensor<3xi64>) -> tensor<16x40xf32> {
  %y = smlir.linear %x, %w into(%into : tensor<16x40xf32>) columns(%cols : tensor<3xi64>)
      : tensor<16x64xf32>, tensor<3x64xf32, #CSR> -> tensor<16x40xf32>
  return %y : tensor<16x40xf32>
}

// -----

/// Decode (2 tokens): each dot product is added to y[m, columns[n]].

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @decode_into_columns(
// CHECK-SAME:    %[[W:.*]]: tensor<3x64xf32, #{{.*}}>, %[[X:.*]]: tensor<2x64xf32>, %[[INTO:.*]]: tensor<2x40xf32>, %[[COLS:.*]]: tensor<3xi32>)
// CHECK:         smlir.kernel "linear_csr_2x64x3"
// CHECK:           %[[N:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<3xi32>
// CHECK:           %[[COL:.*]] = arith.index_cast %[[N]] : i32 to index
// CHECK:           %[[OLD:.*]] = memref.load %{{.*}}[%{{.*}}, %[[COL]]] : memref<2x40xf32>
// CHECK:           %[[SUM:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK:           memref.store %[[SUM]], %{{.*}}[%{{.*}}, %[[COL]]] : memref<2x40xf32>
func.func @decode_into_columns(%w: tensor<3x64xf32, #CSR>, %x: tensor<2x64xf32>, %into: tensor<2x40xf32>,
                               %cols: tensor<3xi32>) -> tensor<2x40xf32> {
  %y = smlir.linear %x, %w into(%into : tensor<2x40xf32>) columns(%cols : tensor<3xi32>)
      : tensor<2x64xf32>, tensor<3x64xf32, #CSR> -> tensor<2x40xf32>
  return %y : tensor<2x40xf32>
}

// -----

/// `into` read again after the linear: its buffer is copied, not written.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @into_read_again_is_copied(
// CHECK:         %[[B:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<16x5xf32> to memref<16x5xf32>
// CHECK:         %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x5xf32>
// CHECK:         memref.copy %[[B]], %[[Y]]
func.func @into_read_again_is_copied(%w: tensor<5x64xf32, #CSR>, %x: tensor<16x64xf32>, %into: tensor<16x5xf32>)
    -> (tensor<16x5xf32>, tensor<16x5xf32>) {
  %y = smlir.linear %x, %w into(%into : tensor<16x5xf32>) : tensor<16x64xf32>, tensor<5x64xf32, #CSR> -> tensor<16x5xf32>
  return %y, %into : tensor<16x5xf32>, tensor<16x5xf32>
}

// -----

/// n:m decode with x permuted in registers (the AVX-512 RUN line): its
/// sums are added to y's entries too.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// PERMUTED-LABEL: func.func @nm_permuted_decode_into(
// PERMUTED-SAME:    %{{.*}}: tensor<12x64xf32, #{{.*}}>, %{{.*}}: tensor<2x64xf32>, %[[INTO:.*]]: tensor<2x12xf32>)
// PERMUTED:         %[[Y:.*]] = bufferization.to_buffer %[[INTO]] : tensor<2x12xf32> to memref<2x12xf32>
// PERMUTED:         smlir.kernel "linear_2of4p_2x64x12"
// PERMUTED:           smlir.permute2
// PERMUTED:           %[[OLD:.*]] = memref.load %[[Y]]
// PERMUTED:           %[[SUM:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// PERMUTED:           memref.store %[[SUM]], %[[Y]]
func.func @nm_permuted_decode_into(%w: tensor<12x64xf32, #NM>, %x: tensor<2x64xf32>, %into: tensor<2x12xf32>) -> tensor<2x12xf32> {
  %y = smlir.linear %x, %w into(%into : tensor<2x12xf32>) : tensor<2x64xf32>, tensor<12x64xf32, #NM> -> tensor<2x12xf32>
  return %y : tensor<2x12xf32>
}
