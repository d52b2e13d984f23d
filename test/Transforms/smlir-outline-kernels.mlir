// RUN: sparse-mlir-opt %s --split-input-file --smlir-outline-kernels | FileCheck %s

// Two kernels with the same body (up to their buffers) share one private
// function; the constant is cloned in, the buffers become arguments.
// CHECK-LABEL: func.func @two_same_kernels
// CHECK-SAME:    %[[A:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>
// CHECK-NOT:     scf.execute_region
// CHECK:         call @smlir_scale_8(%[[A]]) : (memref<8xf32>) -> ()
// CHECK-NEXT:    call @smlir_scale_8(%[[B]]) : (memref<8xf32>) -> ()
// CHECK:       func.func private @smlir_scale_8(%[[BUF:.*]]: memref<8xf32>)
// CHECK:         %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         scf.for
// CHECK:           memref.load %[[BUF]]
// CHECK:           arith.mulf %{{.*}}, %[[TWO]]
// CHECK:         return
// CHECK-NOT:   func.func private @smlir_scale_8
func.func @two_same_kernels(%a: memref<8xf32>, %b: memref<8xf32>) {
  %two = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.execute_region {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
    scf.yield
  } {smlir.kernel = "scale_8"}
  scf.execute_region {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %b[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %b[%i] : memref<8xf32>
    }
    scf.yield
  } {smlir.kernel = "scale_8"}
  return
}

// -----

// Same name, different constant: two functions.
// CHECK-LABEL: func.func @different_constants
// CHECK:         call @smlir_scale_8(
// CHECK:         call @smlir_scale_8_0(
// CHECK:       func.func private @smlir_scale_8(
// CHECK:         arith.constant 2.000000e+00 : f32
// CHECK:       func.func private @smlir_scale_8_0(
// CHECK:         arith.constant 3.000000e+00 : f32
func.func @different_constants(%a: memref<8xf32>) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.execute_region {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
    scf.yield
  } {smlir.kernel = "scale_8"}
  scf.execute_region {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %three : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
    scf.yield
  } {smlir.kernel = "scale_8"}
  return
}

// -----

// Untagged regions and regions with results stay where they are.
// CHECK-LABEL: func.func @untagged
// CHECK:         scf.execute_region
// CHECK:         scf.execute_region -> f32
// CHECK-NOT:     call
func.func @untagged(%a: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  scf.execute_region {
    %v = memref.load %a[%c0] : memref<8xf32>
    memref.store %v, %a[%c0] : memref<8xf32>
    scf.yield
  }
  %r = scf.execute_region -> f32 {
    %v = memref.load %a[%c0] : memref<8xf32>
    scf.yield %v : f32
  } {smlir.kernel = "returns"}
  return %r : f32
}

// -----

/// Only string-named kernels of the module's own functions are outlined: a
/// unit `smlir.kernel` and a kernel inside a nested module stay in place
/// (the outlined function would go where the nested call cannot see it).
// CHECK-LABEL: func.func @unnamed_kernel()
// CHECK:         scf.execute_region
// CHECK:       module @inner
// CHECK:         func.func @f(
// CHECK:           scf.execute_region
// CHECK-NOT:   func.func private
func.func @unnamed_kernel() {
  scf.execute_region {
    scf.yield
  } {smlir.kernel}
  return
}
module @inner {
  func.func @f(%a: memref<8xf32>) {
    %c0 = arith.constant 0 : index
    %two = arith.constant 2.0 : f32
    scf.execute_region {
      memref.store %two, %a[%c0] : memref<8xf32>
      scf.yield
    } {smlir.kernel = "k"}
    return
  }
}
