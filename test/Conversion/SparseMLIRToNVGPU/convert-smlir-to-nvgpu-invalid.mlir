// RUN: sparse-mlir-opt %s -convert-smlir-to-nvgpu -split-input-file -verify-diagnostics

// A 2:4 weight that cannot run on sparse tensor cores is an error naming
// the tensor: the GPU path has no sparse fallback.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Sparse tensor cores take f16/bf16, not f32.
// expected-error @+1 {{2:4 weight 'fc.weight' (#smlir.nm<n = 2, m = 4>, 'tensor<64x32xf32>') cannot run on sparse tensor cores: expected f16 or bf16 elements}}
func.func @negative_f32_weight(%w: tensor<64x32xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x32xf32>) -> tensor<64x64xf32> {
  %y = smlir.linear %x, %w : tensor<64x32xf32>, tensor<64x32xf32, #NM24> -> tensor<64x64xf32>
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
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<48x64xf16, #NM24> -> tensor<64x48xf32>
  return %y : tensor<64x48xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// 16 tokens are not a whole 32-token warp tile: the error is at the linear.
func.func @negative_partial_token_tile(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<16x64xf16>) -> tensor<16x64xf32> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: 16 tokens are not a multiple of 32}}
  %y = smlir.linear %x, %w : tensor<16x64xf16>, tensor<64x64xf16, #NM24> -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// A reader other than smlir.linear (here the return) has no GPU lowering.
func.func @negative_other_reader(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}) -> tensor<64x64xf16, #NM24> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected it to be read only as x @ W^T by smlir.linear (smlir-raise-linear raises torch-mlir's linalg.matmul of its linalg.transpose [1, 0] into a zero-filled accumulator)}}
  return %w : tensor<64x64xf16, #NM24>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The conversion reads smlir.linear only: torch-mlir's form is raised
/// first (smlir-nm-cuda-pipeline runs smlir-raise-linear), here it is not.
func.func @negative_unraised_matmul(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf16>
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected it to be read only as x @ W^T by smlir.linear}}
  %t = linalg.transpose ins(%w : tensor<64x64xf16, #NM24>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The kernel accumulates in f32: an f16 result is refused.
func.func @negative_f16_result(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected an f32 result (the kernel accumulates in f32)}}
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf16>
  return %y : tensor<64x64xf16>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The 2:4 groups run along W's last dimension, which the MMA needs to be
/// the reduction (K): in an in_out W[K, N] it is N.
func.func @negative_in_out(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected an out_in smlir.linear (x @ W^T)}}
  %y = smlir.linear %x, %w orientation <in_out> : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The launch grid is static: so are the tokens.
func.func @negative_dynamic_tokens(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<?x64xf16>) -> tensor<?x64xf32> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected an x of static shape}}
  %y = smlir.linear %x, %w : tensor<?x64xf16>, tensor<64x64xf16, #NM24> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

func.func @negative_dynamic_bias(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>, %b: tensor<?xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected a bias of static shape}}
  %y = smlir.linear %x, %w bias %b : tensor<64x64xf16>, tensor<64x64xf16, #NM24>, tensor<?xf32> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

/// An smlir.linear not reading a 2:4 weight argument (here a dense one) has
/// no lowering on this path: an error, not a bufferization failure later.
func.func @negative_linear_of_dense_weight(%w: tensor<64x64xf16>, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  // expected-error @+1 {{smlir.linear has no GPU lowering: its weight is not a 2:4 argument of a public function}}
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

/// The encoding on a non-tensor argument: an error, not a failed cast.
// expected-error@+1 {{2:4 weight '#0' (#smlir.nm<n = 2, m = 4>) must be a ranked tensor, got 'memref<64x64xf16>'}}
func.func @nm_encoding_on_a_memref(%w: memref<64x64xf16> {smlir.encoding = #smlir.nm<n = 2, m = 4>}) {
  return
}
