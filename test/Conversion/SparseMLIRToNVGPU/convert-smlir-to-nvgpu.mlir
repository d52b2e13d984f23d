// RUN: sparse-mlir-opt %s -convert-smlir-to-nvgpu -split-input-file | FileCheck %s

// A hoisted 2:4 weight read by smlir.linear (x @ W^T, f16/bf16 operands
// into an f32 result: what smlir-raise-linear{mixed-precision} makes of
// torch-mlir's F.linear) becomes a kernel launch on its compressed values
// and metadata.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The weight argument becomes values (fragment order: one 16-row tile per
/// row), metadata and two scratch buffers (x and y on the device); the
/// linear becomes copy in, launch, copy out. 64 rows x 64 tokens: one block
/// of one 64 x 64 warp.
// CHECK-LABEL: func.func @linear_f16(
// CHECK-SAME:      %[[V:[^:]*]]: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[M:[^:]*]]: memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 16 : i64, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DX:[^:]*]]: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DY:[^:]*]]: memref<64x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x64xf16>)
// CHECK-NOT:     smlir.linear
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         gpu.memcpy %[[DX]], %[[XB]]
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_f32 blocks in (%[[C1:.*]], %[[C1]], %[[C1]]) threads in (%{{.*}}, %{{.*}}, %[[C1]])
// CHECK-SAME:        args(%[[V]] : memref<4x512xf16>, %[[M]] : memref<4x32xi32>, %[[DX]] : memref<64x64xf16>, %[[DY]] : memref<64x64xf32>)
// CHECK:         %[[HY:.*]] = memref.alloc() : memref<64x64xf32>
// CHECK:         gpu.memcpy %[[HY]], %[[DY]]
// CHECK:         %[[Y:.*]] = bufferization.to_tensor %[[HY]] restrict writable
// CHECK:         return %[[Y]]

/// The kernel: x through two shared-memory stages of 64 columns (16-byte
/// cp.async, one group per stage), A fragments and metadata from global
/// memory one stage ahead, B fragments by ldmatrix, m16n8k16 sparse MMAs.
// CHECK:       gpu.module @smlir_nm24_kernels
// CHECK:         gpu.func @nm24_linear_f16_k16_64x64x64_f32(%[[KV:.*]]: memref<4x512xf16>, %[[KM:.*]]: memref<4x32xi32>, %[[KX:.*]]: memref<64x64xf16>, %[[KY:.*]]: memref<64x64xf32>) workgroup(%[[SMEM:.*]] : memref<2x64x72xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME:        attributes {nvvm.maxntid = array<i32: 32, 1, 1>}
// CHECK:           %[[LANE:.*]] = gpu.thread_id x
// CHECK:           nvgpu.device_async_copy %[[KX]][%{{.*}}, %{{.*}}], %[[SMEM]][%{{.*}}, %{{.*}}, %{{.*}}], 8 : memref<64x64xf16> to memref<2x64x72xf16, #gpu.address_space<workgroup>>
// CHECK:           %[[PROLOGUE:.*]] = nvgpu.device_async_create_group
// CHECK:           %[[A0:.*]] = vector.load %[[KV]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<4x512xf16>, vector<4xf16>
// CHECK-NEXT:      vector.shape_cast %[[A0]] : vector<4xf16> to vector<2x2xf16>
// CHECK-NEXT:      memref.load %[[KM]][%{{.*}}, %{{.*}}] : memref<4x32xi32>
// CHECK:           scf.for
// CHECK:             nvgpu.device_async_copy
// CHECK:             %[[GROUP:.*]] = nvgpu.device_async_create_group
// CHECK-NEXT:        nvgpu.device_async_wait %[[GROUP]] {numGroups = 1 : i32}
// CHECK-NEXT:        gpu.barrier
// CHECK:             vector.load %[[KV]]
// CHECK:             %[[B:.*]] = nvgpu.ldmatrix %[[SMEM]][%{{.*}}, %{{.*}}, %{{.*}}] {numTiles = 2 : i32, transpose = false} : memref<2x64x72xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// CHECK:             %[[META2:.*]] = vector.bitcast %{{.*}} : vector<1xi32> to vector<2xi16>
// CHECK-NEXT:        nvgpu.mma.sp.sync(%{{.*}}, %[[B]], %{{.*}}) metadata(%[[META2]]) {mmaShape = [16, 8, 16]} : (vector<2x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK:             gpu.barrier
// CHECK-NEXT:        scf.yield
// CHECK:           nvgpu.device_async_wait %[[PROLOGUE]] {numGroups = 0 : i32}
// CHECK:           memref.store %{{.*}}, %[[KY]][%{{.*}}, %{{.*}}] : memref<64x64xf32>
// CHECK:           gpu.return

func.func @linear_f16(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.sparsifier = #smlir.nm_magnitude<n = 2, m = 4>, smlir.tensor_name = "fc.weight", smlir.weight}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>

/// A bias operand (f32, y's element type) is the kernel's epilogue; so is
/// the truncation after the linear.
// CHECK-LABEL: func.func @linear_bias_operand(
// CHECK-SAME:      memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DB:[^:]*]]: memref<64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<bias>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x64xf16>, %[[B:[^:]*]]: tensor<64xf32>)
// CHECK:         %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK:         gpu.memcpy %[[DB]], %[[BB]] : memref<64xf32>, memref<64xf32>
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_bias_f16
// CHECK-NOT:     smlir.linear
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @linear_bias_operand(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>, %b: tensor<64xf32>) -> tensor<64x64xf16> {
  %y = smlir.linear %x, %w bias %b : tensor<64x64xf16>, tensor<64x64xf16, #NM24>, tensor<64xf32> -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf16>
  %yh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<64x64xf32>) outs(%e : tensor<64x64xf16>) {
  ^bb0(%in: f32, %out: f16):
    %h = arith.truncf %in : f32 to f16
    linalg.yield %h : f16
  } -> tensor<64x64xf16>
  return %yh : tensor<64x64xf16>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

/// torch-mlir's F.linear in f16 with a bias: + bias[j] in f32 after the
/// linear, then truncf. Both become the kernel's epilogue: the bias is
/// copied to the device, the kernel writes f16 y, which replaces the
/// truncation.
// CHECK-LABEL: func.func @linear_bias_truncf(
// CHECK-SAME:      memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DB:[^:]*]]: memref<64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<bias>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x64xf16>, %[[B:[^:]*]]: tensor<64xf32>)
// CHECK:         %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK:         gpu.memcpy %[[DB]], %[[BB]] : memref<64xf32>, memref<64xf32>
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_bias_f16
// CHECK-SAME:        %[[DB]] : memref<64xf32>)
// CHECK:         %[[HY:.*]] = memref.alloc() : memref<64x64xf16>
// CHECK:         %[[Y:.*]] = bufferization.to_tensor %[[HY]] restrict writable : memref<64x64xf16> to tensor<64x64xf16>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[Y]]
// CHECK:       gpu.func @nm24_linear_f16_k16_64x64x64_bias_f16({{.*}}, %[[KY:.*]]: memref<64x64xf16>, %[[KB:.*]]: memref<64xf32>)
// CHECK:           %[[BIAS:.*]] = memref.load %[[KB]][%[[ROW:.*]]] : memref<64xf32>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %{{.*}}, %[[BIAS]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[SUM]] : f32 to f16
// CHECK-NEXT:      memref.store %[[H]], %[[KY]][%{{.*}}, %[[ROW]]] : memref<64x64xf16>
func.func @linear_bias_truncf(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>, %b: tensor<64xf32>) -> tensor<64x64xf16> {
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  %o = tensor.empty() : tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf16>
  %yb = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %b : tensor<64x64xf32>, tensor<64xf32>) outs(%o : tensor<64x64xf32>) {
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

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// bf16: upstream's nvgpu lowering has no bf16 sparse MMA, so the kernel
/// uses nvvm.mma.sp.sync on 32-bit registers, selector 0.
// CHECK-LABEL: func.func @linear_bf16(
// CHECK-SAME:      memref<4x512xbf16> {smlir.device = #smlir.device_buffer<nm24_values>
// CHECK:       gpu.func @nm24_linear_bf16_k16_64x64x64
// CHECK:         nvgpu.ldmatrix %{{.*}} : memref<2x64x72xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK:         nvvm.mma.sp.sync A[%{{.*}}, %{{.*}}] B[%{{.*}}, %{{.*}}] C[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] sparseMetadata[%{{.*}}] selector[%c0_i32{{(_[0-9]+)?}}]
// CHECK-SAME:      multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>
// CHECK-SAME:      shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK-NOT:     nvgpu.mma.sp.sync
func.func @linear_bf16(%w: tensor<64x64xbf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %y = smlir.linear %x, %w : tensor<64x64xbf16>, tensor<64x64xbf16, #NM24> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Two linears reading one weight: one kernel each, their scratch buffers
/// in program order (not the weight's use-list order, which depends on how
/// the IR was built).
// CHECK-LABEL: func.func @shared_weight(
// CHECK-SAME:      %[[V:[^:]*]]: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>
// CHECK-SAME:      %[[M:[^:]*]]: memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>
// CHECK-SAME:      %[[DX1:[^:]*]]: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>
// CHECK-SAME:      %[[DY1:[^:]*]]: memref<64x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>
// CHECK-SAME:      %[[DX2:[^:]*]]: memref<32x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>
// CHECK-SAME:      %[[DY2:[^:]*]]: memref<32x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64_f32
// CHECK-SAME:        args(%[[V]] : memref<4x512xf16>, %[[M]] : memref<4x32xi32>, %[[DX1]] : memref<64x64xf16>, %[[DY1]] : memref<64x64xf32>)
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_32x64x64_f32
// CHECK-SAME:        args(%[[V]] : memref<4x512xf16>, %[[M]] : memref<4x32xi32>, %[[DX2]] : memref<32x64xf16>, %[[DY2]] : memref<32x64xf32>)
func.func @shared_weight(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x1: tensor<64x64xf16>, %x2: tensor<32x64xf16>) -> (tensor<64x64xf32>, tensor<32x64xf32>) {
  %y1 = smlir.linear %x1, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  %y2 = smlir.linear %x2, %w : tensor<32x64xf16>, tensor<64x64xf16, #NM24> -> tensor<32x64xf32>
  return %y1, %y2 : tensor<64x64xf32>, tensor<32x64xf32>
}

// -----

/// A dense weight (no smlir.encoding) is not touched: its linalg form runs
/// on the host.
// CHECK-LABEL: func.func @negative_dense_weight(
// CHECK:         linalg.matmul
// CHECK-NOT:     gpu.launch_func
func.func @negative_dense_weight(%w: tensor<64x64xf16> {smlir.weight}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x64xf16>) outs(%e : tensor<64x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

/// A function without arguments has no weights (its argument count is not
/// counted down from an unsigned 0).
// CHECK-LABEL: func.func @no_arguments()
// CHECK-NEXT:    return
func.func @no_arguments() {
  return
}
