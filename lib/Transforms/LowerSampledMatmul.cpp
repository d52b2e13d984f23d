//===- LowerSampledMatmul.cpp - the CPU micro-kernel of SDDMM -------------===//
//
// The pass: options, the tile of T for the pattern's shape, and the walk
// over smlir.sampled_matmul ops. The kernel is lib/Codegen's
// (SampledMatmul.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/KernelBuilder.h"
#include "../Codegen/SampledMatmul.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSAMPLEDMATMUL
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

/// Bytes of the packed B' tile (N rows) that stay in L2 with the A' row
/// and the pattern's buffers (a Zen 4 core has 1 MB).
static constexpr int64_t kTileBytes = 512 * 1024;

namespace {

struct LowerSampledMatmulPass
    : public smlir::impl::LowerSampledMatmulBase<LowerSampledMatmulPass> {
  using LowerSampledMatmulBase::LowerSampledMatmulBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions("smlir-lower-sampled-matmul",
                                          options,
                                          {"lanes", "entries", "tile-tokens"},
                                          errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  /// Tokens per tile: the option, or as many as keep N packed rows within
  /// kTileBytes, at least 4 vectors (fewer make the per-tile sums cost
  /// more than the dot products), at most 512.
  int64_t chooseTile(int64_t N, int64_t step) const {
    if (tileTokens > 0)
      return tileTokens;
    int64_t fit = kTileBytes / (4 * std::max<int64_t>(N, 1)) / step * step;
    return std::clamp<int64_t>(fit, 4 * step, 512 / step * step);
  }

  void runOnOperation() override {
    int64_t step = std::max<int64_t>(lanes, 8);
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        entries < 1 || entries > 16 || tileTokens < 0 ||
        tileTokens % step != 0 || tileTokens > 4096) {
      getOperation().emitError(
          "smlir-lower-sampled-matmul: lanes must be 4, 8, 16 or 32, entries "
          "1 to 16 and tile-tokens a multiple of 8 and of the lanes up to "
          "4096, or 0 (by the L2 budget)");
      return signalPassFailure();
    }
    SmallVector<SampledMatmulOp> ops;
    getOperation().walk([&](SampledMatmulOp op) { ops.push_back(op); });
    for (SampledMatmulOp op : ops) {
      std::string why;
      FailureOr<SampledMatmul> sm = matchSampledMatmul(op, why);
      if (failed(sm)) {
        op.emitOpError() << "has no CPU lowering for the pattern "
                         << op.getPatternType() << ": " << why;
        signalPassFailure();
        continue;
      }
      OpBuilder b(op);
      Location loc = op.getLoc();
      SampledMatmulBuffers buffers = buildSampledMatmulKernel(
          b, *sm, lanes, entries, chooseTile(sm->N, step));
      // The result's values are the new buffer: read directly where asked.
      for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
        if (auto values = dyn_cast<sparse_tensor::ToValuesOp>(user);
            values && values.getType() == buffers.values.getType()) {
          values.replaceAllUsesWith(buffers.values);
          values.erase();
        }
      if (!op->use_empty()) {
        // Elsewhere, the pattern's positions / coordinates with the new values.
        auto tensor = [&](Value memref) -> Value {
          auto type = cast<MemRefType>(memref.getType());
          return bufferization::ToTensorOp::create(
              b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
              memref, /*restrict=*/true, /*writable=*/false);
        };
        SmallVector<Value> levels;
        for (Value level : buffers.levels)
          levels.push_back(tensor(level));
        Value assembled = sparse_tensor::AssembleOp::create(
            b, loc, op.getPatternType(), levels, tensor(buffers.values));
        op.getResult().replaceAllUsesWith(assembled);
      }
      op.erase();
    }
  }
};

} // namespace
