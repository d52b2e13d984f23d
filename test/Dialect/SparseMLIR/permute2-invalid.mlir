// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.permute2 verifier message.

func.func @index_lanes(%low: vector<16xf32>, %index: vector<8xi32>, %high: vector<16xf32>) -> vector<16xf32> {
  // expected-error@+1 {{'smlir.permute2' op expects one index per lane (16), got 'vector<8xi32>'}}
  %x = smlir.permute2 %low, %index, %high : vector<16xf32>, vector<8xi32>
  return %x : vector<16xf32>
}

// -----

func.func @lanes(%low: vector<4xf32>, %index: vector<4xi32>, %high: vector<4xf32>) -> vector<4xf32> {
  // expected-error@+1 {{'smlir.permute2' op expects 8 or 16 lanes (AVX-512's 256- and 512-bit vpermi2ps), got 'vector<4xf32>'}}
  %x = smlir.permute2 %low, %index, %high : vector<4xf32>, vector<4xi32>
  return %x : vector<4xf32>
}
