// RUN: sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-approximate-math))' | FileCheck %s

// f32 erf (GELU) becomes a polynomial (FMAs): no math.erf is left to become a libm call.
// CHECK-LABEL: func.func @erf_f32
// CHECK-NOT: math.erf
// CHECK: math.fma
// CHECK: return
func.func @erf_f32(%x: f32) -> f32 {
  %y = math.erf %x : f32
  return %y : f32
}

// -----

// Vectors of f32 (softmax's exp after vectorization) are approximated too.
// CHECK-LABEL: func.func @exp_vector
// CHECK-NOT: math.exp
// CHECK: math.fma {{.*}} : vector<8xf32>
func.func @exp_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.exp %x : vector<8xf32>
  return %y : vector<8xf32>
}

// -----

// f64 keeps the exact op (it becomes a libm call later).
// CHECK-LABEL: func.func @exp_f64
// CHECK: math.exp %{{.*}} : f64
func.func @exp_f64(%x: f64) -> f64 {
  %y = math.exp %x : f64
  return %y : f64
}

// -----

// sqrt is exact in hardware and is left alone.
// CHECK-LABEL: func.func @sqrt_untouched
// CHECK: math.sqrt
func.func @sqrt_untouched(%x: f32) -> f32 {
  %y = math.sqrt %x : f32
  return %y : f32
}
