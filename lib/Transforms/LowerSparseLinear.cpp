//===- LowerSparseLinear.cpp - register-tiled kernels for y = x * W^T -----===//
//
// The pass: options, the tile measured for each weight layout, and the walk
// over smlir.linear ops. The kernels are lib/Codegen's (LinearKernel.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/KernelBuilder.h"
#include "../Codegen/LinearKernel.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSPARSELINEAR
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

/// The most token vectors a BSR tile takes by default (8 and 16 lanes).
/// Measured (768 -> 3072, 10% dense in full 4 x 4 blocks, 1 thread, 8
/// lanes): 4 x 2 was 6-9% faster than 4 x 3 (which fills all 16
/// registers) at 128 and 48 tokens; 8 x 8 blocks about the same.
constexpr int64_t kBSRVectors = 2, kBSRVectors16 = 2;

struct LowerSparseLinearPass
    : public smlir::impl::LowerSparseLinearBase<LowerSparseLinearPass> {
  using LowerSparseLinearBase::LowerSparseLinearBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
        "smlir-lower-sparse-linear", options,
        {"rows", "vectors", "nm-rows", "nm-vectors", "dense-rows",
        "dense-vectors", "lanes", "bsr-rows", "bsr-vectors"},
        errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  /// A tile option, or (0) the default measured for `lanes`: 8 (AVX2,
  /// 16 registers) on a Zen 3, 16 (AVX-512, 32 registers) on a Zen 4.
  int64_t tile(int64_t option, int64_t avx2, int64_t avx512) const {
    return option > 0 ? option : lanes >= 16 ? avx512 : avx2;
  }

  /// A BSR tile: rows dividing the block's rows (each tile in one block
  /// row) and token vectors, the most FMAs per stored column (R * U per U
  /// slab loads and R broadcasts) that fit the registers, then the fewest
  /// loads; `bsr-rows` / `bsr-vectors` fix either. U is at most
  /// kBSRVectors: 4 x 2 on AVX2 for 4 x 4 and 8 x 8 blocks (8 x 1 would
  /// load more per FMA).
  void bsrTile(const SparseLinear &linear, int64_t registers, int64_t &tileRows,
               int64_t &tileVectors) const {
    int64_t bh = linear.layout.blockRows;
    int64_t maxVectors = tile(this->bsrVectors, kBSRVectors, kBSRVectors16);
    int64_t bestFmas = 0, bestLoads = 0;
    for (int64_t r = 1; r <= std::min<int64_t>(bh, 8); ++r) {
      if (bh % r || (bsrRows > 0 && r != bsrRows))
        continue;
      int64_t u = this->bsrVectors > 0
                      ? this->bsrVectors
                      : std::clamp<int64_t>(registers / (r + 1), 1, maxVectors);
      int64_t fmas = r * u, loads = u + r;
      if (fmas > bestFmas || (fmas == bestFmas && loads < bestLoads)) {
        tileRows = r;
        tileVectors = u;
        bestFmas = fmas;
        bestLoads = loads;
      }
    }
    // bsr-rows not a divisor of the block's rows: the largest that is.
    if (bestFmas == 0) {
      tileRows = 1;
      for (int64_t r = 2; r <= std::min<int64_t>(bh, bsrRows); ++r)
        if (bh % r == 0)
          tileRows = r;
      tileVectors = this->bsrVectors > 0 ? this->bsrVectors : 1;
    }
    if (linear.M < kDecodeTokens)
      tileVectors = 1;
  }

  void runOnOperation() override {
    // Tiles are register tiles: beyond 16 rows or vectors they would not fit
    // any register file (and huge values overflowed the slab arithmetic).
    auto tileOk = [](int64_t v) { return v >= 0 && v <= 16; };
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        !tileOk(rows) ||
        !tileOk(vectors) || !tileOk(nmRows) || !tileOk(nmVectors) ||
        !tileOk(denseRows) || !tileOk(denseVectors) || !tileOk(bsrRows) ||
        !tileOk(bsrVectors)) {
      getOperation().emitError(
          "smlir-lower-sparse-linear: lanes must be 4, 8, 16 or 32 and tile "
          "sizes 1 to 16, or 0 (the default for the lanes)");
      return signalPassFailure();
    }
    // Measured (1 thread, BERT-base FFN shapes): with 16 lanes a CSR token
    // block stays 16 tokens (a 32-token slab row per entry costs more than
    // it saves), n:m takes 6 x 2 (32 tokens per interleaved entry, ~20%
    // faster than 8 lanes' 3 x 4), dense 8 x 2.
    int64_t rows = tile(this->rows, 4, 4), vectors = tile(this->vectors, 2, 1);
    int64_t nmRows = tile(this->nmRows, 3, 6),
            nmVectors = tile(this->nmVectors, 4, 2);
    int64_t denseRows = tile(this->denseRows, 6, 8),
            denseVectors = tile(this->denseVectors, 2, 2);
    // Vector registers the shared-row tile may fill (one for the broadcast).
    int64_t registers = lanes >= 16 ? 31 : 15;
    // Linears are collected first and matched again right before each is
    // lowered: lowering one replaces its result, which the next linear of a
    // chain reads as its x (a match taken before would hold an erased value).
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp linear) {
      if (matchSparseLinear(linear))
        linears.push_back(linear);
    });
    for (LinearOp candidate : linears) {
      std::optional<SparseLinear> match = matchSparseLinear(candidate);
      // An empty linear (0 tokens, rows or columns) computes nothing: left
      // to the generic lowering rather than tiled by zero-sized blocks.
      if (!match || match->M <= 0 || match->N <= 0 || match->K <= 0)
        continue;
      SparseLinear &linear = *match;
      OpBuilder b(linear.op);
      if (permutesDecode(linear)) {
        // R x M accumulators, R permute indices and a token's window in 32
        // registers.
        Value y = buildPermutedDecode(b, linear.op.getLoc(), linear,
                                      std::clamp<int64_t>(24 / linear.M, 1, 4));
        replaceLinear(linear, y);
        continue;
      }
      // Each layout has the tile measured best for it (decode: `rows`).
      int64_t tileRows = rows, tileVectors = vectors;
      if (linear.layout.sharedRows > 1 && linear.M >= kDecodeTokens) {
        // A tile inside one row group (R divides the group), as many token
        // vectors as registers allow (R * U accumulators, U slab vectors
        // and a broadcast in 16 registers): the most FMAs per stored k,
        // then the fewest loads (4 x 3 for groups of 4 or 8: 12 FMAs per
        // 8 loads).
        // bf16 pairs (vdpbf16ps) take up to 3 token vectors by default:
        // 4 x 3 ran 5-13% faster than 4 x 2 (1024 x 768 -> 3072 and 3072 ->
        // 768, 2:4 (4 rows), 1 thread).
        int64_t maxVectors =
            this->nmVectors == 0 && avx512bf16 && takesBF16Pairs(linear, lanes)
                ? 3
                : nmVectors;
        int64_t bestFmas = 0, bestLoads = 0;
        for (int64_t r = 1; r <= std::min<int64_t>(8, linear.layout.sharedRows); ++r) {
          if (linear.layout.sharedRows % r)
            continue;
          int64_t u = std::clamp<int64_t>(registers / (r + 1), 1, maxVectors);
          int64_t fmas = r * u, loads = 1 + u + r;
          if (fmas > bestFmas || (fmas == bestFmas && loads < bestLoads)) {
            tileRows = r;
            tileVectors = u;
            bestFmas = fmas;
            bestLoads = loads;
          }
        }
      } else if (linear.layout.kind == WeightLayout::BSR) {
        bsrTile(linear, registers, tileRows, tileVectors);
      } else if (linear.layout.kind == WeightLayout::NOutOfM) {
        tileRows = nmRows;
        tileVectors = nmVectors;
      } else if (linear.layout.kind == WeightLayout::Dense &&
                 linear.M >= kDecodeTokens) {
        tileRows = denseRows;
        tileVectors = denseVectors;
      }
      // Decode gathers 8 entries at a time whatever the lanes: 16-lane
      // gathers ran ~10% slower on a Zen 4 (a row's tail is then shorter
      // too).
      int64_t kernelLanes =
          linear.M < kDecodeTokens ? std::min<int64_t>(lanes, 8) : lanes;
      // bf16 2:4 on AVX-512 BF16: vdpbf16ps on pairs of x (BF16Pairs.cpp),
      // with the n:m tile.
      bool bf16Pairs = avx512bf16 && takesBF16Pairs(linear, kernelLanes);
      Value y = buildLinearKernel(b, linear.op.getLoc(), linear, tileRows,
                                  tileVectors, kernelLanes, bf16Pairs);
      replaceLinear(linear, y);
    }
  }

  /// n:m decode on AVX-512 with x's entries picked by a permute: m = 2n
  /// (16 entries' groups span two vectors of x), whole groups per vector.
  bool permutesDecode(const SparseLinear &linear) const {
    const WeightLayout &layout = linear.layout;
    return avx512 && lanes == 16 && layout.kind == WeightLayout::NOutOfM &&
           layout.m == 2 * layout.n && 16 % layout.n == 0 &&
           linear.M <= kPermutedDecodeTokens;
  }

  static void replaceLinear(SparseLinear &linear, Value y) {
    OpBuilder b(linear.op);
    Value oldY = linear.op.getResult();
    if (oldY.getType() != y.getType())
      y = tensor::CastOp::create(b, linear.op.getLoc(), oldY.getType(), y);
    oldY.replaceAllUsesWith(y);
    eraseDeadChain(linear.op);
  }
};

} // namespace
