// RUN: sparse-mlir-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(smlir-drop-device-annotations))' | FileCheck %s

/// The device annotations convert-smlir-to-nvgpu leaves go; the tensor name
/// and other attributes stay.
// CHECK-LABEL: func.func @device_arguments(
// CHECK-SAME:      %{{.*}}: memref<4x512xf16> {smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %{{.*}}: memref<4x32xi32> {smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %{{.*}}: memref<64x64xf16> {smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %{{.*}}: memref<64xf32> {smlir.weight})
// CHECK-NOT:   smlir.device
func.func @device_arguments(
    %v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.tensor_name = "fc.weight"},
    %m: memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 16 : i64, smlir.tensor_name = "fc.weight"},
    %dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>, smlir.tensor_name = "fc.weight"},
    %b: memref<64xf32> {smlir.weight}) {
  return
}

// -----

/// A function without annotations is left as it is.
// CHECK-LABEL: func.func @no_annotations(
// CHECK-SAME:      %{{.*}}: memref<4xf32>)
func.func @no_annotations(%x: memref<4xf32>) {
  return
}
