// RUN: sparse-mlir-opt %s --split-input-file --smlir-outline-kernels | FileCheck %s

// Two kernels with the same body (up to their buffers) share one private
// function; the constant is cloned in, the buffers become arguments.
// CHECK-LABEL: func.func @two_same_kernels
// CHECK-SAME:    %[[A:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>
// CHECK-NOT:     smlir.kernel
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
  smlir.kernel "scale_8" {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
  }
  smlir.kernel "scale_8" {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %b[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %b[%i] : memref<8xf32>
    }
  }
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
  smlir.kernel "scale_8" {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
  }
  smlir.kernel "scale_8" {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %three : f32
      memref.store %w, %a[%i] : memref<8xf32>
    }
  }
  return
}

// -----

// Other regions (an scf.execute_region, even one carrying an `smlir.kernel`
// attribute) stay where they are.
// CHECK-LABEL: func.func @not_kernels
// CHECK:         scf.execute_region
// CHECK:         scf.execute_region
// CHECK-NOT:     call
func.func @not_kernels(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  scf.execute_region {
    %v = memref.load %a[%c0] : memref<8xf32>
    memref.store %v, %a[%c0] : memref<8xf32>
    scf.yield
  }
  scf.execute_region {
    scf.yield
  } {smlir.kernel = "tagged"}
  return
}

// -----

/// Only kernels of the module's own functions are outlined: a kernel inside
/// a nested module stays in place (the outlined function would go where the
/// nested call cannot see it).
// CHECK-LABEL: func.func @outer()
// CHECK:       module @inner
// CHECK:         func.func @f(
// CHECK:           smlir.kernel "k"
// CHECK-NOT:   func.func private
func.func @outer() {
  return
}
module @inner {
  func.func @f(%a: memref<8xf32>) {
    %c0 = arith.constant 0 : index
    %two = arith.constant 2.0 : f32
    smlir.kernel "k" {
      memref.store %two, %a[%c0] : memref<8xf32>
    }
    return
  }
}
