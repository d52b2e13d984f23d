// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of the smlir attributes and of
// smlir.sparsify. Attribute parameter errors are reported at the attribute,
// which is on the op's line.

//===----------------------------------------------------------------------===//
// Encoding parameters
//===----------------------------------------------------------------------===//

/// Index widths are limited to what sparse_tensor supports.
func.func @csr_pos_width_not_supported(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{posWidth must be 0 (index), 8, 16, 32 or 64, got 12}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 12> -> tensor<8x8xf32>
  return
}

// -----

func.func @csc_crd_width_not_supported(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{crdWidth must be 0 (index), 8, 16, 32 or 64, got 7}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csc<crdWidth = 7> -> tensor<8x8xf32>
  return
}

// -----

/// Every encoding with widths checks them, not only CSR/CSC.
func.func @coo_pos_width_not_supported(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{posWidth must be 0 (index), 8, 16, 32 or 64, got 128}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.coo<posWidth = 128> -> tensor<8x8xf32>
  return
}

// -----

func.func @bsr_crd_width_not_supported(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{crdWidth must be 0 (index), 8, 16, 32 or 64, got 24}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 2], crdWidth = 24> -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_crd_width_not_supported(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{crdWidth must be 0 (index), 8, 16, 32 or 64, got 4}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4, crdWidth = 4> -> tensor<8x8xf32>
  return
}

// -----

/// BSR blocks are 2-d.
func.func @bsr_block_with_3_dims(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{bsr block must have 2 sizes [rows, cols], got [2, 2, 2]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 2, 2]> -> tensor<8x8xf32>
  return
}

// -----

func.func @bsr_block_size_zero(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{block sizes must be positive, got [2, 0]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 0]> -> tensor<8x8xf32>
  return
}

// -----

/// A block size of 1 makes the block map non-invertible (sparse_tensor asserts).
func.func @bsr_block_size_one(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{bsr block sizes must be >= 2, got [1, 4] (sparse_tensor cannot store a block of size 1 along a dimension); use csr, or block [2, 4]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [1, 4]> -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_n_equal_to_m(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{n:m needs 0 < n < m, got 4:4}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 4, m = 4> -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_n_zero(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{n:m needs 0 < n < m, got 0:4}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 0, m = 4> -> tensor<8x8xf32>
  return
}

// -----

/// In-group coordinates must fit in 8 bits.
func.func @nm_m_above_255(%x: tensor<8x256xf32>) {
  // expected-error@+1 {{n:m supports m <= 255, got m = 256}}
  %r = smlir.sparsify %x : tensor<8x256xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 256> -> tensor<8x256xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sparsifier parameters
//===----------------------------------------------------------------------===//

func.func @random_fraction_below_0(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got -0.5}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = -0.5> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @random_fraction_above_1(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got 1e+01}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 10.0, seed = 1> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @random_fraction_nan(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got nan}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0x7FF8000000000000> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @scalar_fraction_above_1(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got 1.5}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<1.5> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @scalar_fraction_below_0(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got -0.001}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<-1.0e-3> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @scalar_fraction_nan(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got nan}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<0x7FF8000000000000> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @block_fraction_below_0(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got -0.1}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = -0.1, block = [4, 4]> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @block_fraction_above_1(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{fraction must be in [0, 1], got 2}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 2.0, block = [4, 4]> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @block_fraction_empty_block(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{block must have at least one dimension}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.5, block = []> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @block_fraction_negative_block_size(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{block sizes must be positive, got [-2, 4]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [-2, 4]> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

/// NaN is neither >= nor < any threshold; it is rejected explicitly.
func.func @threshold_nan(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{threshold must not be NaN}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0x7FF8000000000000> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @threshold_negative(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{threshold must be >= 0 (it is compared with |x|), got -0.5}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<-0.5> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_magnitude_n_not_below_m(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{n:m needs 0 < n < m, got 5:4}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 5, m = 4> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_magnitude_m_above_255(%x: tensor<8x512xf32>) {
  // expected-error@+1 {{n:m supports m <= 255, got m = 512}}
  %r = smlir.sparsify %x : tensor<8x512xf32> with #smlir.nm_magnitude<n = 2, m = 512> as #smlir.dense -> tensor<8x512xf32>
  return
}

// -----

func.func @nm_magnitude_transposable_not_a_bool(%x: tensor<8x8xf32>) {
  // expected-error@+2 {{expected 'true' or 'false'}}
  // expected-error@+1 {{failed to parse SparseMLIR_NMMagnitudeAttr parameter 'transposable'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = yes> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// smlir.sparsify: source and result types
//===----------------------------------------------------------------------===//

/// The properties are constrained to the encoding / sparsifier interfaces
/// (only reachable through the generic form).
func.func @sparsifier_used_as_encoding(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{invalid properties {encoding = #smlir.keep_all, sparsifier = #smlir.keep_all} for op smlir.sparsify: Invalid attribute `encoding` in property conversion: #smlir.keep_all}}
  %r = "smlir.sparsify"(%x) <{sparsifier = #smlir.keep_all, encoding = #smlir.keep_all}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @encoding_used_as_sparsifier(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{invalid properties {encoding = #smlir.dense, sparsifier = #smlir.dense} for op smlir.sparsify: Invalid attribute `sparsifier` in property conversion: #smlir.dense}}
  %r = "smlir.sparsify"(%x) <{sparsifier = #smlir.dense, encoding = #smlir.dense}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

func.func @source_already_sparse(%x: tensor<8x8xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sparsify' op source must be a dense tensor, got 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32, #CSR> with #smlir.keep_all as #smlir.csr -> tensor<8x8xf32, #CSR>
  return
}

// -----

func.func @result_shape_differs(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result 'tensor<8x4xf32>' must have the shape and element type of the source 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x4xf32>
  return
}

// -----

/// A static result dimension is not the same shape as a dynamic source one.
func.func @result_static_for_dynamic_source(%x: tensor<?x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result 'tensor<8x8xf32>' must have the shape and element type of the source 'tensor<?x8xf32>'}}
  %r = smlir.sparsify %x : tensor<?x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @result_element_type_differs(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result 'tensor<8x8xf16>' must have the shape and element type of the source 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf16>
  return
}

// -----

/// The result must carry exactly the encoding's sparse_tensor equivalent:
/// here CSR where CSC is asked for.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

func.func @result_encoding_differs(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result type must be 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>>' for encoding #smlir.csc, got 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csc -> tensor<8x8xf32, #CSR>
  return
}

// -----

/// Widths are part of the encoding: 32-bit CSR is not 64-bit CSR.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

func.func @result_encoding_widths_differ(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result type must be 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 64 }>>' for encoding #smlir.csr<posWidth = 64, crdWidth = 64>, got}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 64, crdWidth = 64> -> tensor<8x8xf32, #CSR>
  return
}

// -----

/// A sparse encoding needs a sparse result type, not a plain tensor.
func.func @result_missing_encoding(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result type must be 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>>' for encoding #smlir.csr, got 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xf32>
  return
}

// -----

/// #smlir.dense needs a plain result type.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

func.func @dense_with_sparse_result(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result type must be 'tensor<8x8xf32>' for encoding #smlir.dense, got 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf32, #CSR>
  return
}

// -----

//===----------------------------------------------------------------------===//
// smlir.sparsify: encoding vs. shape
//===----------------------------------------------------------------------===//

func.func @csr_on_rank_1(%x: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.csr needs a tensor of rank >= 2, got rank 1 (shape [8])}}
  %r = smlir.sparsify %x : tensor<8xf32> with #smlir.keep_all as #smlir.csr -> tensor<8xf32>
  return
}

// -----

func.func @csc_on_rank_1(%x: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.csc needs a tensor of rank >= 2, got rank 1 (shape [8])}}
  %r = smlir.sparsify %x : tensor<8xf32> with #smlir.keep_all as #smlir.csc -> tensor<8xf32>
  return
}

// -----

func.func @coo_on_rank_0(%x: tensor<f32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.coo needs a tensor of rank >= 1, got rank 0 (shape [])}}
  %r = smlir.sparsify %x : tensor<f32> with #smlir.keep_all as #smlir.coo -> tensor<f32>
  return
}

// -----

func.func @nm_on_rank_0(%x: tensor<f32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.nm<n = 2, m = 4> needs a tensor of rank >= 1, got rank 0 (shape [])}}
  %r = smlir.sparsify %x : tensor<f32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4> -> tensor<f32>
  return
}

// -----

func.func @nm_last_dim_not_divisible(%x: tensor<8x6xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.nm<n = 2, m = 4> needs m = 4 to divide the last dimension, got shape [8, 6]}}
  %r = smlir.sparsify %x : tensor<8x6xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4> -> tensor<8x6xf32>
  return
}

// -----

/// The dynamic dimension is printed as `?`; only the static last one is checked.
func.func @nm_last_dim_not_divisible_dynamic_rows(%x: tensor<?x10xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.nm<n = 1, m = 4> needs m = 4 to divide the last dimension, got shape [?, 10]}}
  %r = smlir.sparsify %x : tensor<?x10xf32> with #smlir.keep_all as #smlir.nm<n = 1, m = 4> -> tensor<?x10xf32>
  return
}

// -----

func.func @bsr_on_rank_3(%x: tensor<2x4x4xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.bsr<block = [2, 2]> needs a tensor of rank 2, got rank 3 (shape [2, 4, 4])}}
  %r = smlir.sparsify %x : tensor<2x4x4xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 2]> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @bsr_block_not_dividing(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.bsr<block = [2, 3]> needs block [2, 3] to divide the shape [8, 8]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 3]> -> tensor<8x8xf32>
  return
}

// -----

/// One block along a dimension: its block coordinate folds to 0.
func.func @bsr_block_spanning_a_dimension(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.bsr<block = [4, 4]> needs at least 2 blocks along each dimension of shape [4, 8]}}
  %r = smlir.sparsify %x : tensor<4x8xf32> with #smlir.keep_all as #smlir.bsr<block = [4, 4]> -> tensor<4x8xf32>
  return
}

// -----

/// The row block is checked too, not only the column block.
func.func @bsr_row_block_not_dividing(%x: tensor<6x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.bsr<block = [4, 4]> needs block [4, 4] to divide the shape [6, 8]}}
  %r = smlir.sparsify %x : tensor<6x8xf32> with #smlir.keep_all as #smlir.bsr<block = [4, 4]> -> tensor<6x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// smlir.sparsify: sparsifier vs. element type and shape
//===----------------------------------------------------------------------===//

/// Sparsifiers that compare magnitudes need floats.
func.func @threshold_on_integer_tensor(%x: tensor<8x8xi32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.threshold<0.05> compares magnitudes and needs a floating-point tensor, got element type 'i32'}}
  %r = smlir.sparsify %x : tensor<8x8xi32> with #smlir.threshold<0.05> as #smlir.dense -> tensor<8x8xi32>
  return
}

// -----

func.func @scalar_fraction_on_integer_tensor(%x: tensor<8x8xi8>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.scalar_fraction<0.5> compares magnitudes and needs a floating-point tensor, got element type 'i8'}}
  %r = smlir.sparsify %x : tensor<8x8xi8> with #smlir.scalar_fraction<0.5> as #smlir.dense -> tensor<8x8xi8>
  return
}

// -----

func.func @block_fraction_on_integer_tensor(%x: tensor<8x8xi32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.block_fraction<fraction = 0.5, block = [4, 4]> compares magnitudes and needs a floating-point tensor, got element type 'i32'}}
  %r = smlir.sparsify %x : tensor<8x8xi32> with #smlir.block_fraction<fraction = 0.5, block = [4, 4]> as #smlir.dense -> tensor<8x8xi32>
  return
}

// -----

func.func @nm_magnitude_on_integer_tensor(%x: tensor<8x8xi32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4> compares magnitudes and needs a floating-point tensor, got element type 'i32'}}
  %r = smlir.sparsify %x : tensor<8x8xi32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.dense -> tensor<8x8xi32>
  return
}

// -----

func.func @block_fraction_block_not_dividing(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.block_fraction<fraction = 0.5, block = [3, 4]> needs its block to divide the trailing dimensions of the shape [8, 8]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [3, 4]> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

/// The block applies to the trailing dimensions: [4] is checked against 6, not 8.
func.func @block_fraction_1d_block_not_dividing_last_dim(%x: tensor<8x6xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.block_fraction<fraction = 0.5, block = [4]> needs its block to divide the trailing dimensions of the shape [8, 6]}}
  %r = smlir.sparsify %x : tensor<8x6xf32> with #smlir.block_fraction<fraction = 0.5, block = [4]> as #smlir.dense -> tensor<8x6xf32>
  return
}

// -----

func.func @block_fraction_block_rank_above_tensor_rank(%x: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.block_fraction<fraction = 0.5, block = [2, 2]> has a 2-d block but the tensor has rank 1}}
  %r = smlir.sparsify %x : tensor<8xf32> with #smlir.block_fraction<fraction = 0.5, block = [2, 2]> as #smlir.dense -> tensor<8xf32>
  return
}

// -----

func.func @nm_magnitude_dim_too_large(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, dim = 2> has dim = 2, out of range for rank 2}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = 2> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_magnitude_dim_too_negative(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, dim = -3> has dim = -3, out of range for rank 2}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = -3> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

/// A rank-0 tensor has no dimension for the default dim = -1.
func.func @nm_magnitude_on_rank_0(%x: tensor<f32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4> has dim = -1, out of range for rank 0}}
  %r = smlir.sparsify %x : tensor<f32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.dense -> tensor<f32>
  return
}

// -----

/// The default dim is the last one.
func.func @nm_magnitude_m_not_dividing_last_dim(%x: tensor<8x6xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4> needs m = 4 to divide dimension 1, got shape [8, 6]}}
  %r = smlir.sparsify %x : tensor<8x6xf32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.dense -> tensor<8x6xf32>
  return
}

// -----

/// A negative dim is normalized in the message.
func.func @nm_magnitude_m_not_dividing_negative_dim(%x: tensor<6x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, dim = -2> needs m = 4 to divide dimension 0, got shape [6, 8]}}
  %r = smlir.sparsify %x : tensor<6x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = -2> as #smlir.dense -> tensor<6x8xf32>
  return
}

// -----

func.func @nm_magnitude_transposable_on_rank_3(%x: tensor<2x8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, transposable = true> (transposable) needs a matrix, got rank 3}}
  %r = smlir.sparsify %x : tensor<2x8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as #smlir.dense -> tensor<2x8x8xf32>
  return
}

// -----

/// Transposable n:m tiles m x m: both dimensions must be divisible, even the
/// one that is not `dim`.
func.func @nm_magnitude_transposable_rows_not_divisible(%x: tensor<6x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, transposable = true> needs m = 4 to divide both dimensions, got shape [6, 8]}}
  %r = smlir.sparsify %x : tensor<6x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as #smlir.dense -> tensor<6x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tensor_name prefix
//===----------------------------------------------------------------------===//

/// The op's own checks name the tensor.
func.func @tensor_name_prefix_on_type_mismatch(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'linear1.weight': result 'tensor<8x4xf32>' must have the shape and element type of the source 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense {tensor_name = "linear1.weight"} -> tensor<8x4xf32>
  return
}

// -----

/// Encoding shape checks report through the op and name the tensor too.
func.func @tensor_name_prefix_on_encoding_shape(%x: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'bias': encoding #smlir.csr needs a tensor of rank >= 2, got rank 1 (shape [8])}}
  %r = smlir.sparsify %x : tensor<8xf32> with #smlir.keep_all as #smlir.csr {tensor_name = "bias"} -> tensor<8xf32>
  return
}

// -----

/// Sparsifier shape checks name the tensor too.
func.func @tensor_name_prefix_on_sparsifier_shape(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'w': sparsifier #smlir.block_fraction<fraction = 0.5, block = [3, 4]> needs its block to divide the trailing dimensions of the shape [8, 8]}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [3, 4]> as #smlir.dense {tensor_name = "w"} -> tensor<8x8xf32>
  return
}

// -----

func.func @tensor_name_prefix_on_element_type(%x: tensor<8x8xi32>) {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'w': sparsifier #smlir.threshold<0.05> compares magnitudes and needs a floating-point tensor, got element type 'i32'}}
  %r = smlir.sparsify %x : tensor<8x8xi32> with #smlir.threshold<0.05> as #smlir.dense {tensor_name = "w"} -> tensor<8x8xi32>
  return
}

// -----

func.func @tensor_name_prefix_on_result_encoding(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'w': result type must be 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>>' for encoding #smlir.csr, got 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr {tensor_name = "w"} -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_rows_zero(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{rows sharing a pattern must be >= 1, got 0}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4, rows = 0> -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_rows_on_a_vector(%x: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op #smlir.nm<n = 2, m = 4, rows = 2> shares patterns across rows: needs rank >= 2, got shape [8]}}
  %r = smlir.sparsify %x : tensor<8xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4, rows = 2> -> tensor<8xf32>
  return
}

// -----

func.func @nm_magnitude_rows_transposable(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{a transposable n:m pattern cannot be shared by 4 rows}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true, rows = 4> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

func.func @nm_magnitude_rows_not_last_dim(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, dim = 0, rows = 2> shares patterns across rows: needs dim to be the last dimension, got dim = 0 for rank 2}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = 0, rows = 2> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

/// smlir.device is typed: the old string spelling is rejected.
// expected-error@+1 {{'func.func' op argument #0: 'smlir.device' expects a #smlir.device_buffer, got "nm24_values"}}
func.func @device_as_string(%v: memref<4x512xf16> {smlir.device = "nm24_values"}) {
  return
}

// -----

/// smlir.kernel_operand is typed: the old string spelling is rejected.
// expected-error@+1 {{'func.func' op argument #0: 'smlir.kernel_operand' expects a #smlir.kernel_operand, got "x"}}
func.func @kernel_operand_as_string(%dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = "x"}) {
  return
}

// -----

/// A scratch buffer must say which kernel operand it is.
// expected-error@+1 {{'func.func' op argument #0: 'smlir.device' #smlir.device_buffer<scratch> needs 'smlir.kernel_operand' (which kernel operand)}}
func.func @scratch_without_kernel_operand(%dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>}) {
  return
}

// -----

/// Only scratch buffers are kernel operands of their own: the values and
/// metadata are the weight.
// expected-error@+1 {{'func.func' op argument #0: 'smlir.kernel_operand' is only valid on a 'smlir.device' = #smlir.device_buffer<scratch> argument}}
func.func @kernel_operand_on_values(%v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.kernel_operand = #smlir.kernel_operand<x>}) {
  return
}

// -----

// expected-error@+1 {{'func.func' op argument #0: 'smlir.kernel_operand' is only valid on a 'smlir.device' = #smlir.device_buffer<scratch> argument}}
func.func @kernel_operand_without_device(%dx: memref<64x64xf16> {smlir.kernel_operand = #smlir.kernel_operand<x>}) {
  return
}

// -----

/// An unknown case of either enum is a parse error that lists the cases.
// expected-error@+2 {{expected ::mlir::smlir::DeviceBuffer to be one of: nm24_values, nm24_metadata, scratch}}
// expected-error@+1 {{failed to parse SparseMLIR_DeviceBufferAttr parameter 'value'}}
func.func @unknown_device_buffer(%v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<values>}) {
  return
}

// -----

// expected-error@+2 {{expected ::mlir::smlir::KernelOperand to be one of: x, y, bias}}
// expected-error@+1 {{failed to parse SparseMLIR_KernelOperandAttr parameter 'value'}}
func.func @unknown_kernel_operand(%dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<w>}) {
  return
}
