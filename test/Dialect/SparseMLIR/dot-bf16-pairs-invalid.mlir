// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.dot_bf16_pairs verifier message.

func.func @pair_lanes(%acc: vector<16xf32>, %a: vector<16xbf16>, %b: vector<16xbf16>) -> vector<16xf32> {
  // expected-error@+1 {{'smlir.dot_bf16_pairs' op expects two bf16 lanes per f32 lane (32), got 'vector<16xbf16>'}}
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<16xf32>, vector<16xbf16>
  return %y : vector<16xf32>
}

// -----

func.func @lanes(%acc: vector<2xf32>, %a: vector<4xbf16>, %b: vector<4xbf16>) -> vector<2xf32> {
  // expected-error@+1 {{'smlir.dot_bf16_pairs' op expects 4, 8 or 16 f32 lanes (vdpbf16ps's 128-, 256- and 512-bit forms), got 'vector<2xf32>'}}
  %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<2xf32>, vector<4xbf16>
  return %y : vector<2xf32>
}
