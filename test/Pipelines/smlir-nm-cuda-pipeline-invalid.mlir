// RUN: not sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{chip=sm_75})' 2>&1 | FileCheck %s
// RUN: not sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{chip=bogus})' 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline)' -split-input-file -verify-diagnostics

// A chip without sparse tensor cores (or unknown to LLVM) is an error of the
// pipeline's options, not a fatal error in the NVPTX backend.

// CHECK: error: smlir-nm-cuda-pipeline: chip 'sm_75' has no sparse tensor cores LLVM can target
// BOGUS: error: smlir-nm-cuda-pipeline: chip 'bogus' has no sparse tensor cores LLVM can target
module {}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// A 2:4 linear accumulating into a given tensor is not F.linear: not
/// raised to smlir.linear, so its weight cannot run on sparse tensor cores.
func.func @negative_nonzero_accumulator(%w: tensor<64x64xf16> {smlir.weight}, %x: tensor<64x64xf16>, %acc: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %ws = smlir.sparsify %w : tensor<64x64xf16> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> {tensor_name = "fc.weight"} -> tensor<64x64xf16, #NM24>
  %e = tensor.empty() : tensor<64x64xf16>
  // expected-error @+1 {{2:4 weight 'fc.weight' cannot run on sparse tensor cores: expected it to be read only as x @ W^T by smlir.linear}}
  %t = linalg.transpose ins(%ws : tensor<64x64xf16, #NM24>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>) outs(%acc : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
