// RUN: sparse-mlir-opt %s -smlir-decompose-linear -split-input-file -verify-diagnostics

/// Accumulate-into is the micro-kernels' output stage: the generic
/// decomposition refuses it by name rather than drop `into`.

func.func @negative_into_dynamic_tokens(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>, %into: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error@+1 {{'smlir.linear' op accumulates into y (`into`), which only the CPU micro-kernels of smlir-lower-sparse-linear lower}}
  %y = smlir.linear %x, %w into(%into : tensor<?x16xf32>) : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
