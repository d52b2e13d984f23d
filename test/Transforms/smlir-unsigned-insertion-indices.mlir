// RUN: sparse-mlir-opt %s -smlir-unsigned-insertion-indices -split-input-file | FileCheck %s

// Narrow positions loaded in upstream's insertion functions are cast to
// index as unsigned (8-bit position 192 is 192, not -64); casts from i64 and
// truncations from index stay as they are.

// CHECK-LABEL: func.func private @_insert_dense_compressed_8_24_f32_32_8(
// CHECK:         %[[HI:.*]] = memref.load %{{.*}} : memref<?xi8>
// CHECK:         arith.index_castui %[[HI]] : i8 to index
// CHECK:         %[[CRD:.*]] = memref.load %{{.*}} : memref<?xi32>
// CHECK:         arith.index_castui %[[CRD]] : i32 to index
// CHECK:         arith.index_cast %{{.*}} : i64 to index
// CHECK:         arith.index_cast %{{.*}} : index to i8
func.func private @_insert_dense_compressed_8_24_f32_32_8(%pos: memref<?xi8>, %crd: memref<?xi32>, %wide: memref<?xi64>, %i: index) -> (index, index, index) {
  %hi = memref.load %pos[%i] : memref<?xi8>
  %a = arith.index_cast %hi : i8 to index
  %c = memref.load %crd[%a] : memref<?xi32>
  %b = arith.index_cast %c : i32 to index
  %w = memref.load %wide[%i] : memref<?xi64>
  %d = arith.index_cast %w : i64 to index
  %t = arith.index_cast %i : index to i8
  memref.store %t, %pos[%i] : memref<?xi8>
  return %a, %b, %d : index, index, index
}

// -----

// Any other function keeps its signed casts (torch's own integer tensors).

// CHECK-LABEL: func.func @model(
// CHECK:         arith.index_cast %{{.*}} : i8 to index
// CHECK-NOT:     arith.index_castui
func.func @model(%ids: memref<?xi8>, %i: index) -> index {
  %v = memref.load %ids[%i] : memref<?xi8>
  %r = arith.index_cast %v : i8 to index
  return %r : index
}

// -----

// A public function named like an insertion function is not one.

// CHECK-LABEL: func.func @_insert_public(
// CHECK:         arith.index_cast %{{.*}} : i8 to index
func.func @_insert_public(%ids: memref<?xi8>, %i: index) -> index {
  %v = memref.load %ids[%i] : memref<?xi8>
  %r = arith.index_cast %v : i8 to index
  return %r : index
}
