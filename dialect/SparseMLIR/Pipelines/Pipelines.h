//===- Pipelines.h - named smlir pass pipelines -----------------*- C++ -*-===//
//
// Pipelines that Python's compile() runs by name, so that
// `sparse-mlir-opt --pass-pipeline=...` reproduces exactly what Python does.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_PIPELINES_PIPELINES_H
#define SPARSE_MLIR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::smlir {

struct SparseCPUPipelineOptions
    : public PassPipelineOptions<SparseCPUPipelineOptions> {
  PassOptions::Option<int32_t> vectorLength{
      *this, "vl", llvm::cl::desc("SIMD vector length for sparse loops (0: none)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> failOnFallback{
      *this, "fail-on-fallback",
      llvm::cl::desc("Error out when a sparse weight must be read densely"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fuseSparsifiers{
      *this, "fuse-sparsifiers",
      llvm::cl::desc("Run streaming sparsifiers inside their producer "
                     "(false: after it, to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> microkernels{
      *this, "microkernels",
      llvm::cl::desc("Lower CSR and n:m linears to register-tiled vector "
                     "loops (smlir-lower-sparse-linear; false: upstream "
                     "sparsification)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> tileRows{
      *this, "tile-rows",
      llvm::cl::desc("Weight rows per micro-kernel register tile (CSR weights, "
                     "decode, batched matmuls; 0: the default for the lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> tileVectors{
      *this, "tile-vectors",
      llvm::cl::desc("Token vectors per micro-kernel register tile (0: by "
                     "lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> nmTileRows{
      *this, "nm-tile-rows",
      llvm::cl::desc("Weight rows per register tile of an n:m weight (0: by "
                     "lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> nmTileVectors{
      *this, "nm-tile-vectors",
      llvm::cl::desc("Token vectors per register tile of an n:m weight (0: by "
                     "lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> denseTileRows{
      *this, "dense-tile-rows",
      llvm::cl::desc("Weight rows per register tile of a dense weight (0: by "
                     "lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> denseTileVectors{
      *this, "dense-tile-vectors",
      llvm::cl::desc("Token vectors per register tile of a dense weight (0: "
                     "by lanes)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> lanes{
      *this, "lanes",
      llvm::cl::desc("f32 lanes per vector in the micro-kernels (8: AVX2, "
                     "16: AVX-512; compile() picks by the host CPU)"),
      llvm::cl::init(8)};
  PassOptions::Option<bool> avx512{
      *this, "avx512",
      llvm::cl::desc("The target has AVX-512F (n:m decode permutes x in "
                     "registers; compile() sets it from the host CPU)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> avx512bf16{
      *this, "avx512bf16",
      llvm::cl::desc("The target has AVX-512 BF16 (bf16 2:4 token blocks take "
                     "vdpbf16ps; compile() sets it from the host CPU)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> approximateMath{
      *this, "approximate-math",
      llvm::cl::desc("f32 exp/erf/tanh/log/... as vectorizable polynomials "
                     "(smlir-approximate-math; false: libm calls)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("Raise F.linear in bf16/f16 (x and W extended to an f32 "
                     "accumulator) to an smlir.linear the micro-kernels read "
                     "in half precision (the regions' half kernels)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> openmp{
      *this, "openmp",
      llvm::cl::desc("Run scf.parallel loops on OpenMP threads (needs libomp "
                     "at run time)"),
      llvm::cl::init(false)};
};

/// smlir ops -> upstream sparse_tensor -> buffers -> LLVM dialect, for the
/// CPU: the frontend, convert-smlir-to-sparse-tensor, then the lowering.
/// compile() runs the three pieces one after the other, reading what the
/// frontend decided (fused sparsifiers) and the IR between them.
void buildSparseCPUPipeline(OpPassManager &pm,
                            const SparseCPUPipelineOptions &options);
/// smlir passes on tensors: hoisted weight sparsifiers, propagated
/// encodings, sparse matmul rewrites and fallbacks, fused element-wise ops,
/// vector kernels (outlined), fused streaming sparsifiers.
void buildSparseCPUFrontend(OpPassManager &pm,
                            const SparseCPUPipelineOptions &options);
/// After convert-smlir-to-sparse-tensor: buffers at the boundary,
/// sparsification, bufferization, LLVM dialect.
void buildSparseCPULowering(OpPassManager &pm,
                            const SparseCPUPipelineOptions &options);

struct NMCudaPipelineOptions
    : public PassPipelineOptions<NMCudaPipelineOptions> {
  PassOptions::Option<int64_t> mmaK{
      *this, "mma-k",
      llvm::cl::desc("K of the sparse MMA: 16 (m16n8k16) or 32 (m16n8k32)"),
      llvm::cl::init(16)};
  PassOptions::Option<int64_t> tileRows{
      *this, "tile-rows",
      llvm::cl::desc("Most weight rows per thread block (64 .. 512)"),
      llvm::cl::init(128)};
  PassOptions::Option<int64_t> tileTokens{
      *this, "tile-tokens",
      llvm::cl::desc("Most tokens per thread block (32 .. 128)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> warpTokens{
      *this, "warp-tokens", llvm::cl::desc("Tokens per warp (32 or 64)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("Shared-memory stages of x (2 or 3)"), llvm::cl::init(2)};
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("CUDA architecture: sm_80, sm_86, sm_87, sm_89, sm_90, "
                     "sm_90a or a newer one LLVM knows"),
      llvm::cl::init("sm_80")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (default: the chip's oldest PTX ISA, at "
                     "least 7.1 for mma.sp)"),
      llvm::cl::init("")};
};

/// The PTX ISA feature ("+ptx71", ...) of the oldest PTX version that
/// targets `chip` and has mma.sp (7.1), or failure where `chip` is not an
/// sm_80+ architecture LLVM 22 knows (older ones have no sparse MMA).
FailureOr<std::string> ptxFeaturesForChip(StringRef chip);

/// 2:4 f16/bf16 linears -> sparse tensor-core kernels (embedded as PTX),
/// everything else -> host code; all of it to the LLVM dialect. Fails, with
/// a message to `errorHandler`, for a chip without sparse tensor cores.
LogicalResult
buildNMCudaPipeline(OpPassManager &pm, const NMCudaPipelineOptions &options,
                    function_ref<LogicalResult(const Twine &)> errorHandler);

void registerSparseMLIRPipelines();

} // namespace mlir::smlir

#endif // SPARSE_MLIR_PIPELINES_PIPELINES_H
