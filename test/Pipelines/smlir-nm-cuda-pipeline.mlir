// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline)' -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{mma-k=32})' -split-input-file | FileCheck %s --check-prefix=K32
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{chip=sm_90a})' -split-input-file | FileCheck %s --check-prefix=SM90A

// What compile(..., target="cuda") runs, from the annotated IR to the LLVM
// dialect with the kernels embedded as PTX (gpu-module-to-binary{format=isa}
// needs no GPU and no ptxas): the PTX holds the sparse MMA instructions.

/// f16, with a bias: the host adds it after copying the f32 result back.
// CHECK-LABEL: llvm.func @main(
// CHECK:         llvm.call @mgpuMemcpy
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_f32
// CHECK:         llvm.call @mgpuMemcpy
// CHECK:       gpu.binary @smlir_nm24_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx71">
// CHECK-SAME:    .target sm_80
// CHECK-SAME:    .visible .entry nm24_linear_f16_k16_64x64x64_f32(
// CHECK-SAME:    mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// K32:         gpu.binary @smlir_nm24_kernels
// The chip's oldest PTX ISA (sm_90a: 8.0), not sm_80's 7.1, which it rejects.
// SM90A:       gpu.binary @smlir_nm24_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">
// SM90A-SAME:    .version 8.0
// SM90A-SAME:    .target sm_90a
// K32-SAME:      mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32
func.func @main(%w: tensor<64x64xf16> {smlir.weight}, %b: tensor<64xf16> {smlir.weight}, %x: tensor<64x64xf16>) -> tensor<64x64xf16> attributes {llvm.emit_c_interface} {
  %ws = smlir.sparsify %w : tensor<64x64xf16> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> {tensor_name = "fc.weight"} -> tensor<64x64xf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf16>
  %t = linalg.transpose ins(%ws : tensor<64x64xf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = tensor.empty() : tensor<64x64xf16>
  %yb = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<64x64xf32>, tensor<64xf16>) outs(%r : tensor<64x64xf16>) {
  ^bb0(%in: f32, %bias: f16, %out: f16):
    %bf = arith.extf %bias : f16 to f32
    %s = arith.addf %in, %bf : f32
    %h = arith.truncf %s : f32 to f16
    linalg.yield %h : f16
  } -> tensor<64x64xf16>
  return %yb : tensor<64x64xf16>
}

// -----

/// bf16 (nvvm.mma.sp.sync in the kernel).
// CHECK-LABEL: llvm.func @main(
// CHECK:       gpu.binary @smlir_nm24_kernels
// CHECK-SAME:    mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// K32:         gpu.binary @smlir_nm24_kernels
// K32-SAME:      mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32
func.func @main(%w: tensor<64x64xbf16> {smlir.weight}, %x: tensor<64x64xbf16>) -> tensor<64x64xf32> attributes {llvm.emit_c_interface} {
  %ws = smlir.sparsify %w : tensor<64x64xbf16> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> {tensor_name = "fc.weight"} -> tensor<64x64xbf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xbf16>
  %t = linalg.transpose ins(%ws : tensor<64x64xbf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>) outs(%e : tensor<64x64xbf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x64xbf16>, tensor<64x64xbf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#vec = affine_map<(d0) -> (d0)>

/// torch-mlir's F.linear in f16 with a bias, as it imports it: extf
/// generics on x, W^T and the bias, a zero-filled f32 matmul, + bias in f32
/// and truncf. smlir-raise-linear makes it one smlir.linear; the bias add
/// and the truncation become the kernel's epilogue (f16 y, no host loop).
// CHECK-LABEL: llvm.func @main(
// CHECK:         gpu.launch_func <%{{.*}} : !llvm.ptr> @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_bias_f16
// CHECK:       gpu.binary @smlir_nm24_kernels
// CHECK-SAME:    .visible .entry nm24_linear_f16_k16_64x64x64_bias_f16(
// CHECK-SAME:    mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-SAME:    cvt.rn.f16.f32
// K32:         gpu.binary @smlir_nm24_kernels
// K32-SAME:      nm24_linear_f16_k32_64x64x64_bias_f16
// SM90A:       gpu.binary @smlir_nm24_kernels
func.func @main(%w: tensor<64x64xf16> {smlir.weight}, %b: tensor<64xf16> {smlir.weight}, %x: tensor<64x64xf16>) -> tensor<64x64xf16> attributes {llvm.emit_c_interface} {
  %ws = smlir.sparsify %w : tensor<64x64xf16> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> {tensor_name = "fc.weight"} -> tensor<64x64xf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf16>
  %t = linalg.transpose ins(%ws : tensor<64x64xf16, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<64xf32>
  %b32 = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%b : tensor<64xf16>) outs(%eb : tensor<64xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<64xf32>
  %o = tensor.empty() : tensor<64x64xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf16>) outs(%o : tensor<64x64xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<64x64xf32>
  %t32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<64x64xf16>) outs(%o : tensor<64x64xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x32, %t32 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b32 : tensor<64x64xf32>, tensor<64xf32>) outs(%o : tensor<64x64xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  } -> tensor<64x64xf32>
  %yh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<64x64xf32>) outs(%e : tensor<64x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %h = arith.truncf %in : f32 to f16
    linalg.yield %h : f16
  } -> tensor<64x64xf16>
  return %yh : tensor<64x64xf16>
}
