// RUN: sparse-mlir-opt %s -convert-smlir-to-nvgpu=mma-k=32 | FileCheck %s --check-prefix=K32
// RUN: not sparse-mlir-opt %s -convert-smlir-to-nvgpu=mma-k=8 2>&1 | FileCheck %s --check-prefix=MMAK
// RUN: not sparse-mlir-opt %s -convert-smlir-to-nvgpu=mma-k=99999999999999999999 2>&1 | FileCheck %s --check-prefix=UNPARSED

// mma-k selects the sparse MMA: 16 (m16n8k16, the default) or 32
// (m16n8k32); anything else is an error.

// MMAK: error: convert-smlir-to-nvgpu: mma-k must be 16 or 32, got 8
// UNPARSED: error: convert-smlir-to-nvgpu: option 'mma-k' expects an integer (int64), got '99999999999999999999'

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// m16n8k32: 16 metadata registers per step, entry 2g + lane % 2; one
/// 16-byte A load per lane and fragment; four ldmatrix tiles per B fragment.
// K32-LABEL:   func.func @linear_f16(
// K32-SAME:        memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 32 : i64
// K32:         gpu.func @nm24_linear_f16_k32_64x64x64_f32
// K32-DAG:       %[[C2:.*]] = arith.constant 2 : index
// K32-DAG:       %[[C4:.*]] = arith.constant 4 : index
// K32:           %[[LANE:.*]] = gpu.thread_id x
// K32:           %[[G:.*]] = arith.divui %[[LANE]], %[[C4]] : index
// K32-DAG:       %[[G2:.*]] = arith.muli %[[G]], %[[C2]] : index
// K32-DAG:       %[[PAIR:.*]] = arith.remui %[[LANE]], %[[C2]] : index
// K32:           %[[SLOT:.*]] = arith.addi %[[G2]], %[[PAIR]] : index
// K32:           vector.load %{{.*}} {alignment = 16 : i64} : memref<4x512xf16>, vector<8xf16>
// K32-NEXT:      vector.shape_cast %{{.*}} : vector<8xf16> to vector<4x2xf16>
// K32-NEXT:      memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<4x32xi32>
// K32:           nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<2x64x72xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// K32:           nvgpu.mma.sp.sync({{.*}}) {mmaShape = [16, 8, 32]} : (vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
func.func @linear_f16(%w: tensor<64x64xf16, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}, %x: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %y = smlir.linear %x, %w : tensor<64x64xf16>, tensor<64x64xf16, #NM24> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
