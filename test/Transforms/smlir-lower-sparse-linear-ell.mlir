// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=2 vectors=1 lanes=8" -split-input-file | FileCheck %s

// A CSR weight argument whose smlir.encoding is #smlir.ell<width = k> gets
// the ELL kernel: its rows are all k long, so no position is read, the
// tile's rows run in lockstep over all k entries (a loop of k / 4
// iterations of 4 entries each, or unrolled whole for a short row) and no
// row finishes alone.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 16 }>

// CHECK-LABEL: func.func @ell_lockstep(
// CHECK-SAME:    %[[W:[a-z0-9]+]]: tensor<6x64xf32, #{{.*}}> {smlir.encoding = #smlir.ell<width = 9, crdWidth = 16>}
// CHECK-NOT:     sparse_tensor.positions
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %[[W]] {level = 1 : index} : tensor<6x64xf32, #{{.*}}> to memref<?xi16>
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[W]]
// CHECK:         smlir.kernel "linear_ell9_8x64x6"
// CHECK-NOT:       sparse_tensor.positions
// 8 of the 9 entries in a loop of 4 per iteration (2 rows: 8 chains per
// iteration), the 9th after it; nothing per row.
// CHECK:           scf.for {{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-8:     vector.fma
// CHECK:             scf.yield
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           memref.load %[[CRD]]
// CHECK:           vector.fma
// CHECK:           memref.load %[[CRD]]
// CHECK:           vector.fma
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           vector.store
// CHECK-NOT:     smlir.linear
func.func @ell_lockstep(%w: tensor<6x64xf32, #CSR64> {smlir.encoding = #smlir.ell<width = 9, crdWidth = 16>},
                        %x: tensor<8x64xf32>) -> tensor<8x6xf32> {
  %y = smlir.linear %x, %w : tensor<8x64xf32>, tensor<6x64xf32, #CSR64> -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

/// Rows of 3 entries (fewer than 8): unrolled whole, no entry loop at all;
/// an odd N (5) repeats the last row in the last tile (masked off).

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @ell_short_rows_unrolled(
// CHECK:         smlir.kernel "linear_ell3_8x64x5"
// CHECK-NOT:       iter_args
// CHECK:           arith.minui
// CHECK-COUNT-6:   vector.fma
// CHECK-NOT:       iter_args
// CHECK:           vector.maskedstore
func.func @ell_short_rows_unrolled(%w: tensor<5x64xf32, #CSR64> {smlir.encoding = #smlir.ell<width = 3>},
                                   %x: tensor<8x64xf32>) -> tensor<8x5xf32> {
  %y = smlir.linear %x, %w : tensor<8x64xf32>, tensor<5x64xf32, #CSR64> -> tensor<8x5xf32>
  return %y : tensor<8x5xf32>
}

// -----

/// 4 token blocks: not interleaved per call as CSR is (the rows are in
/// lockstep already): no i64 entries, the same loop over the rows' entries.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @ell_many_token_blocks_not_interleaved(
// CHECK:         smlir.kernel "linear_ell9_32x64x4"
// CHECK-NOT:       memref<?xi64>
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-8:     vector.fma
// CHECK-NOT:       memref<?xi64>
// CHECK:         bufferization.to_tensor
func.func @ell_many_token_blocks_not_interleaved(%w: tensor<4x64xf32, #CSR64> {smlir.encoding = #smlir.ell<width = 9>},
                                                 %x: tensor<32x64xf32>) -> tensor<32x4xf32> {
  %y = smlir.linear %x, %w : tensor<32x64xf32>, tensor<4x64xf32, #CSR64> -> tensor<32x4xf32>
  return %y : tensor<32x4xf32>
}

// -----

/// Decode (2 tokens): 8 entries at a time, x gathered, both rows in
/// lockstep over 16 of their 19 entries, the last 3 scalar; no position
/// read and no vector loop per row.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @ell_decode(
// CHECK-NOT:     sparse_tensor.positions
// CHECK:         smlir.kernel "linear_ell19_2x64x4"
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             vector.gather
// CHECK:             vector.fma
// CHECK:             vector.gather
// CHECK:             vector.fma
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           scf.for {{.*}} -> (f32)
// CHECK:           vector.reduction <add>
// CHECK:           scf.for {{.*}} -> (f32)
// CHECK:           vector.reduction <add>
func.func @ell_decode(%w: tensor<4x64xf32, #CSR64> {smlir.encoding = #smlir.ell<width = 19>},
                      %x: tensor<2x64xf32>) -> tensor<2x4xf32> {
  %y = smlir.linear %x, %w : tensor<2x64xf32>, tensor<4x64xf32, #CSR64> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

/// No width (picked when stored, not known here): read as the CSR it also
/// is, positions and all.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @negative_ell_without_width(
// CHECK:         sparse_tensor.positions
// CHECK:         smlir.kernel "linear_csr_8x64x4"
func.func @negative_ell_without_width(%w: tensor<4x64xf32, #CSR64> {smlir.encoding = #smlir.ell},
                                      %x: tensor<8x64xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x64xf32>, tensor<4x64xf32, #CSR64> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

/// A width past the row (65 > K = 64) cannot be ELL storage of this
/// weight: read as CSR.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @negative_ell_wider_than_rows(
// CHECK:         sparse_tensor.positions
// CHECK:         smlir.kernel "linear_csr_8x64x4"
func.func @negative_ell_wider_than_rows(%w: tensor<4x64xf32, #CSR64> {smlir.encoding = #smlir.ell<width = 65>},
                                        %x: tensor<8x64xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x64xf32>, tensor<4x64xf32, #CSR64> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

/// The ELL attribute on a weight that is not a function argument (a value
/// computed in the function) says nothing about it: CSR.

#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

// CHECK-LABEL: func.func @negative_ell_not_an_argument(
// CHECK:         smlir.kernel "linear_csr_8x64x4"
func.func @negative_ell_not_an_argument(%d: tensor<4x64xf32> {smlir.encoding = #smlir.ell<width = 3>},
                                        %x: tensor<8x64xf32>) -> tensor<8x4xf32> {
  %w = sparse_tensor.convert %d : tensor<4x64xf32> to tensor<4x64xf32, #CSR64>
  %y = smlir.linear %x, %w : tensor<8x64xf32>, tensor<4x64xf32, #CSR64> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
