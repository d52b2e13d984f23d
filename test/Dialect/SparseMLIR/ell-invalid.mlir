// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of #smlir.ell, of #smlir.hybrid with an ell
// part, and smlir.sparsify's refusal of an ell without a width.

/// A row stores at least one entry.
// expected-error@+1 {{ell width must be >= 1 (nonzeros stored per row), got 0}}
func.func @ell_width_zero(%w: tensor<8x8xf32> {smlir.encoding = #smlir.ell<width = 0>}) {
  return
}

// -----

// expected-error@+1 {{ell width must be >= 1 (nonzeros stored per row), got -3}}
func.func @ell_width_negative(%w: tensor<8x8xf32> {smlir.encoding = #smlir.ell<width = -3>}) {
  return
}

// -----

// expected-error@+1 {{crdWidth must be 0 (index), 8, 16, 32 or 64, got 12}}
func.func @ell_bad_crd_width(%w: tensor<8x8xf32> {smlir.encoding = #smlir.ell<width = 2, crdWidth = 12>}) {
  return
}

// -----

/// ELL holds each row's first nonzeros: it cannot be the remainder.
// expected-error@+1 {{hybrid's ell part must be the first (it holds each row's first nonzeros, the second part the rest), got #smlir.ell<width = 2> second}}
func.func @hybrid_ell_second(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.coo, #smlir.ell<width = 2>], threshold = 0.5>}) {
  return
}

// -----

/// The rest of a row must be addressable by row: coo or csr.
// expected-error@+1 {{hybrid's ell part needs a coo or csr second part for the rows' remaining nonzeros, got #smlir.bsr<block = [2, 2]>}}
func.func @hybrid_ell_then_bsr(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.ell<width = 2>, #smlir.bsr<block = [2, 2]>], threshold = 0.5>}) {
  return
}

// -----

/// smlir.sparsify produces a sparse_tensor value: ell has one (the CSR of
/// its fixed-width rows) only once its width is known.
func.func @sparsify_refuses_ell_without_width(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.ell has no width (it is picked when a weight is stored; its sparse_tensor form needs one): give #smlir.ell<width = k>}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.ell -> tensor<8x8xf32>
  return
}

// -----

/// With a width the result is that CSR (64-bit positions): a dense result
/// type is refused.
func.func @sparsify_ell_result_is_its_csr(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op result type must be 'tensor<8x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>>' for encoding #smlir.ell<width = 2>, got 'tensor<8x8xf32>'}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.ell<width = 2> -> tensor<8x8xf32>
  return
}
