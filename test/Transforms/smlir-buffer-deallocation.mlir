// RUN: sparse-mlir-opt %s -smlir-buffer-deallocation -split-input-file -verify-diagnostics | FileCheck %s

/// A temporary buffer is freed once its last reader is done; the returned
/// buffer is handed to the caller, not freed.
// CHECK-LABEL: func.func @temporary_is_freed(
// CHECK:         %[[TMP:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         memref.copy %[[TMP]], %[[OUT]]
// CHECK:         memref.dealloc %[[TMP]] : memref<16xf32>
// CHECK-NOT:     memref.dealloc %[[OUT]]
// CHECK:         return %[[OUT]]
func.func @temporary_is_freed(%x: memref<16xf32>) -> memref<16xf32> {
  %tmp = memref.alloc() : memref<16xf32>
  memref.copy %x, %tmp : memref<16xf32> to memref<16xf32>
  %out = memref.alloc() : memref<16xf32>
  memref.copy %tmp, %out : memref<16xf32> to memref<16xf32>
  return %out : memref<16xf32>
}

// -----

/// Sparse insertion grows buffers with memref.realloc; upstream's lowered
/// deallocation helper for such code aborts in memref-to-LLVM (i1 stores),
/// so the module is left alone, with a warning.
// CHECK-LABEL: func.func @negative_module_with_realloc(
// CHECK-NOT:     memref.dealloc
func.func @negative_module_with_realloc(%n: index) -> memref<?xf32> {
  %tmp = memref.alloc() : memref<16xf32>
  // expected-warning @below {{this kernel builds sparse tensors: its temporary buffers are not freed (MLIR 22 cannot lower the deallocation helper)}}
  %grown = memref.realloc %tmp(%n) : memref<16xf32> to memref<?xf32>
  return %grown : memref<?xf32>
}
