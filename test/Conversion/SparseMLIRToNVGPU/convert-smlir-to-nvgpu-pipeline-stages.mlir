// RUN: sparse-mlir-opt %s -convert-smlir-to-nvgpu=pipeline-stages=3 | FileCheck %s --check-prefix=S3
// RUN: not sparse-mlir-opt %s -convert-smlir-to-nvgpu=pipeline-stages=4 2>&1 | FileCheck %s --check-prefix=STAGES

// pipeline-stages: shared-memory stages of x, 2 (the default) or 3;
// anything else is an error.

// STAGES: error: convert-smlir-to-nvgpu: pipeline-stages must be 2 or 3, got 4

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Three shared-memory stages: two copies in flight while one stage is
/// multiplied.
// S3-LABEL:    func.func @linear_f16(
// S3:          gpu.func @nm24_linear_f16_k16_64x64x64_f32({{.*}}) workgroup(%[[SMEM:.*]] : memref<3x64x72xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// S3-COUNT-2:    nvgpu.device_async_create_group
// S3:            scf.for
// S3:              %[[GROUP:.*]] = nvgpu.device_async_create_group
// S3-NEXT:         nvgpu.device_async_wait %[[GROUP]] {numGroups = 2 : i32}
func.func @linear_f16(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
