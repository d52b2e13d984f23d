// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// smlir.kernel round-trips with its name and body.

// CHECK-LABEL: func.func @named_body(
// CHECK:         smlir.kernel "scale_8" {
// CHECK-NEXT:      scf.for
// CHECK:           memref.store
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    return
// GENERIC-LABEL: "func.func"
// GENERIC:         "smlir.kernel"() <{name = "scale_8"}> ({
func.func @named_body(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  smlir.kernel "scale_8" {
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %m[%i] : memref<8xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %m[%i] : memref<8xf32>
    }
  }
  return
}
