// RUN: sparse-mlir-opt %s --split-input-file --verify-diagnostics --smlir-widen-bool-buffers | FileCheck %s

// A bool buffer (the accumulator of `.all(-1)`) gets i8 elements: stores
// zero-extend, loads truncate back to i1, the alloc and dealloc change type.
// CHECK-LABEL: func.func @load_store
// CHECK-SAME:      (%[[B:.*]]: i1, %[[I:.*]]: index) -> i1
// CHECK:         %[[M:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x7xi8>
// CHECK:         %[[W:.*]] = arith.extui %[[B]] : i1 to i8
// CHECK:         memref.store %[[W]], %[[M]][%[[I]], %[[I]]] : memref<2x7xi8>
// CHECK:         %[[L:.*]] = memref.load %[[M]][%[[I]], %[[I]]] : memref<2x7xi8>
// CHECK:         %[[V:.*]] = arith.trunci %[[L]] : i8 to i1
// CHECK:         memref.dealloc %[[M]] : memref<2x7xi8>
// CHECK:         return %[[V]] : i1
// CHECK-NOT:     xi1>
func.func @load_store(%b: i1, %i: index) -> i1 {
  %m = memref.alloc() {alignment = 64 : i64} : memref<2x7xi1>
  memref.store %b, %m[%i, %i] : memref<2x7xi1>
  %v = memref.load %m[%i, %i] : memref<2x7xi1>
  memref.dealloc %m : memref<2x7xi1>
  return %v : i1
}

// -----

// Buffers that are only passed along: signatures, calls, views, scf.for
// iter_args. Other element types are left alone.
// CHECK-LABEL: func.func private @callee
// CHECK-SAME:      (memref<4x4xi8>) -> memref<4x4xi8>
// CHECK-LABEL: func.func @pass_along
// CHECK-SAME:      (%[[A:.*]]: memref<4x4xi8>, %[[F:.*]]: memref<4xf32>) -> memref<16xi8>
// CHECK:         %[[R:.*]] = call @callee(%[[A]]) : (memref<4x4xi8>) -> memref<4x4xi8>
// CHECK:         %[[S:.*]] = memref.subview %[[R]][0, 0] [2, 4] [1, 1] : memref<4x4xi8> to memref<2x4xi8, strided<[4, 1]>>
// CHECK:         scf.for {{.*}} iter_args(%[[X:.*]] = %[[R]]) -> (memref<4x4xi8>)
// CHECK:           scf.yield %[[X]] : memref<4x4xi8>
// CHECK:         memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<4x4xi8> into memref<16xi8>
// CHECK:         memref.load %[[F]]
// CHECK-NOT:     xi1>
func.func private @callee(memref<4x4xi1>) -> memref<4x4xi1>
func.func @pass_along(%a: memref<4x4xi1>, %f: memref<4xf32>) -> memref<16xi1> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = call @callee(%a) : (memref<4x4xi1>) -> memref<4x4xi1>
  %s = memref.subview %r[0, 0] [2, 4] [1, 1] : memref<4x4xi1> to memref<2x4xi1, strided<[4, 1]>>
  %l = scf.for %i = %c0 to %c4 step %c1 iter_args(%x = %r) -> (memref<4x4xi1>) {
    scf.yield %x : memref<4x4xi1>
  }
  %c = memref.collapse_shape %l [[0, 1]] : memref<4x4xi1> into memref<16xi1>
  %v = memref.load %f[%c0] : memref<4xf32>
  return %c : memref<16xi1>
}

// -----

// A constant bool mask (a causal mask folded to a global) keeps its values.
// CHECK-LABEL: memref.global "private" constant @mask : memref<2x2xi8> = dense<{{\[\[}}0, 1], [0, 0]]>
// CHECK-LABEL: func.func @global
// CHECK:         %[[G:.*]] = memref.get_global @mask : memref<2x2xi8>
// CHECK:         %[[L:.*]] = memref.load %[[G]]
// CHECK:         arith.trunci %[[L]] : i8 to i1
memref.global "private" constant @mask : memref<2x2xi1> = dense<[[false, true], [false, false]]>
func.func @global(%i: index) -> i1 {
  %g = memref.get_global @mask : memref<2x2xi1>
  %v = memref.load %g[%i, %i] : memref<2x2xi1>
  return %v : i1
}

// -----

// Vector accesses of bool buffers: data vectors are widened, masks (also
// vector<..xi1>) are not; a vector access of an f32 buffer is untouched.
// CHECK-LABEL: func.func @vectors
// CHECK-SAME:      (%[[M:.*]]: memref<64xi8>, %[[F:.*]]: memref<64xf32>, %[[I:.*]]: index, %[[K:.*]]: vector<8xi1>, %[[V:.*]]: vector<8xi1>)
// CHECK:         %[[L:.*]] = vector.load %[[M]][%[[I]]] : memref<64xi8>, vector<8xi8>
// CHECK:         %[[LT:.*]] = arith.trunci %[[L]] : vector<8xi8> to vector<8xi1>
// CHECK:         %[[VW:.*]] = arith.extui %[[V]] : vector<8xi1> to vector<8xi8>
// CHECK:         vector.store %[[VW]], %[[M]][%[[I]]] : memref<64xi8>, vector<8xi8>
// CHECK:         %[[PW:.*]] = arith.extui %[[V]] : vector<8xi1> to vector<8xi8>
// CHECK:         %[[ML:.*]] = vector.maskedload %[[M]][%[[I]]], %[[K]], %[[PW]] : memref<64xi8>, vector<8xi1>, vector<8xi8> into vector<8xi8>
// CHECK:         arith.trunci %[[ML]] : vector<8xi8> to vector<8xi1>
// CHECK:         %[[SW:.*]] = arith.extui %[[LT]] : vector<8xi1> to vector<8xi8>
// CHECK:         vector.maskedstore %[[M]][%[[I]]], %[[K]], %[[SW]] : memref<64xi8>, vector<8xi1>, vector<8xi8>
// CHECK:         %[[PAD:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK:         %[[TR:.*]] = vector.transfer_read %[[M]][%[[I]]], %[[PAD]], %[[K]] {in_bounds = [true]} : memref<64xi8>, vector<8xi8>
// CHECK:         arith.trunci %[[TR]] : vector<8xi8> to vector<8xi1>
// CHECK:         %[[TW:.*]] = arith.extui %{{.*}} : vector<8xi1> to vector<8xi8>
// CHECK:         vector.transfer_write %[[TW]], %[[M]][%[[I]]], %[[K]] {in_bounds = [true]} : vector<8xi8>, memref<64xi8>
// CHECK:         vector.maskedload %[[F]][%[[I]]], %[[K]], %{{.*}} : memref<64xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
func.func @vectors(%m: memref<64xi1>, %f: memref<64xf32>, %i: index, %k: vector<8xi1>, %v: vector<8xi1>) -> vector<8xf32> {
  %false = arith.constant false
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %l = vector.load %m[%i] : memref<64xi1>, vector<8xi1>
  vector.store %v, %m[%i] : memref<64xi1>, vector<8xi1>
  %ml = vector.maskedload %m[%i], %k, %v : memref<64xi1>, vector<8xi1>, vector<8xi1> into vector<8xi1>
  vector.maskedstore %m[%i], %k, %l : memref<64xi1>, vector<8xi1>, vector<8xi1>
  %t = vector.transfer_read %m[%i], %false, %k {in_bounds = [true]} : memref<64xi1>, vector<8xi1>
  %a = arith.andi %t, %ml : vector<8xi1>
  vector.transfer_write %a, %m[%i], %k {in_bounds = [true]} : vector<8xi1>, memref<64xi1>
  %fl = vector.maskedload %f[%i], %k, %zero : memref<64xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  return %fl : vector<8xf32>
}

// -----

// Sub-byte buffers it does not widen are an error of the pass, not an
// abort in the LLVM lowering.
func.func @negative_narrow_float(%m: memref<4xf4E2M1FN>, %i: index) -> f4E2M1FN {
  // expected-error @below {{smlir-widen-bool-buffers: buffer of sub-byte elements ('memref<4xf4E2M1FN>') left: MLIR 22 cannot lower its loads and stores to LLVM}}
  %v = memref.load %m[%i] : memref<4xf4E2M1FN>
  return %v : f4E2M1FN
}

// -----

// An op with an i1 buffer it has no rewrite for fails the pass.
func.func @negative_unknown_op(%m: memref<4xi1>, %i: vector<8xindex>, %k: vector<8xi1>, %p: vector<8xi1>) -> vector<8xi1> {
  %c0 = arith.constant 0 : index
  // expected-error @below {{smlir-widen-bool-buffers: cannot give the i1 (bool) buffer of 'vector.gather' i8 elements; MLIR 22 cannot lower i1 loads and stores to LLVM}}
  %g = vector.gather %m[%c0][%i], %k, %p : memref<4xi1>, vector<8xindex>, vector<8xi1>, vector<8xi1> into vector<8xi1>
  return %g : vector<8xi1>
}
