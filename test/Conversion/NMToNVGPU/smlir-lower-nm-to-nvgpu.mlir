// RUN: sparse-mlir-opt %s -smlir-lower-nm-to-nvgpu -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-lower-nm-to-nvgpu=mma-k=32 -split-input-file | FileCheck %s --check-prefix=K32

// A hoisted 2:4 weight read as x @ W^T (torch-mlir's F.linear without bias:
// f16 operands, zero-filled f32 accumulator) becomes a kernel launch on its
// compressed values and metadata.

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The weight argument becomes values, metadata and two scratch buffers
/// (x and y on the device); the matmul becomes copy in, launch, copy out.
// CHECK-LABEL: func.func @linear_f16(
// CHECK-SAME:      %[[V:[^:]*]]: memref<64x16xf16> {smlir.device = "nm24_values", smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[M:[^:]*]]: memref<4x16xi32> {smlir.device = "nm24_metadata", smlir.mma_k = 16 : i64, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DX:[^:]*]]: memref<64x32xf16> {smlir.device = "scratch", smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[DY:[^:]*]]: memref<64x64xf32> {smlir.device = "scratch", smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x32xf16>)
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         gpu.memcpy %[[DX]], %[[XB]]
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x32
// CHECK-SAME:        args(%[[V]] : memref<64x16xf16>, %[[M]] : memref<4x16xi32>, %[[DX]] : memref<64x32xf16>, %[[DY]] : memref<64x64xf32>)
// CHECK:         %[[HY:.*]] = memref.alloc() : memref<64x64xf32>
// CHECK:         gpu.memcpy %[[HY]], %[[DY]]
// CHECK:         %[[Y:.*]] = bufferization.to_tensor %[[HY]] restrict writable
// CHECK:         return %[[Y]]
/// The kernel: x staged in shared memory (padded rows), metadata entry
/// g = lane / 4 of the k-step (8 per step), f16 sparse MMAs m16n8k16.
// CHECK:       gpu.module @smlir_nm24_kernels
// CHECK:         gpu.func @nm24_linear_f16_k16_64x64x32(%{{.*}}: memref<64x16xf16>, %{{.*}}: memref<4x16xi32>, %{{.*}}: memref<64x32xf16>, %{{.*}}: memref<64x64xf32>) workgroup(%[[SMEM:.*]] : memref<64x40xf16, #gpu.address_space<workgroup>>) kernel
// CHECK-DAG:       %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:       %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:       %[[C16:.*]] = arith.constant 16 : index
// CHECK:           %[[LANE:.*]] = gpu.thread_id x
// CHECK:           %[[G:.*]] = arith.divui %[[LANE]], %[[C4]] : index
// CHECK:           gpu.barrier
// CHECK:           vector.store %{{.*}}, %[[SMEM]][%{{.*}}, %{{.*}}] : memref<64x40xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK:           gpu.barrier
// CHECK:           %[[STEP:.*]] = arith.divui %{{.*}}, %[[C16]] : index
// CHECK:           %[[STEP8:.*]] = arith.muli %[[STEP]], %[[C8]] : index
// CHECK-NEXT:      %[[SLOT:.*]] = arith.addi %[[STEP8]], %[[G]] : index
// CHECK-NEXT:      %[[META:.*]] = memref.load %{{.*}}[%{{.*}}, %[[SLOT]]] : memref<4x16xi32>
// CHECK:           %[[BCAST:.*]] = vector.broadcast %[[META]] : i32 to vector<1xi32>
// CHECK-NEXT:      %[[META2:.*]] = vector.bitcast %[[BCAST]] : vector<1xi32> to vector<2xi16>
// CHECK:           nvgpu.mma.sp.sync(%{{.*}}, %{{.*}}, %{{.*}}) metadata(%[[META2]]) {mmaShape = [16, 8, 16]} : (vector<2x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK:           memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x64xf32>
// CHECK:           gpu.return
/// m16n8k32: 16 metadata registers per step, entry 2g + lane % 2.
// K32-LABEL:   func.func @linear_f16(
// K32-SAME:        memref<4x16xi32> {smlir.device = "nm24_metadata", smlir.mma_k = 32 : i64
// K32:         gpu.func @nm24_linear_f16_k32_64x64x32
// K32-DAG:       %[[C2:.*]] = arith.constant 2 : index
// K32-DAG:       %[[C4:.*]] = arith.constant 4 : index
// K32-DAG:       %[[C16:.*]] = arith.constant 16 : index
// K32-DAG:       %[[C32:.*]] = arith.constant 32 : index
// K32:           %[[LANE:.*]] = gpu.thread_id x
// K32:           %[[G:.*]] = arith.divui %[[LANE]], %[[C4]] : index
// K32-DAG:       %[[G2:.*]] = arith.muli %[[G]], %[[C2]] : index
// K32-DAG:       %[[PAIR:.*]] = arith.remui %[[LANE]], %[[C2]] : index
// K32:           %[[SLOT:.*]] = arith.addi %[[G2]], %[[PAIR]] : index
// K32:           %[[STEP:.*]] = arith.divui %{{.*}}, %[[C32]] : index
// K32:           %[[STEP16:.*]] = arith.muli %[[STEP]], %[[C16]] : index
// K32-NEXT:      %[[COL:.*]] = arith.addi %[[STEP16]], %[[SLOT]] : index
// K32-NEXT:      memref.load %{{.*}}[%{{.*}}, %[[COL]]] : memref<4x16xi32>
// K32:           nvgpu.mma.sp.sync({{.*}}) {mmaShape = [16, 8, 32]} : (vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
func.func @linear_f16(%w: tensor<64x32xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.sparsifier = #smlir.nm_magnitude<n = 2, m = 4>, smlir.tensor_name = "fc.weight", smlir.weight}, %x: tensor<64x32xf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x32xf16>, tensor<32x64xf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#id = affine_map<(d0, d1) -> (d0, d1)>

/// torch-mlir's F.linear with a bias extends both operands to f32 first: the
/// kernel reads the f16 sources and the extensions go away.
// CHECK-LABEL: func.func @linear_through_extf(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x32xf16>)
// CHECK-NOT:     arith.extf
// CHECK:         bufferization.to_buffer %[[X]] read_only
// CHECK:         gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x32
// CHECK-NOT:     linalg.matmul
// CHECK:         return
func.func @linear_through_extf(%w: tensor<64x32xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x32xf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16, #NM24>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<64x32xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x32xf16>) outs(%e1 : tensor<64x32xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<64x32xf32>
  %e2 = tensor.empty() : tensor<32x64xf32>
  %t32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<32x64xf16>) outs(%e2 : tensor<32x64xf32>) {
  ^bb0(%in: f16, %out: f32):
    %v = arith.extf %in : f16 to f32
    linalg.yield %v : f32
  } -> tensor<32x64xf32>
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x32, %t32 : tensor<64x32xf32>, tensor<32x64xf32>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// bf16: upstream's nvgpu lowering has no bf16 sparse MMA, so the kernel
/// uses nvvm.mma.sp.sync on 32-bit registers, selector 0.
// CHECK-LABEL: func.func @linear_bf16(
// CHECK-SAME:      memref<64x16xbf16> {smlir.device = "nm24_values"
// CHECK:       gpu.func @nm24_linear_bf16_k16_64x64x32
// CHECK:         %[[SEL:.*]] = arith.constant 0 : i32
// CHECK:         nvvm.mma.sp.sync A[%{{.*}}, %{{.*}}] B[%{{.*}}, %{{.*}}] C[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] sparseMetadata[%{{.*}}] selector[%[[SEL]]]
// CHECK-SAME:      multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>
// CHECK-SAME:      shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK-NOT:     nvgpu.mma.sp.sync
func.func @linear_bf16(%w: tensor<64x32xbf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x32xbf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xbf16>
  %t = linalg.transpose ins(%w : tensor<64x32xbf16, #NM24>) outs(%e : tensor<32x64xbf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x32xbf16>, tensor<32x64xbf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

/// A dense weight (no smlir.encoding) is not touched.
// CHECK-LABEL: func.func @negative_dense_weight(
// CHECK:         linalg.matmul
// CHECK-NOT:     gpu.launch_func
func.func @negative_dense_weight(%w: tensor<64x32xf16> {smlir.weight}, %x: tensor<64x32xf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf16>
  %t = linalg.transpose ins(%w : tensor<64x32xf16>) outs(%e : tensor<32x64xf16>) permutation = [1, 0]
  %o = tensor.empty() : tensor<64x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %t : tensor<64x32xf16>, tensor<32x64xf16>) outs(%z : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
