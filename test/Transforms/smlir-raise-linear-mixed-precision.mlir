// RUN: sparse-mlir-opt %s -smlir-raise-linear=mixed-precision=true -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-raise-linear -split-input-file | FileCheck %s --check-prefix=DEFAULT

// mixed-precision: torch-mlir's F.linear in f16/bf16 extends x and W^T to
// f32 (element-wise arith.extf generics) and accumulates into a zero-filled
// f32 tensor. With a sparse W it becomes one smlir.linear reading the f16
// x and W into an f32 result (what convert-smlir-to-nvgpu's sparse
// tensor-core kernels compute). Without the option it is left alone.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>

/// The extensions, the transpose and the zero fill, left dead, are erased.
// CHECK-LABEL: func.func @f16_through_extf(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<64x32xf16, #{{.*}}>, %[[X:[^:]*]]: tensor<8x32xf16>) -> tensor<8x64xf32> {
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<8x32xf16>, tensor<64x32xf16, #{{.*}}> -> tensor<8x64xf32>
// CHECK-NEXT:    return %[[Y]] : tensor<8x64xf32>
// DEFAULT-LABEL: func.func @f16_through_extf(
// DEFAULT-NOT:     smlir.linear
// DEFAULT:         linalg.matmul
func.func @f16_through_extf(%w: tensor<64x32xf16, #NM24>, %x: tensor<8x32xf16>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %ex = tensor.empty() : tensor<8x32xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x32xf16>) outs(%ex : tensor<8x32xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  %et = tensor.empty() : tensor<32x64xf32>
  %t32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<32x64xf16>) outs(%et : tensor<32x64xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<32x64xf32>
  %o = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%x32, %t32 : tensor<8x32xf32>, tensor<32x64xf32>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// linalg.matmul extends bf16 operands into its f32 result itself.
// CHECK-LABEL: func.func @bf16_matmul_extends(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<64x32xbf16, #{{.*}}>, %[[X:[^:]*]]: tensor<8x32xbf16>)
// CHECK-NEXT:    %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<8x32xbf16>, tensor<64x32xbf16, #{{.*}}> -> tensor<8x64xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @bf16_matmul_extends(%w: tensor<64x32xbf16, #NM24>, %x: tensor<8x32xbf16>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xbf16>
  %t = linalg.transpose ins(%w : tensor<64x32xbf16, #NM24>) outs(%e : tensor<32x64xbf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<8x32xbf16>, tensor<32x64xbf16>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

/// The bias add and the truncation after the matmul stay (the NVGPU
/// conversion takes them into its kernel's epilogue).
// CHECK-LABEL: func.func @bias_and_truncf_stay(
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} : tensor<8x32xf16>, tensor<64x32xf16, #{{.*}}> -> tensor<8x64xf32>
// CHECK-NEXT:    %[[YB:.*]] = linalg.generic {{.*}} ins(%[[Y]], %{{.*}} : tensor<8x64xf32>, tensor<64xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[YB]] : tensor<8x64xf32>)
// CHECK:           arith.truncf
func.func @bias_and_truncf_stay(%w: tensor<64x32xf16, #NM24>, %x: tensor<8x32xf16>, %b: tensor<64xf32>) -> tensor<8x64xf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<8x32xf16>, tensor<32x64xf16>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<8x64xf32>, tensor<64xf32>) outs(%o : tensor<8x64xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  } -> tensor<8x64xf32>
  %eh = tensor.empty() : tensor<8x64xf16>
  %yh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%yb : tensor<8x64xf32>) outs(%eh : tensor<8x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %h = arith.truncf %in : f32 to f16
    linalg.yield %h : f16
  } -> tensor<8x64xf16>
  return %yh : tensor<8x64xf16>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Only into a zero fill: accumulating into a given tensor is left alone.
// CHECK-LABEL: func.func @negative_nonzero_accumulator(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.matmul
func.func @negative_nonzero_accumulator(%w: tensor<64x32xf16, #NM24>, %x: tensor<8x32xf16>, %acc: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %t : tensor<8x32xf16>, tensor<32x64xf16>) outs(%acc : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

/// A dense W is left alone (dense-weights raises f32 weights only).
// CHECK-LABEL: func.func @negative_dense_weight(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.matmul
func.func @negative_dense_weight(%w: tensor<64x32xf16>, %x: tensor<8x32xf16>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<8x32xf16>, tensor<32x64xf16>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

/// An extension that also moves elements (here transposing) is not an
/// element-wise extf: not looked through.
// CHECK-LABEL: func.func @negative_extf_not_elementwise(
// CHECK-NOT:     smlir.linear
// CHECK:         linalg.matmul
func.func @negative_extf_not_elementwise(%w: tensor<64x32xf16, #NM24>, %x: tensor<32x8xf16>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %ex = tensor.empty() : tensor<8x32xf32>
  %x32 = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<32x8xf16>) outs(%ex : tensor<8x32xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  %o = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%x32, %t : tensor<8x32xf32>, tensor<32x64xf16>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// One precision throughout (f16 into f16) is the plain raise, with or
/// without the option.
// CHECK-LABEL: func.func @uniform_f16(
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<8x32xf16>, tensor<64x32xf16, #{{.*}}> -> tensor<8x64xf16>
// DEFAULT-LABEL: func.func @uniform_f16(
// DEFAULT:         smlir.linear %{{.*}}, %{{.*}} : tensor<8x32xf16>, tensor<64x32xf16, #{{.*}}> -> tensor<8x64xf16>
func.func @uniform_f16(%w: tensor<64x32xf16, #NM24>, %x: tensor<8x32xf16>) -> tensor<8x64xf16> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<8x64xf16>
  %z = linalg.fill ins(%zero : f16) outs(%o : tensor<8x64xf16>) -> tensor<8x64xf16>
  %y = linalg.matmul ins(%x, %t : tensor<8x32xf16>, tensor<32x64xf16>) outs(%z : tensor<8x64xf16>) -> tensor<8x64xf16>
  return %y : tensor<8x64xf16>
}
