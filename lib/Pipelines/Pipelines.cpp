//===- Pipelines.cpp - named smlir pass pipelines -------------------------===//

#include "SparseMLIR/Pipelines/Pipelines.h"
#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/SparseTensor/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringSwitch.h"

#include <string>

using namespace mlir;

// Upstream's `sparsifier` pass list (MLIR 22.1.8, --dump-pass-pipeline),
// spelled as text. Built programmatically through buildSparsifier(), the
// same list fails on functions with two sparse arguments of one type
// ("failed to legalize unresolved materialization ... storage_specifier");
// parsed from text it does not. Keeping the text also makes the pipeline
// exactly what `--dump-pass-pipeline` shows.
static std::string
sparsifierPassList(const smlir::SparseCPUPipelineOptions &options) {
  std::string vl = std::to_string(options.vectorLength);
  // linalg-fuse-elementwise-ops is not here: run after the sparse matmul
  // rewrite, it fuses dense producers (bias add, ReLU, the transpose of x)
  // into the sparse kernel, which sparsification then rejects and which
  // would recompute them per stored weight. It runs before the rewrite.
  return "func.func(linalg-generalize-named-ops),"
         "sparsification-and-bufferization{enable-simd-index32=true vl=" +
         vl +
         "},"
         // Upstream's insertion functions sign-extend narrow positions.
         "smlir-unsigned-insertion-indices,"
         // The sparsifier pipeline frees no temporaries: free them where
         // upstream's deallocation lowers (see smlir-buffer-deallocation).
         "smlir-buffer-deallocation,"
         // AVX-512 permutes and bf16 dot products as intrinsic calls,
         // deallocation done.
         "smlir-lower-x86-permutes,"
         "smlir-lower-x86-dot-products,"
         "sparse-storage-specifier-to-llvm,"
         "func.func(canonicalize),"
         "func.func(convert-linalg-to-loops),"
         "func.func(convert-vector-to-scf),"
         "func.func(expand-realloc)," +
         // scf.parallel -> omp.parallel + omp.wsloop. The OpenMP regions
         // must see LLVM-typed memrefs before scf-to-cf flattens them.
         (options.openmp ? std::string("convert-scf-to-openmp,")
                         : std::string()) +
         // i1 (bool) buffers -> i8: MLIR 22's memref-to-LLVM aborts on
         // sub-byte loads and stores. Last, so that every buffer (ours,
         // the sparsifier's, the deallocation helper's) is covered.
         "smlir-widen-bool-buffers,"
         // Buffers through _mlir_memref_to_llvm_{alloc,aligned_alloc,free}:
         // the runtime's allocation cache reuses a call's large temporaries
         // (lib/Runtime/AllocationCache.c).
         "expand-strided-metadata,"
         "finalize-memref-to-llvm{use-generic-functions=true}," +
         // Polynomials instead of one libm call per element: LLVM then
         // vectorizes GELU's erf and softmax's exp.
         (options.approximateMath ? std::string("func.func(smlir-approximate-math),")
                                  : std::string()) +
         "func.func(convert-scf-to-cf),"
         "expand-strided-metadata,"
         "lower-affine,"
         "convert-vector-to-llvm,"
         "func.func(convert-complex-to-standard),"
         "func.func(arith-expand),"
         "func.func(convert-math-to-llvm),"
         "convert-math-to-libm,"
         "convert-complex-to-libm,"
         "convert-vector-to-llvm,"
         "convert-to-llvm,"
         "reconcile-unrealized-casts";
}

void mlir::smlir::buildSparseCPUFrontend(
    OpPassManager &pm, const SparseCPUPipelineOptions &options) {
  // Weights are sparsified once by the caller: their arguments become sparse.
  pm.addPass(createHoistArgumentSparsifiers());
  // Element-wise results that stay zero where their sparse operand is zero
  // keep its encoding, where that makes the readers faster.
  pm.addNestedPass<func::FuncOp>(createPropagateEncodings());
  // torch-mlir's forms of a linear with a sparse W -> smlir.linear. With
  // micro-kernels, dense linears too: they beat upstream's scalar loops by
  // two orders of magnitude.
  // With mixed-precision, F.linear in bf16/f16 too: x and W stay in half
  // precision, the micro-kernel accumulates in f32.
  RaiseLinearOptions raising{options.microkernels};
  raising.mixedPrecision = options.mixedPrecision;
  pm.addNestedPass<func::FuncOp>(createRaiseLinear(raising));
  // A lookup in a CSR / n:m table (an embedding tied to an LM head) reads
  // its rows' stored entries instead of a dense copy.
  pm.addNestedPass<func::FuncOp>(createRaiseRowGathers());
  // A CSR input's `adj @ h` runs the SpMM kernel, not sparsification's loops.
  if (options.microkernels)
    pm.addNestedPass<func::FuncOp>(createRaiseSparseMatmuls());
  // Weights whose readers have no sparse lowering are read densely, with a
  // warning (an error with fallback=error).
  pm.addNestedPass<func::FuncOp>(
      createSparseFallback(SparseFallbackOptions{options.failOnFallback}));
  // Fuse dense element-wise chains (bias add + activation), leaving sparse
  // kernels and contractions alone.
  pm.addNestedPass<func::FuncOp>(createFuseDenseElementwise());
  // Dense element-wise ops and row reductions (layer norm's statistics,
  // softmax's max and sum) become threaded vector loops: LLVM cannot
  // vectorize the reductions' ordered scalar chains, and would run all of
  // them on one thread.
  if (options.microkernels) {
    VectorizeRowsOptions rowOptions;
    rowOptions.lanes = options.lanes;
    pm.addNestedPass<func::FuncOp>(createVectorizeRows(rowOptions));
  }
  // CSR and n:m linears become register-tiled vector loops over the weight's
  // buffers (the rest is left to upstream sparsification).
  if (options.microkernels) {
    LowerSparseLinearOptions tiling;
    tiling.lanes = options.lanes;
    tiling.avx512 = options.avx512;
    tiling.avx512bf16 = options.avx512bf16;
    tiling.rows = options.tileRows;
    tiling.vectors = options.tileVectors;
    tiling.nmRows = options.nmTileRows;
    tiling.nmVectors = options.nmTileVectors;
    tiling.denseRows = options.denseTileRows;
    tiling.denseVectors = options.denseTileVectors;
    pm.addNestedPass<func::FuncOp>(createLowerSparseLinear(tiling));
    // Attention's dense batch matmuls, with the CSR kernel's tile options.
    LowerBatchMatmulOptions batchTiling;
    batchTiling.lanes = options.lanes;
    batchTiling.rows = options.tileRows;
    batchTiling.vectors = options.tileVectors;
    pm.addNestedPass<func::FuncOp>(createLowerBatchMatmul(batchTiling));
  }
  // Sampled products (a sparse weight's gradient): the op's only lowering,
  // with or without the linears' micro-kernels.
  LowerSampledMatmulOptions sampled;
  sampled.lanes = options.lanes;
  pm.addNestedPass<func::FuncOp>(createLowerSampledMatmul(sampled));
  // SpMM with a sparse input (a graph's adjacency): the op's only lowering.
  LowerSpMMOptions spmm;
  spmm.lanes = options.lanes;
  pm.addNestedPass<func::FuncOp>(createLowerSpMM(spmm));
  // Row kernels over a CSR mask's buffers (SDDMM, fused sparse attention):
  // the ops' only lowerings; their attributes carry the kernels' decisions.
  pm.addNestedPass<func::FuncOp>(createLowerSDDMMRows());
  pm.addNestedPass<func::FuncOp>(createLowerSparseAttention());
  // Lookups in sparse tables: the op's only lowering.
  pm.addNestedPass<func::FuncOp>(createLowerRowGathers());
  if (options.microkernels) {
    // Identical kernels (BERT's q/k/v/o projections) share one function.
    pm.addPass(createOutlineKernels());
  }
  // The other linears: (W * x^T)^T, the loop order upstream sparsification
  // runs fast.
  pm.addNestedPass<func::FuncOp>(createDecomposeLinear());
  // Streaming sparsifiers run inside their (now fused) element-wise
  // producer, which writes the sparse result directly.
  if (options.fuseSparsifiers)
    pm.addPass(createFuseStreamingSparsifiers());
}

void mlir::smlir::buildSparseCPULowering(
    OpPassManager &pm, const SparseCPUPipelineOptions &options) {
  // What upstream sparsification would crash on, as an error (only IR that
  // skipped the frontend has it).
  pm.addNestedPass<func::FuncOp>(createCheckBlockSparseReads());
  // Sparse arguments and results of public functions become their buffers
  // (positions, coordinates, values), so callers pass torch storage directly.
  // (direct-out=false: sparse results are written into caller-provided
  // buffers.)
  pm.addPass(createSparseAssembler());
  // Sparsification, bufferization and lowering to the LLVM dialect.
  if (failed(parsePassPipeline(sparsifierPassList(options), pm)))
    llvm::report_fatal_error("smlir-sparse-cpu-pipeline: bad pass list");
}

void mlir::smlir::buildSparseCPUPipeline(
    OpPassManager &pm, const SparseCPUPipelineOptions &options) {
  buildSparseCPUFrontend(pm, options);
  // Our sparsifiers and encodings become upstream linalg + sparse_tensor.
  pm.addPass(createConvertSparseMLIRToSparseTensor());
  buildSparseCPULowering(pm, options);
}

FailureOr<std::string> mlir::smlir::ptxFeaturesForChip(StringRef chip) {
  // The first PTX ISA version of each target (PTX ISA's "Release notes";
  // LLVM's NVPTX.td), never below 7.1, mma.sp's. A newer one would need a
  // newer driver on the machine that JIT-compiles the PTX.
  StringRef features =
      llvm::StringSwitch<StringRef>(chip)
          .Cases({"sm_80", "sm_86"}, "+ptx71")
          .Case("sm_87", "+ptx74")
          .Cases({"sm_89", "sm_90"}, "+ptx78")
          .Case("sm_90a", "+ptx80")
          .Cases({"sm_100", "sm_100a", "sm_101", "sm_101a"}, "+ptx86")
          .Cases({"sm_120", "sm_120a"}, "+ptx87")
          .Cases({"sm_100f", "sm_101f", "sm_103", "sm_103a", "sm_103f",
                  "sm_120f", "sm_121", "sm_121a", "sm_121f"},
                 "+ptx88")
          .Cases({"sm_88", "sm_110", "sm_110a", "sm_110f"}, "+ptx90")
          .Default("");
  if (features.empty())
    return failure();
  return features.str();
}

LogicalResult mlir::smlir::buildNMCudaPipeline(
    OpPassManager &pm, const NMCudaPipelineOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  FailureOr<std::string> chipFeatures = ptxFeaturesForChip(options.chip);
  if (failed(chipFeatures))
    return errorHandler("smlir-nm-cuda-pipeline: chip '" + options.chip +
                        "' has no sparse tensor cores LLVM can target; "
                        "expected sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, "
                        "sm_100 or another sm_80+ architecture");
  std::string features =
      options.features.empty() ? *chipFeatures : options.features.getValue();
  // Weights are sparsified once by the caller: their arguments become 2:4.
  pm.addPass(createHoistArgumentSparsifiers());
  // torch-mlir's F.linear (f16/bf16 operands extended into a zero-filled
  // f32 accumulator) -> smlir.linear, what the conversion reads. Only sparse
  // weights are raised, and those are 2:4 here (Python refuses other
  // encodings on the GPU): every raised linear is the conversion's.
  RaiseLinearOptions raising;
  raising.mixedPrecision = true;
  pm.addNestedPass<func::FuncOp>(createRaiseLinear(raising));
  // 2:4 linears -> gpu.launch_func of mma.sp kernels; their weights become
  // device-resident values + metadata arguments.
  ConvertSparseMLIRToNVGPUOptions tiling;
  tiling.mmaK = options.mmaK;
  tiling.tileRows = options.tileRows;
  tiling.tileTokens = options.tileTokens;
  tiling.warpTokens = options.warpTokens;
  tiling.pipelineStages = options.pipelineStages;
  pm.addPass(createConvertSparseMLIRToNVGPU(tiling));
  // Its argument annotations are for the caller, which reads them from the
  // conversion's own output; upstream tools reading the host code cannot
  // parse their typed values.
  pm.addNestedPass<func::FuncOp>(createDropDeviceAnnotations());
  std::string target =
      "chip=" + options.chip + " features=" + features + " O=3";
  std::string passes =
      // The rest of the model runs on the host, on buffers; temporaries are
      // freed (gpu.launch_func's memory effects come from smlir's registry).
      "one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},"
      "smlir-buffer-deallocation,"
      // Synchronous gpu ops -> one stream with a wait before host reads.
      "func.func(gpu-async-region),"
      "func.func(convert-linalg-to-loops),"
      // Host-side activations (GELU's erf) as polynomials LLVM vectorizes,
      // not one libm call per element.
      "func.func(smlir-approximate-math),"
      // Host loops and the kernels' loops alike.
      "convert-scf-to-cf,"
      "nvvm-attach-target{" + target + "},"
      "gpu.module(convert-gpu-to-nvvm,convert-nvgpu-to-nvvm,"
      "convert-vector-to-llvm,canonicalize,cse,reconcile-unrealized-casts),"
      "expand-strided-metadata,"
      "lower-affine,"
      "func.func(arith-expand),"
      "func.func(convert-math-to-llvm),"
      "convert-math-to-libm,"
      // Launches -> mgpu* calls of libmlir_cuda_runtime.so.
      "gpu-to-llvm,"
      "convert-vector-to-llvm,"
      "convert-to-llvm,"
      "reconcile-unrealized-casts,"
      // PTX text, with no GPU or ptxas needed: the CUDA driver JIT-compiles
      // it when the module is loaded (cuModuleLoadData).
      "gpu-module-to-binary{format=isa}";
  if (failed(parsePassPipeline(passes, pm)))
    llvm::report_fatal_error("smlir-nm-cuda-pipeline: bad pass list");
  return success();
}

void mlir::smlir::registerSparseMLIRPipelines() {
  // Registered by hand, not by PassPipelineRegistration: a bad chip is a
  // parse error of the pipeline, not a fatal error in the NVPTX backend.
  registerPassPipeline(
      "smlir-nm-cuda-pipeline",
      "Lower 2:4 f16/bf16 linears to sparse tensor-core kernels (PTX) and the "
      "rest to host code, to the LLVM dialect",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        NMCudaPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        return buildNMCudaPipeline(pm, options, errorHandler);
      },
      [](function_ref<void(const ::mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(NMCudaPipelineOptions());
      });
  PassPipelineRegistration<SparseCPUPipelineOptions>(
      "smlir-sparse-cpu-frontend",
      "The smlir part of smlir-sparse-cpu-pipeline: hoisted sparsifiers, "
      "encodings, micro-kernels, fused streaming sparsifiers",
      buildSparseCPUFrontend);
  PassPipelineRegistration<SparseCPUPipelineOptions>(
      "smlir-sparse-cpu-lowering",
      "The rest of smlir-sparse-cpu-pipeline after "
      "convert-smlir-to-sparse-tensor: sparsification, buffers, LLVM dialect",
      buildSparseCPULowering);
  PassPipelineRegistration<SparseCPUPipelineOptions>(
      "smlir-sparse-cpu-pipeline",
      "Lower smlir + sparse_tensor to the LLVM dialect for the CPU",
      buildSparseCPUPipeline);
}
