// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of #smlir.hybrid, and smlir.sparsify's
// refusal of it (a hybrid weight is two tensors).

/// A hybrid is exactly two parts.
// expected-error@+1 {{hybrid needs exactly 2 parts, got 1}}
func.func @hybrid_one_part(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.csr], threshold = 0.5>}) {
  return
}

// -----

/// A dense part would store every value: no point in a split.
// expected-error@+1 {{hybrid parts must be sparse formats, got #smlir.dense}}
func.func @hybrid_dense_part(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.dense, #smlir.csr], threshold = 0.5>}) {
  return
}

// -----

/// No nesting: a part is one format.
// expected-error@+1 {{hybrid parts cannot be hybrid themselves}}
func.func @hybrid_nested(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.hybrid<[#smlir.bsr<block = [2, 2]>, #smlir.csr], threshold = 0.5>, #smlir.csr], threshold = 0.5>}) {
  return
}

// -----

// expected-error@+1 {{hybrid parts must differ, got #smlir.csr twice}}
func.func @hybrid_same_part_twice(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.csr, #smlir.csr], threshold = 0.5>}) {
  return
}

// -----

// expected-error@+1 {{hybrid threshold must be in [0, 1], got 1.5}}
func.func @hybrid_threshold_above_one(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.bsr<block = [2, 2]>, #smlir.csr], threshold = 1.5>}) {
  return
}

// -----

/// Parts must be encodings (the parameter's type is the encoding interface).
// expected-error@+2 {{invalid kind of attribute specified}}
// expected-error@+1 {{failed to parse SparseMLIR_HybridEncodingAttr parameter 'parts'}}
func.func @hybrid_part_not_an_encoding(%w: tensor<8x8xf32> {smlir.encoding = #smlir.hybrid<[#smlir.keep_all, #smlir.csr], threshold = 0.5>}) {
  return
}

// -----

/// smlir.sparsify produces one tensor: linear regions split a hybrid weight.
func.func @sparsify_refuses_hybrid(%x: tensor<8x8xf32>) {
  // expected-error@+1 {{'smlir.sparsify' op encoding #smlir.hybrid<[#smlir.bsr<block = [2, 2]>, #smlir.csr], threshold = 0.5> stores a tensor as two parts}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.hybrid<[#smlir.bsr<block = [2, 2]>, #smlir.csr], threshold = 0.5> -> tensor<8x8xf32>
  return
}
