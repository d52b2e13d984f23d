// RUN: sparse-mlir-opt %s -convert-smlir-to-nvgpu -split-input-file -verify-diagnostics

// A 2:4 weight that cannot run on sparse tensor cores is an error naming
// the tensor: the GPU path has no sparse fallback.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Sparse tensor cores take f16/bf16, not f32.
// expected-error @+1 {{2:4 weight 'fc.weight' (#smlir.nm<n = 2, m = 4>, 'tensor<64x32xf32>') cannot run on sparse tensor cores: expected f16 or bf16 elements}}
func.func @negative_f32_weight(%w: tensor<64x32xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x32xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %t = linalg.transpose ins(%w : tensor<64x32xf32, #NM24>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x32xf32>, tensor<32x64xf32>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM14 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[1, 4]), crdWidth = 8 }>

/// Only 2:4 exists in hardware.
// expected-error @+1 {{cannot run on sparse tensor cores: sparse tensor cores take 2:4 only}}
func.func @negative_1_4_weight(%w: tensor<64x32xf16, #NM14> {smlir.encoding = #smlir.nm<n = 1, m = 4>, smlir.tensor_name = "fc.weight"}) -> tensor<64x32xf16, #NM14> {
  return %w : tensor<64x32xf16, #NM14>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The kernel has no boundary handling: 48 rows are not whole 64-row tiles.
// expected-error @+1 {{2:4 weight 'fc.weight' (#smlir.nm<n = 2, m = 4>, 'tensor<48x64xf16>') cannot run on sparse tensor cores: expected rows to be a multiple of 64 and columns a multiple of 64}}
func.func @negative_partial_row_tile(%w: tensor<48x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf16>
  %t = linalg.transpose ins(%w : tensor<48x64xf16, #NM24>) outs(%e : tensor<64x48xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x48xf32>) -> tensor<64x48xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x48xf16>) outs(%z : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %y : tensor<64x48xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// 16 tokens are not a whole 32-token warp tile: the error is at the linear.
func.func @negative_partial_token_tile(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<16x64xf16>) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x64xf16, #NM24>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<16x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: 16 tokens are not a multiple of 32}}
  %y = linalg.matmul ins(%x, %t : tensor<16x64xf16>, tensor<64x64xf16>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// A reader other than x @ W^T (here the return) has no GPU lowering.
func.func @negative_other_reader(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}) -> tensor<64x64xf16, #NM24> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected it to be read only as x @ W^T (linalg.transpose [1, 0] into linalg.matmul)}}
  return %w : tensor<64x64xf16, #NM24>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The kernel starts from zero: accumulating into a given tensor is refused.
func.func @negative_nonzero_accumulator(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>, %acc: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %e = tensor.empty() : tensor<64x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x64xf16, #NM24>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected a zero-filled f32 accumulator}}
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>) outs(%acc : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

/// The encoding on a non-tensor argument: an error, not a failed cast.
// expected-error@+1 {{2:4 weight '#0' (#smlir.nm<n = 2, m = 4>) must be a ranked tensor, got 'memref<64x64xf16>'}}
func.func @nm_encoding_on_a_memref(%w: memref<64x64xf16> {smlir.encoding = #smlir.nm<n = 2, m = 4>}) {
  return
}
