//===- NM24KernelBuilder.h - 2:4 mma.sp kernels and launches ----*- C++ -*-===//
//
// Private to convert-smlir-to-nvgpu: the tiling constants, the shape of one
// kernel, index math at the kernel's entry and the builder of the
// `mma.sp.sync` kernels (NM24KernelBuilder.cpp, whose file comment gives
// the fragment layouts).
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_LIB_CONVERSION_NM24KERNELBUILDER_H
#define SPARSE_MLIR_LIB_CONVERSION_NM24KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::smlir::nm24 {

constexpr int64_t kWarpRows = 64;     // 4 fragments of 16 weight rows
constexpr int64_t kWarpTokens = 32;   // 4 fragments of 8 tokens (at least)
constexpr int64_t kStageK = 64;       // x columns per shared-memory stage
constexpr int64_t kSmemPad = 8;       // row pitch of 72 elements (144 B):
                                      // ldmatrix's 8 rows hit distinct banks
constexpr int64_t kCopyElements = 8;  // 16-byte cp.async copies
constexpr int64_t kMaxTileRows = 512; // >= 1 copy per thread and stage
constexpr int64_t kMaxTileTokens = 128;
constexpr int64_t kMaxStaticSmemBytes = 48 * 1024; // without opting in
constexpr int64_t kMaxWarps = 8; // more (~128 registers a thread) cannot
                                 // launch: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
constexpr StringLiteral kKernelModule = "smlir_nm24_kernels";

/// What one kernel computes: y[T, R] (f32) = x[T, K] * W[R, K]^T.
struct LinearShape {
  Type element; // f16 or bf16
  int64_t rows, tokens, depth;
  int64_t tileRows = 0, tileTokens = 0; // this linear's thread-block tile
  int64_t warpTokens = kWarpTokens;      // tokens per warp: 32 or 64
  bool bias = false;                     // y += bias[row] in the epilogue
  Type output;                           // y's element: f32, or the weight's
};

/// Index constants, each created once at a fixed point (the kernel's entry).
struct ConstantPool {
  OpBuilder b;
  llvm::SmallDenseMap<int64_t, Value> cache;
  Value get(Location loc, int64_t v) {
    Value &c = cache[v];
    if (!c)
      c = arith::ConstantIndexOp::create(b, loc, v);
    return c;
  }
};

/// Index arithmetic on `index` values at `b`'s insertion point.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  ConstantPool &pool;
  Value c(int64_t v) { return pool.get(loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, c(y)) : x; }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, c(y));
  }
  Value div(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, c(y));
  }
  Value rem(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, c(y));
  }
};

/// Builds the kernels and their launches for one module.
class NM24KernelBuilder {
public:
  NM24KernelBuilder(ModuleOp module, int64_t mmaK, int64_t maxTileRows,
                    int64_t maxTileTokens, int64_t warpTokens,
                    int64_t pipelineStages)
      : module(module), mmaK(mmaK), maxTileRows(maxTileRows),
        maxTileTokens(maxTileTokens), warpTokens(warpTokens),
        pipelineStages(pipelineStages) {}

  /// Shared memory of the x stages of a block of `tileTokens` tokens.
  int64_t smemBytes(int64_t tileTokens) const {
    return pipelineStages * tileTokens * (kStageK + kSmemPad) * 2;
  }

  /// The largest thread-block tile within the pass options that divides the
  /// linear: rows a power-of-two multiple of the warp's 64 (so every thread
  /// issues the same number of x copies), then tokens a multiple of 32, with
  /// at most 8 warps and x's stages within 48 KB of static shared memory
  /// (3 stages of 128 tokens are 54 KB). False when the shape is not made
  /// of whole warp tiles.
  bool chooseTile(LinearShape &s) const;
  /// Warps per block: one per 64 x 32 (rows x tokens) sub-tile.
  static int64_t warps(const LinearShape &s) {
    return (s.tileRows / kWarpRows) * (s.tileTokens / s.warpTokens);
  }
  /// Metadata registers per 16-row tile and k-step (see the file comment of
  /// NM24KernelBuilder.cpp).
  int64_t metaPerStep() const { return mmaK == 16 ? 8 : 16; }
  /// A-fragment elements one lane holds per 16-row tile and k-step.
  int64_t aElements() const { return mmaK / 4; }

  /// Values in fragment order (sparse_mlir/cuda/nm24.py): per 16-row tile
  /// and k-step, lane by lane, the lane's A registers; one 16-row tile per
  /// memref row.
  MemRefType valuesType(const LinearShape &s) const {
    return MemRefType::get({s.rows / 16, 8 * s.depth}, s.element);
  }
  MemRefType metaType(const LinearShape &s) const {
    return MemRefType::get({s.rows / 16, s.depth / mmaK * metaPerStep()},
                           IntegerType::get(module->getContext(), 32));
  }

  gpu::GPUFuncOp getOrCreateKernel(const LinearShape &s);

private:
  gpu::GPUModuleOp getOrCreateKernelModule();
  Value mma(OpBuilder &b, Location loc, const LinearShape &s, Value a,
            Value bFrag, Value acc, Value meta);

  ModuleOp module;
  int64_t mmaK, maxTileRows, maxTileTokens, warpTokens, pipelineStages;
  gpu::GPUModuleOp kernelModule;
  llvm::StringMap<gpu::GPUFuncOp> kernels;
};

} // namespace mlir::smlir::nm24

#endif // SPARSE_MLIR_LIB_CONVERSION_NM24KERNELBUILDER_H
