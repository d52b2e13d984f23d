//===- LowerSparseLinear.cpp - register-tiled kernels for y = x * W^T -----===//
//
// An smlir.linear y = x * W^T is lowered here, for a CSR, n:m or dense W[N, K]
// and f32 values, to explicit loops instead of upstream sparsification:
//
//   parallel over (m-block of MB tokens, chunk of weight rows):
//     pack x[m-block, :] feature-major into a K x MB slab (the transpose of
//       x, one cache-sized block at a time, never the whole xT)
//     for each block of R weight rows:
//       R x U vector accumulators (V lanes each, MB = U * V tokens)
//       for the stored entries the R rows have in common (lockstep):
//         acc[r][u] += broadcast(w) * slab[k, u*V : (u+1)*V]
//       the rest of each row alone (CSR rows differ in length)
//       write the R x MB tile of yT as MB rows of y (vectors of R lanes)
//
// With 4+ token blocks a CSR weight is first interleaved by row block
// (padded to the longest row: no per-row rest); n:m rows that share one
// pattern (#smlir.nm<..., rows = r>) load each stored k's slab vectors
// once for the tile's rows.
//
// so neither xT nor yT exists, R * U independent accumulation chains hide
// the FMA latency, and the slab row read for a stored entry is contiguous.
//
// A dense f32 linalg.batch_matmul (attention's q * k^T and p * v) needs no
// packing: its right operand's rows are contiguous along n, so a tile of
// R rows of y x U vectors along n accumulates broadcast(a[m, k]) * b[k, n:]
// and is stored as it is (BatchMatmulBuilder).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/KernelTags.h"
#include "SparseMLIR/Transforms/Passes.h"
#include "SparseMLIR/Transforms/RegisterTranspose.h"

#include "../Utils/IntegerOptions.h"
#include <cmath>
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSPARSELINEAR
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::sparse_tensor;

namespace {

/// Below this many tokens, vectors along tokens would idle most lanes: the
/// decode kernel computes dot products along k instead.
constexpr int64_t kDecodeTokens = 4;
/// Slab bytes an n:m row block reads per pass over k: a k-slice of the slab
/// this size stays in L1 while every row block of the thread reads it (each
/// stored entry reads its own slab row; from L2 they ran at half the FMA
/// rate).
constexpr int64_t kSlabSliceBytes = 16 * 1024;
/// Weight bytes one row chunk of a token-block kernel may read: every token
/// block of the chunk then finds it in L2. A weight past L2 (and L3), read
/// whole by each token block, streamed from memory once per block: a
/// 32000 x 512 2:4 LM head ran 1.3x slower than torch's dense GEMM.
constexpr int64_t kWeightChunkBytes = 512 * 1024;
/// A CSR weight's density is known at run time only: chunks are sized for
/// this one (denser weights then get chunks somewhat past the budget).
constexpr double kAssumedCSRDensity = 0.2;
/// From this many token blocks on, a CSR weight's row blocks are
/// interleaved once per call (O(nnz)) for the token loops that read them.
constexpr int64_t kInterleaveMinTokenBlocks = 4;

/// Where the stored entries of weight row `n` are.
struct WeightLayout {
  enum Kind { Dense, CSR, NOutOfM } kind;
  int64_t n = 0, m = 0; // n:m only
  // n:m whose rows share one pattern in groups of this many (the weight
  // argument's #smlir.nm<..., rows = r>): one slab read serves the group.
  int64_t sharedRows = 1;
};

static std::optional<WeightLayout> classifyWeight(Type type) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return std::nullopt;
  if (!getSparseTensorEncoding(tensorType))
    return tensorType.getRank() == 2 && tensorType.hasStaticShape() &&
                   tensorType.getElementType().isF32()
               ? std::optional(WeightLayout{WeightLayout::Dense})
               : std::nullopt;
  SparseTensorType stt(tensorType);
  if (stt.getDimRank() != 2 || !stt.hasStaticDimShape() ||
      !stt.getElementType().isF32())
    return std::nullopt;
  ArrayRef<LevelType> lvls = stt.getLvlTypes();
  if (stt.isIdentity() && lvls.size() == 2 && isDenseLT(lvls[0]) &&
      isCompressedLT(lvls[1]) && isUniqueLT(lvls[1]) && isOrderedLT(lvls[1]))
    return WeightLayout{WeightLayout::CSR};
  // (d0, d1) -> (d0 : dense, d1 floordiv m : dense, d1 mod m : structured[n, m])
  if (lvls.size() == 3 && isDenseLT(lvls[0]) && isDenseLT(lvls[1]) &&
      isNOutOfMLT(lvls[2]))
    return WeightLayout{WeightLayout::NOutOfM, static_cast<int64_t>(getN(lvls[2])),
                        static_cast<int64_t>(getM(lvls[2]))};
  return std::nullopt;
}

static bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// An smlir.linear with a micro-kernel: x[M, K] static f32, W[N, K].
struct SparseLinear {
  LinearOp op;
  Value x, weight;
  WeightLayout layout;
  int64_t M, K, N;
};

static std::optional<SparseLinear> matchSparseLinear(LinearOp linear) {
  // x * W with W[K, N] and biases are left to smlir-decompose-linear.
  if (linear.getOrientation() != WeightOrientation::OutIn || linear.getBias())
    return std::nullopt;
  Value weight = linear.getWeight();
  std::optional<WeightLayout> layout = classifyWeight(weight.getType());
  Value x = linear.getInput();
  RankedTensorType xType = linear.getInputType();
  if (!layout || !xType.hasStaticShape() || !xType.getElementType().isF32())
    return std::nullopt;
  auto weightShape = linear.getWeightType().getShape();
  // Hoisted weights are function arguments that keep their smlir encoding.
  if (auto arg = dyn_cast<BlockArgument>(weight);
      arg && layout->kind == WeightLayout::NOutOfM)
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      if (auto nm = func.getArgAttrOfType<NMEncodingAttr>(arg.getArgNumber(),
                                                          kEncodingAttrName);
          nm && nm.getN() == layout->n && nm.getM() == layout->m &&
          weightShape[0] % nm.getRows() == 0)
        layout->sharedRows = nm.getRows();
  return SparseLinear{linear, x, weight, *layout, xType.getDimSize(0),
                      xType.getDimSize(1), weightShape[0]};
}

/// Emits the loops of one SparseLinear (see the file comment).
class MicrokernelBuilder {
public:
  MicrokernelBuilder(OpBuilder &b, Location loc, const SparseLinear &linear,
                     int64_t rows, int64_t vectors, int64_t lanes)
      : b(b), loc(loc), lin(linear), R(rows), V(lanes),
        U(std::min<int64_t>(vectors, llvm::divideCeil(linear.M, lanes))),
        MB(U * V), sliceGroups(groupsPerSlice(linear, MB)),
        slices(linear.layout.kind == WeightLayout::NOutOfM
                   ? llvm::divideCeil(linear.K / linear.layout.m, sliceGroups)
                   : 1),
        f32(b.getF32Type()), vecType(VectorType::get({V}, f32)) {}

  /// Returns y[M, N] as a tensor.
  Value build() {
    auto yType = MemRefType::get({lin.M, lin.N}, f32);
    x = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get({lin.M, lin.K}, f32), lin.x, /*read_only=*/true);
    y = memref::AllocOp::create(b, loc, yType, b.getI64IntegerAttr(64));
    if (lin.layout.kind == WeightLayout::Dense) {
      values = bufferization::ToBufferOp::create(
          b, loc, MemRefType::get({lin.N, lin.K}, f32), lin.weight,
          /*read_only=*/true);
    } else {
      if (lin.layout.kind == WeightLayout::CSR)
        positions = ToPositionsOp::create(b, loc, lin.weight, 1);
      coordinates = ToCoordinatesOp::create(
          b, loc, lin.weight, lin.layout.kind == WeightLayout::CSR ? 1 : 2);
      values = ToValuesOp::create(b, loc, lin.weight);
    }

    emitKernelRegion(b, loc, kernelName(), [&] {
      if (lin.M < kDecodeTokens)
        buildDecode();
      else
        buildTokenBlocks();
    });
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get({lin.M, lin.N}, f32), y,
        /*restrict=*/true, /*writable=*/true);
  }

private:
  /// "linear_csr_1024x768x3072": what and which shape (M x K x N).
  std::string kernelName() const {
    std::string kind = lin.layout.kind == WeightLayout::Dense ? "dense"
                       : lin.layout.kind == WeightLayout::CSR
                           ? "csr"
                           : std::to_string(lin.layout.n) + "of" +
                                 std::to_string(lin.layout.m);
    // "2of4r4": the kernel for rows sharing patterns in fours (decode reads
    // each row on its own).
    if (lin.layout.sharedRows > 1 && lin.M >= kDecodeTokens)
      kind += "r" + std::to_string(lin.layout.sharedRows);
    return llvm::formatv("linear_{0}_{1}x{2}x{3}", kind, lin.M, lin.K, lin.N)
        .str();
  }

  /// M >= kDecodeTokens: token blocks of MB packed into slabs.
  void buildTokenBlocks() {
    int64_t mBlocks = llvm::divideCeil(lin.M, MB);
    int64_t nBlocks = llvm::divideCeil(lin.N, R);
    // Few token blocks (decode): split the weight rows across threads too.
    // Many: split them in chunks that fit L2, each read by every token
    // block in turn (chunks the outer loop).
    bool chunksOuter = mBlocks >= 8;
    int64_t chunks = chunksOuter ? std::min<int64_t>(nBlocks, cacheChunks())
                                 : std::min<int64_t>(nBlocks, 16);
    chunksOuter = chunksOuter && chunks > 1;
    int64_t blocksPerChunk = llvm::divideCeil(nBlocks, chunks);
    // x packed feature-major per token block: block mb holds
    // slab[k * MB + j] = x[mb * MB + j, k]. Packed once, before the rows are
    // split across threads; heap, not stack, so that large K and many
    // blocks fit (ownership-based deallocation frees it).
    Value slabs = memref::AllocOp::create(
        b, loc, MemRefType::get({mBlocks * lin.K * MB}, f32),
        b.getI64IntegerAttr(64));
    // With one chunk per token block, each iteration packs its own slab
    // right before reading it (from cache, not from memory after all blocks
    // were packed); several chunks of one block need it packed first.
    bool packInPlace = chunks == 1;
    if (!packInPlace)
      scf::ParallelOp::create(b, loc, ValueRange{idx(0)}, ValueRange{idx(mBlocks)},
                              ValueRange{idx(1)},
                              [&](OpBuilder &, Location, ValueRange ivs) {
                                pack(slabs, ivs[0]);
                              });
    if (mBlocks >= kInterleaveMinTokenBlocks && lin.K * MB < (int64_t{1} << 31)) {
      if (lin.layout.kind == WeightLayout::CSR)
        interleaveRows();
      else if (lin.layout.kind == WeightLayout::NOutOfM &&
               lin.layout.sharedRows == 1)
        interleaveGroups();
    }
    // n:m over a slab larger than L1: k in slices of whole groups, every
    // row block of the thread per slice, the R x MB partial sums of a row
    // block kept in `partial` (yT's layout per token block) between slices.
    Value partial;
    if (slices > 1)
      partial = memref::AllocOp::create(
          b, loc, MemRefType::get({mBlocks * nBlocks * R * MB}, f32),
          b.getI64IntegerAttr(64));
    // Tiles go to y through a per-iteration stage of MB tokens x W columns
    // (stageRowBlocks row blocks), copied out a token row at a time: y's
    // rows are then written in W-float runs, not R-float pieces, which at
    // row strides of a multiple of 4 KB (N = 1024, 3072, ...) all fall in
    // one L1 set and were evicted between the pieces (~1.4 ms of 9.5 at
    // 1024 x 768 -> 3072).
    stages = memref::AllocOp::create(
        b, loc, MemRefType::get({mBlocks * chunks * MB * stageWidth()}, f32),
        b.getI64IntegerAttr(64));
    // Every stage is whole (no masked copy) when one thread walks all row
    // blocks in whole stages and R divides N.
    stagesMayBePartial =
        chunks > 1 || nBlocks % stageRowBlocks() != 0 || lin.N % R != 0;
    // One thread's iterations are consecutive (static schedule over the
    // collapsed loops): with chunks outer, its token blocks share a chunk.
    int64_t outer = chunksOuter ? chunks : mBlocks;
    int64_t inner = chunksOuter ? mBlocks : chunks;
    scf::ParallelOp::create(
        b, loc, ValueRange{idx(0), idx(0)}, ValueRange{idx(outer), idx(inner)},
        ValueRange{idx(1), idx(1)},
        [&](OpBuilder &, Location, ValueRange ivs) {
          Value mb = chunksOuter ? ivs[1] : ivs[0];
          Value chunk = chunksOuter ? ivs[0] : ivs[1];
          if (packInPlace)
            pack(slabs, mb);
          stageBase = mul(add(mul(mb, idx(chunks)), chunk),
                          idx(MB * stageWidth()));
          Value m0 = mul(mb, idx(MB));
          // The token block's slab as its own memref: its base pointer is
          // computed once, not added to every stored entry's offset.
          Value slab = memref::SubViewOp::create(
              b, loc, slabs,
              ArrayRef<OpFoldResult>{mul(mb, idx(lin.K * MB))},
              ArrayRef<OpFoldResult>{b.getIndexAttr(lin.K * MB)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
          Value first = mul(chunk, idx(blocksPerChunk));
          Value last = arith::MinSIOp::create(
              b, loc, add(first, idx(blocksPerChunk)), idx(nBlocks));
          if (slices > 1) {
            slicedRowBlocks(slab, partial, mb, m0, first, last);
          } else {
            stagedRowBlocks(first, last, m0, Value(), [&](Value nb, Value column) {
              rowBlock(slab, m0, nb, column);
            });
          }
        });
  }

  /// Row chunks whose stored entries fit kWeightChunkBytes (8 bytes an
  /// entry as the token loops read them: value and offset interleaved).
  int64_t cacheChunks() const {
    double entriesPerRow =
        lin.layout.kind == WeightLayout::Dense ? lin.K / 2.0
        : lin.layout.kind == WeightLayout::CSR
            ? lin.K * kAssumedCSRDensity
            : double(lin.K) * lin.layout.n / lin.layout.m;
    double bytes = entriesPerRow * 8 * double(lin.N);
    return std::max<int64_t>(1, int64_t(std::ceil(bytes / kWeightChunkBytes)));
  }

  /// Row blocks per output stage: ~64 columns (4 cache lines per token
  /// row), a multiple of 16 so that it copies out in whole vectors.
  int64_t stageRowBlocks() const {
    int64_t unit = std::lcm<int64_t>(R, 16) / R;
    return unit * llvm::divideCeil(64, unit * R);
  }
  int64_t stageWidth() const { return stageRowBlocks() * R; }

  /// Row blocks [first, last) in stages of stageRowBlocks(): `visit(nb,
  /// column)` stores row block nb's tile at `column` of the stage, which
  /// then goes to y (where `flush` holds, if given).
  void stagedRowBlocks(Value first, Value last, Value m0, Value flush,
                       llvm::function_ref<void(Value nb, Value column)> visit) {
    int64_t S = stageRowBlocks();
    scf::ForOp::create(
        b, loc, first, last, idx(S), ValueRange{},
        [&](OpBuilder &, Location, Value s0, ValueRange) {
          Value s1 = arith::MinSIOp::create(b, loc, add(s0, idx(S)), last);
          scf::ForOp::create(b, loc, s0, s1, idx(1), ValueRange{},
                             [&](OpBuilder &, Location, Value nb, ValueRange) {
                               visit(nb, mul(arith::SubIOp::create(b, loc, nb, s0),
                                             idx(R)));
                               scf::YieldOp::create(b, loc);
                             });
          // The stage's columns: its row blocks', up to N.
          Value nEnd = arith::MinSIOp::create(b, loc, mul(s1, idx(R)), idx(lin.N));
          if (flush) {
            scf::IfOp::create(b, loc, flush, [&](OpBuilder &, Location) {
              flushStage(m0, mul(s0, idx(R)), nEnd);
              scf::YieldOp::create(b, loc);
            });
          } else {
            flushStage(m0, mul(s0, idx(R)), nEnd);
          }
          scf::YieldOp::create(b, loc);
        });
  }

  /// The stage's tokens x columns [n0, nEnd) to y, V columns at a time:
  /// whole stages unmasked, a partial one (the last of a row of y, or of a
  /// thread's chunk of row blocks) masked.
  void flushStage(Value m0, Value n0, Value nEnd) {
    int64_t W = stageWidth();
    // A loop over the block's tokens (the copy unrolled per token made the
    // kernels' code, and LLVM's compile time, grow with MB).
    Value tokens = lin.M % MB == 0
                       ? idx(MB)
                       : arith::MinSIOp::create(
                             b, loc, idx(MB),
                             arith::SubIOp::create(b, loc, idx(lin.M), m0));
    auto copy = [&](bool masked) {
      scf::ForOp::create(
          b, loc, idx(0), tokens, idx(1), ValueRange{},
          [&](OpBuilder &, Location, Value t, ValueRange) {
            Value m = add(m0, t);
            Value row = add(stageBase, mul(t, idx(W)));
            for (int64_t c = 0; c < W; c += V) {
              Value v = vector::LoadOp::create(b, loc, vecType, stages,
                                               ValueRange{add(row, idx(c))});
              Value n = add(n0, idx(c));
              if (!masked) {
                vector::StoreOp::create(b, loc, v, y, ValueRange{m, n});
                continue;
              }
              // Columns n .. nEnd - 1 of this vector (none when n >= nEnd).
              Value left = arith::SubIOp::create(
                  b, loc, arith::MaxSIOp::create(b, loc, nEnd, n), n);
              Value mask = vector::CreateMaskOp::create(
                  b, loc, VectorType::get({V}, b.getI1Type()), ValueRange{left});
              vector::MaskedStoreOp::create(b, loc, y, ValueRange{m, n}, mask, v);
            }
            scf::YieldOp::create(b, loc);
          });
    };
    if (!stagesMayBePartial) {
      copy(/*masked=*/false);
      return;
    }
    scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, add(n0, idx(W)),
                              nEnd),
        [&](OpBuilder &, Location) {
          copy(false);
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &, Location) {
          copy(true);
          scf::YieldOp::create(b, loc);
        });
  }


  /// n:m groups whose slab rows (MB f32 each) fill kSlabSliceBytes.
  static int64_t groupsPerSlice(const SparseLinear &linear, int64_t MB) {
    if (linear.layout.kind != WeightLayout::NOutOfM)
      return 0;
    return std::max<int64_t>(1, kSlabSliceBytes / (4 * MB * linear.layout.m));
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value l, Value r) { return arith::AddIOp::create(b, loc, l, r); }
  Value mul(Value l, Value r) { return arith::MulIOp::create(b, loc, l, r); }
  Value toIndex(Value v) {
    if (v.getType().isIndex())
      return v;
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
  }
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(b, loc, memref, indices);
  }
  Value zeroVector() {
    return arith::ConstantOp::create(b, loc, vecType,
                                     DenseElementsAttr::get(vecType, 0.0f));
  }

  /// Block mb of `slabs`: slab[k * MB + j] = x[mb * MB + j, k], zero past
  /// the last token. 8 x 8 tiles are transposed in registers whatever the
  /// lanes (8-lane vectors: 8 row loads, 24 shuffles, 8 slab-row stores per
  /// 64 values; MB is a multiple of 8); the last K mod 8 features one value
  /// at a time.
  void pack(Value slabs, Value mb) {
    Value m0 = mul(mb, idx(MB));
    Value slab = mul(mb, idx(lin.K * MB));
    Value zero = arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(0));
    bool partialBlocks = lin.M % MB != 0;
    auto octType = VectorType::get({8}, f32);
    Value zeroOct = arith::ConstantOp::create(
        b, loc, octType, DenseElementsAttr::get(octType, 0.0f));
    int64_t vectorK = MB % 8 == 0 ? lin.K / 8 * 8 : 0;
    if (vectorK > 0)
      scf::ForOp::create(
          b, loc, idx(0), idx(vectorK), idx(8), ValueRange{},
          [&](OpBuilder &, Location, Value k0, ValueRange) {
            for (int64_t g = 0; g < MB / 8; ++g) {
              SmallVector<Value> rows;
              for (int64_t i = 0; i < 8; ++i) {
                Value m = add(m0, idx(g * 8 + i));
                Value mClamped = arith::MinUIOp::create(b, loc, m, idx(lin.M - 1));
                Value row = vector::LoadOp::create(b, loc, octType, x,
                                                   ValueRange{mClamped, k0});
                if (partialBlocks)
                  row = arith::SelectOp::create(
                      b, loc,
                      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, m,
                                            idx(lin.M)),
                      row, zeroOct);
                rows.push_back(row);
              }
              SmallVector<Value> columns = transpose8x8(b, loc, rows);
              for (int64_t c = 0; c < 8; ++c)
                vector::StoreOp::create(
                    b, loc, columns[c], slabs,
                    ValueRange{add(slab, add(mul(add(k0, idx(c)), idx(MB)),
                                             idx(g * 8)))});
            }
            scf::YieldOp::create(b, loc);
          });
    if (vectorK == lin.K)
      return;
    scf::ForOp::create(
        b, loc, idx(0), idx(MB), idx(1), ValueRange{},
        [&](OpBuilder &, Location, Value j, ValueRange) {
          Value m = add(m0, j);
          Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                               m, idx(lin.M));
          scf::ForOp::create(
              b, loc, idx(vectorK), idx(lin.K), idx(1), ValueRange{},
              [&](OpBuilder &, Location, Value k, ValueRange) {
                Value mClamped = arith::MinUIOp::create(b, loc, m, idx(lin.M - 1));
                Value v = load(x, {mClamped, k});
                v = arith::SelectOp::create(b, loc, inside, v, zero);
                memref::StoreOp::create(b, loc, v, slabs,
                                        add(slab, add(mul(k, idx(MB)), j)));
                scf::YieldOp::create(b, loc);
              });
          scf::YieldOp::create(b, loc);
        });
  }

  /// Visits stored entry `p` of a row, whose k is kBase + its stored
  /// coordinate (n:m coordinates are in-group), with the row's accumulators.
  using EntryVisitor =
      llvm::function_ref<void(Value kBase, Value p, MutableArrayRef<Value> acc)>;

  /// acc[u] += w * slab[k, u*V : (u+1)*V]: the token-block visitor.
  void accumulateEntry(Value slab, Value kBase, Value p,
                       MutableArrayRef<Value> acc) {
    Value k = add(kBase, toIndex(load(coordinates, {p})));
    Value w = vector::BroadcastOp::create(b, loc, vecType, load(values, {p}));
    Value row = mul(k, idx(MB));
    for (int64_t u = 0; u < U; ++u) {
      Value xv = vector::LoadOp::create(b, loc, vecType, slab,
                                        ValueRange{add(row, idx(u * V))});
      acc[u] = vector::FMAOp::create(b, loc, w, xv, acc[u]);
    }
  }

  /// A loop over the stored entries [lo, hi) of the given rows (CSR), or
  /// over the groups [lo, hi) of n entries each (n:m), carrying `perRow`
  /// accumulators per row.
  void entryLoop(Value lo, Value hi, ArrayRef<Value> starts, int64_t perRow,
                 SmallVectorImpl<Value> &acc, EntryVisitor visit) {
    bool nm = lin.layout.kind == WeightLayout::NOutOfM;
    auto loop = scf::ForOp::create(
        b, loc, lo, hi, idx(1), acc,
        [&](OpBuilder &, Location, Value j, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          // n:m: group j covers k = j*m .. j*m + m - 1 and the row's
          // entries j*n .. j*n + n - 1.
          Value kBase = nm ? mul(j, idx(lin.layout.m)) : idx(0);
          Value first = nm ? mul(j, idx(lin.layout.n)) : j;
          for (int64_t e = 0; e < (nm ? lin.layout.n : 1); ++e)
            for (auto [r, start] : llvm::enumerate(starts))
              visit(kBase, add(start, add(first, idx(e))),
                    MutableArrayRef<Value>(next).slice(r * perRow, perRow));
          scf::YieldOp::create(b, loc, next);
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }

  /// n:m rows sharing one pattern (a tile inside one row group): groups
  /// [lo, hi) of the R rows at `starts`, coordinates read from the first
  /// row; each stored k's U slab vectors are loaded once for all R rows
  /// (R * U FMAs per U loads, as for a dense weight).
  void sharedEntryLoop(Value lo, Value hi, ArrayRef<Value> starts,
                       SmallVectorImpl<Value> &acc, Value slab) {
    int64_t n = lin.layout.n;
    auto loop = scf::ForOp::create(
        b, loc, lo, hi, idx(1), acc,
        [&](OpBuilder &, Location, Value j, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          Value kBase = mul(j, idx(lin.layout.m));
          for (int64_t e = 0; e < n; ++e) {
            Value entry = add(mul(j, idx(n)), idx(e));
            Value k = add(kBase, toIndex(load(coordinates, {add(starts[0], entry)})));
            accumulateSlabRow(slab, mul(k, idx(MB)), next,
                              [&](int64_t r) {
                                return load(values, {add(starts[r], entry)});
                              });
          }
          scf::YieldOp::create(b, loc, next);
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }

  /// acc[r][u] += broadcast(weight(r)) * slab[row + u*V : +V] for the R
  /// rows of a tile that share one k: the U slab vectors are loaded once
  /// (dense weights, n:m rows sharing a pattern).
  void accumulateSlabRow(Value slab, Value row, MutableArrayRef<Value> acc,
                         llvm::function_ref<Value(int64_t)> weight) {
    SmallVector<Value> xv;
    for (int64_t u = 0; u < U; ++u)
      xv.push_back(vector::LoadOp::create(b, loc, vecType, slab,
                                          ValueRange{add(row, idx(u * V))}));
    for (int64_t r = 0; r < R; ++r) {
      Value w = vector::BroadcastOp::create(b, loc, vecType, weight(r));
      for (int64_t u = 0; u < U; ++u)
        acc[r * U + u] = vector::FMAOp::create(b, loc, w, xv[u], acc[r * U + u]);
    }
  }

  /// The stored entries of rows n0 .. n0 + R: lockstep over those all rows
  /// have (R * perRow independent chains), then each CSR row alone.
  void sparseRows(Value n0, int64_t perRow, SmallVectorImpl<Value> &acc,
                  EntryVisitor visit) {
    SmallVector<Value> starts, lengths;
    rowExtents(n0, starts, lengths);
    Value common = lengths[0];
    for (Value length : ArrayRef<Value>(lengths).drop_front())
      common = arith::MinUIOp::create(b, loc, common, length);
    entryLoop(idx(0), common, starts, perRow, acc, visit);
    if (lin.layout.kind != WeightLayout::CSR)
      return;
    for (int64_t r = 0; r < R; ++r) {
      SmallVector<Value> rowAcc(acc.begin() + r * perRow,
                                acc.begin() + (r + 1) * perRow);
      entryLoop(common, lengths[r], {starts[r]}, perRow, rowAcc, visit);
      llvm::copy(rowAcc, acc.begin() + r * perRow);
    }
  }

  /// Where the entries of rows n0 .. n0 + R start and how many there are
  /// (dense: the row; n:m: counted in groups). Rows past N repeat row
  /// N - 1, keeping the lockstep; their results are masked off.
  void rowExtents(Value n0, SmallVectorImpl<Value> &starts,
                  SmallVectorImpl<Value> &lengths) {
    for (int64_t r = 0; r < R; ++r) {
      // Unclamped where R divides N: the rows' starts are then one base plus
      // constants, one register for all R rows.
      Value nClamped =
          lin.N % R == 0
              ? add(n0, idx(r))
              : arith::MinUIOp::create(b, loc, add(n0, idx(r)), idx(lin.N - 1));
      Value start, length;
      if (lin.layout.kind == WeightLayout::Dense) {
        start = nClamped;
        length = idx(lin.K);
      } else if (lin.layout.kind == WeightLayout::CSR) {
        start = toIndex(load(positions, {nClamped}));
        Value end = toIndex(load(positions, {add(nClamped, idx(1))}));
        length = arith::SubIOp::create(b, loc, end, start);
      } else {
        int64_t groups = lin.K / lin.layout.m;
        start = mul(nClamped, idx(groups * lin.layout.n));
        length = idx(groups);
      }
      starts.push_back(start);
      lengths.push_back(length);
    }
  }

  /// Dense W: every k, one slab row shared by the R rows (R * U FMAs per
  /// U loads, as in a dense GEMM micro-kernel).
  void denseLoop(Value slab, ArrayRef<Value> rows,
                 SmallVectorImpl<Value> &acc) {
    auto loop = scf::ForOp::create(
        b, loc, idx(0), idx(lin.K), idx(1), acc,
        [&](OpBuilder &, Location, Value k, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          accumulateSlabRow(slab, mul(k, idx(MB)), next,
                            [&](int64_t r) { return load(values, {rows[r], k}); });
          scf::YieldOp::create(b, loc, next);
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }

  /// A CSR weight read by many token blocks, re-laid out once per call:
  /// the R rows of row block nb interleaved entry by entry and padded with
  /// zero values to the block's longest row, entry p of row r at
  /// (blockStarts[nb] + p) * R + r, as one i64: its slab offset k * MB
  /// above its value's bits. The token loop then walks one index per
  /// block: no per-row pointers, tails or coordinate scaling, and one load
  /// per entry besides the slab's (the load ports are what bounds it: a
  /// separate offset and value load cost ~25% at 90% sparsity), at the
  /// price of the padding (~10% more FMAs at 90% sparsity).
  void interleaveRows() {
    int64_t nBlocks = llvm::divideCeil(lin.N, R);
    Type indexType = b.getIndexType();
    blockStarts = memref::AllocOp::create(
        b, loc, MemRefType::get({nBlocks + 1}, indexType), b.getI64IntegerAttr(64));
    // Rows past N (repeated by rowExtents) store nothing.
    auto extents = [&](Value nb, SmallVectorImpl<Value> &starts,
                       SmallVectorImpl<Value> &lengths) {
      Value n0 = mul(nb, idx(R));
      rowExtents(n0, starts, lengths);
      for (int64_t r = 0; r < R; ++r) {
        Value inside = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ult, add(n0, idx(r)), idx(lin.N));
        lengths[r] = arith::SelectOp::create(b, loc, inside, lengths[r], idx(0));
      }
    };
    // blockStarts: the prefix sums of the blocks' longest rows.
    auto prefix = scf::ForOp::create(
        b, loc, idx(0), idx(nBlocks), idx(1), ValueRange{idx(0)},
        [&](OpBuilder &, Location, Value nb, ValueRange carried) {
          memref::StoreOp::create(b, loc, carried[0], blockStarts, ValueRange{nb});
          SmallVector<Value> starts, lengths;
          extents(nb, starts, lengths);
          Value longest = idx(0);
          for (Value length : lengths)
            longest = arith::MaxUIOp::create(b, loc, longest, length);
          scf::YieldOp::create(b, loc, ValueRange{add(carried[0], longest)});
        });
    memref::StoreOp::create(b, loc, prefix.getResult(0), blockStarts,
                            ValueRange{idx(nBlocks)});
    Value size = mul(prefix.getResult(0), idx(R));
    Type i64 = b.getI64Type();
    packedEntries = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, i64), ValueRange{size},
        b.getI64IntegerAttr(64));
    // Padding: value 0.0 (all bits zero) at offset 0.
    Value padding = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
    scf::ParallelOp::create(
        b, loc, ValueRange{idx(0)}, ValueRange{idx(nBlocks)}, ValueRange{idx(1)},
        [&](OpBuilder &, Location, ValueRange ivs) {
          Value nb = ivs[0];
          Value base = load(blockStarts, {nb});
          Value length = arith::SubIOp::create(
              b, loc, load(blockStarts, {add(nb, idx(1))}), base);
          SmallVector<Value> starts, lengths;
          extents(nb, starts, lengths);
          for (int64_t r = 0; r < R; ++r) {
            Value start = starts[r], rowLen = lengths[r];
            scf::ForOp::create(
                b, loc, idx(0), length, idx(1), ValueRange{},
                [&](OpBuilder &, Location, Value p, ValueRange) {
                  Value stored = arith::CmpIOp::create(
                      b, loc, arith::CmpIPredicate::ult, p, rowLen);
                  auto entry = scf::IfOp::create(b, loc, TypeRange{i64}, stored,
                                                 /*withElseRegion=*/true);
                  b.setInsertionPointToStart(&entry.getThenRegion().front());
                  Value at = add(start, p);
                  Value k = toIndex(load(coordinates, {at}));
                  scf::YieldOp::create(
                      b, loc, ValueRange{packEntry(mul(k, idx(MB)), load(values, {at}))});
                  b.setInsertionPointToStart(&entry.getElseRegion().front());
                  scf::YieldOp::create(b, loc, ValueRange{padding});
                  b.setInsertionPointAfter(entry);
                  Value q = add(mul(add(base, p), idx(R)), idx(r));
                  memref::StoreOp::create(b, loc, entry.getResult(0), packedEntries,
                                          ValueRange{q});
                  scf::YieldOp::create(b, loc);
                });
          }
        });
  }

  /// An n:m weight read by many token blocks, re-laid out once per call as
  /// interleaveRows does for CSR (no padding: its rows are all as long):
  /// entry e of group g of row r of row block nb at
  /// ((nb * groups + g) * n + e) * R + r, its slab offset (g * m + crd) * MB
  /// above its value's bits, so a k-slice of groups is one contiguous range
  /// per row block. Rows past N are zero.
  void interleaveGroups() {
    int64_t nBlocks = llvm::divideCeil(lin.N, R);
    int64_t groups = lin.K / lin.layout.m, n = lin.layout.n;
    Type i64 = b.getI64Type();
    packedEntries = memref::AllocOp::create(
        b, loc, MemRefType::get({nBlocks * groups * n * R}, i64),
        b.getI64IntegerAttr(64));
    scf::ParallelOp::create(
        b, loc, ValueRange{idx(0)}, ValueRange{idx(nBlocks)}, ValueRange{idx(1)},
        [&](OpBuilder &, Location, ValueRange ivs) {
          Value nb = ivs[0];
          SmallVector<Value> starts, lengths;
          rowExtents(mul(nb, idx(R)), starts, lengths);
          Value base = mul(nb, idx(groups * n * R));
          scf::ForOp::create(
              b, loc, idx(0), idx(groups * n), idx(1), ValueRange{},
              [&](OpBuilder &, Location, Value j, ValueRange) {
                // Entry j of a row: group j / n, at k = (j / n) * m + crd.
                Value kBase = mul(arith::DivUIOp::create(b, loc, j, idx(n)),
                                  idx(lin.layout.m));
                for (int64_t r = 0; r < R; ++r) {
                  Value at = add(starts[r], j);
                  Value k = add(kBase, toIndex(load(coordinates, {at})));
                  Value entry = packEntry(mul(k, idx(MB)), load(values, {at}));
                  if (lin.N % R)
                    entry = arith::SelectOp::create(
                        b, loc,
                        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              add(mul(nb, idx(R)), idx(r)),
                                              idx(lin.N)),
                        entry,
                        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
                  memref::StoreOp::create(b, loc, entry, packedEntries,
                                          ValueRange{add(base, add(mul(j, idx(R)), idx(r)))});
                }
                scf::YieldOp::create(b, loc);
              });
        });
  }

  /// An interleaved entry: slab offset (index, < 2^31) << 32 | value bits.
  Value packEntry(Value offset, Value value) {
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Value high = arith::ExtUIOp::create(
        b, loc, i64, arith::IndexCastUIOp::create(b, loc, i32, offset));
    Value low = arith::ExtUIOp::create(b, loc, i64,
                                       arith::BitcastOp::create(b, loc, i32, value));
    return arith::OrIOp::create(
        b, loc,
        arith::ShLIOp::create(
            b, loc, high, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32))),
        low);
  }

  /// Row block nb of an interleaved CSR weight (interleaveRows): all R rows
  /// in lockstep to the block's longest row.
  void interleavedRows(Value nb, Value slab,
                       SmallVectorImpl<Value> &acc) {
    Value lo = mul(load(blockStarts, {nb}), idx(R));
    Value hi = mul(load(blockStarts, {add(nb, idx(1))}), idx(R));
    interleavedEntries(lo, hi, slab, acc);
  }

  /// Interleaved entries [lo, hi) (a multiple of R apart): R at a time, one
  /// per row, each one i64 load, a broadcast and U FMAs on the token
  /// block's slab `slab`.
  void interleavedEntries(Value lo, Value hi, Value slab,
                          SmallVectorImpl<Value> &acc) {
    auto loop = scf::ForOp::create(
        b, loc, lo, hi, idx(R), acc,
        [&](OpBuilder &, Location, Value q, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          for (int64_t r = 0; r < R; ++r) {
            Value at = add(q, idx(r));
            Value packed = load(packedEntries, {at});
            // Low half: the value's bits (a broadcast from a GPR); high
            // half: the offset (one shift, no masking).
            Value bits = arith::TruncIOp::create(b, loc, b.getI32Type(), packed);
            Value row = arith::IndexCastUIOp::create(
                b, loc, b.getIndexType(),
                arith::ShRUIOp::create(
                    b, loc, packed,
                    arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32))));
            Value w = vector::BroadcastOp::create(
                b, loc, vecType, arith::BitcastOp::create(b, loc, f32, bits));
            for (int64_t u = 0; u < U; ++u) {
              Value xv = vector::LoadOp::create(b, loc, vecType, slab,
                                                ValueRange{add(row, idx(u * V))});
              next[r * U + u] =
                  vector::FMAOp::create(b, loc, w, xv, next[r * U + u]);
            }
          }
          scf::YieldOp::create(b, loc, next);
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }

  /// Rows n0 .. n0 + R of yT for tokens m0 .. m0 + MB, written to y.
  void rowBlock(Value slab, Value m0, Value nb, Value column) {
    Value n0 = mul(nb, idx(R));
    SmallVector<Value> acc(R * U, zeroVector());
    if (blockStarts) {
      interleavedRows(nb, slab, acc);
    } else if (packedEntries) { // n:m, one k-slice
      int64_t blockEntries = lin.K / lin.layout.m * lin.layout.n * R;
      Value lo = mul(nb, idx(blockEntries));
      interleavedEntries(lo, add(lo, idx(blockEntries)), slab, acc);
    } else if (lin.layout.kind == WeightLayout::Dense) {
      SmallVector<Value> rows, lengths;
      rowExtents(n0, rows, lengths);
      denseLoop(slab, rows, acc);
    } else if (lin.layout.sharedRows > 1) {
      SmallVector<Value> starts, lengths;
      rowExtents(n0, starts, lengths);
      sharedEntryLoop(idx(0), lengths[0], starts, acc, slab);
    } else {
      sparseRows(n0, U, acc, [&](Value kBase, Value p, MutableArrayRef<Value> a) {
        accumulateEntry(slab, kBase, p, a);
      });
    }
    store(acc, column);
  }

  /// Row blocks [first, last) of token block mb, k in `slices` slices of
  /// `sliceGroups` n:m groups: slice-major, so a row block's slab reads stay
  /// in the slice's few KB.
  void slicedRowBlocks(Value slab, Value partial, Value mb, Value m0,
                       Value first, Value last) {
    int64_t groups = lin.K / lin.layout.m;
    int64_t nBlocks = llvm::divideCeil(lin.N, R);
    Value zero = zeroVector();
    SmallVector<Type> accTypes(R * U, vecType);
    scf::ForOp::create(
        b, loc, idx(0), idx(slices), idx(1), ValueRange{},
        [&](OpBuilder &, Location, Value slice, ValueRange) {
          Value g0 = mul(slice, idx(sliceGroups));
          Value g1 = arith::MinUIOp::create(b, loc, add(g0, idx(sliceGroups)),
                                            idx(groups));
          Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                                slice, idx(0));
          Value isLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                               slice, idx(slices - 1));
          stagedRowBlocks(
              first, last, m0, isLast, [&](Value nb, Value column) {
                Value n0 = mul(nb, idx(R));
                // partial[((mb * nBlocks + nb) * R + r) * MB + u * V]
                Value tile = mul(add(mul(mb, idx(nBlocks)), nb), idx(R * MB));
                auto init = scf::IfOp::create(
                    b, loc, accTypes, isFirst, /*withElseRegion=*/true);
                b.setInsertionPointToStart(&init.getThenRegion().front());
                scf::YieldOp::create(b, loc, SmallVector<Value>(R * U, zero));
                b.setInsertionPointToStart(&init.getElseRegion().front());
                SmallVector<Value> loaded;
                for (int64_t i = 0; i < R * U; ++i)
                  loaded.push_back(vector::LoadOp::create(
                      b, loc, vecType, partial, ValueRange{add(tile, idx(i * V))}));
                scf::YieldOp::create(b, loc, loaded);
                b.setInsertionPointAfter(init);
                SmallVector<Value> acc(init.getResults().begin(), init.getResults().end());
                SmallVector<Value> rowStarts, rowLengths;
                rowExtents(n0, rowStarts, rowLengths);
                if (lin.layout.sharedRows > 1) {
                  sharedEntryLoop(g0, g1, rowStarts, acc, slab);
                } else if (packedEntries) {
                  // Groups [g0, g1) of row block nb (interleaveGroups).
                  Value blockBase = mul(nb, idx(groups));
                  int64_t groupEntries = lin.layout.n * R;
                  interleavedEntries(mul(add(blockBase, g0), idx(groupEntries)),
                                     mul(add(blockBase, g1), idx(groupEntries)),
                                     slab, acc);
                } else {
                  entryLoop(g0, g1, rowStarts, U, acc,
                            [&](Value kBase, Value p, MutableArrayRef<Value> a) {
                              accumulateEntry(slab, kBase, p, a);
                            });
                }
                scf::IfOp::create(
                    b, loc, isLast,
                    [&](OpBuilder &, Location) {
                      store(acc, column);
                      scf::YieldOp::create(b, loc);
                    },
                    [&](OpBuilder &, Location) {
                      for (int64_t i = 0; i < R * U; ++i)
                        vector::StoreOp::create(b, loc, acc[i], partial,
                                                ValueRange{add(tile, idx(i * V))});
                      scf::YieldOp::create(b, loc);
                    });
              });
          scf::YieldOp::create(b, loc);
        });
  }

  /// Decode (a few tokens): y[m, n] is a dot product of row n with x[m, :]
  /// (no packing, no idle lanes). Dense rows: vectors along k, the x vector
  /// shared by R rows, reduced at the end; sparse rows: R scalar chains
  /// gathering x[m, k]. Threads split the rows.
  void buildDecode() {
    int64_t nBlocks = llvm::divideCeil(lin.N, R);
    int64_t chunks = std::min<int64_t>(nBlocks, 64);
    int64_t blocksPerChunk = llvm::divideCeil(nBlocks, chunks);
    scf::ParallelOp::create(
        b, loc, ValueRange{idx(0)}, ValueRange{idx(chunks)}, ValueRange{idx(1)},
        [&](OpBuilder &, Location, ValueRange ivs) {
          Value first = mul(ivs[0], idx(blocksPerChunk));
          Value last = arith::MinSIOp::create(
              b, loc, add(first, idx(blocksPerChunk)), idx(nBlocks));
          scf::ForOp::create(
              b, loc, first, last, idx(1), ValueRange{},
              [&](OpBuilder &, Location, Value nb, ValueRange) {
                scf::ForOp::create(
                    b, loc, idx(0), idx(lin.M), idx(1), ValueRange{},
                    [&](OpBuilder &, Location, Value m, ValueRange) {
                      decodeRows(m, mul(nb, idx(R)));
                      scf::YieldOp::create(b, loc);
                    });
                scf::YieldOp::create(b, loc);
              });
        });
  }

  void decodeRows(Value m, Value n0) {
    Value zero = arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(0));
    SmallVector<Value> sums(R, zero);
    if (lin.layout.kind == WeightLayout::Dense) {
      SmallVector<Value> rows, lengths;
      rowExtents(n0, rows, lengths);
      int64_t vectorK = lin.K / V * V;
      SmallVector<Value> acc(R, zeroVector());
      auto loop = scf::ForOp::create(
          b, loc, idx(0), idx(vectorK), idx(V), acc,
          [&](OpBuilder &, Location, Value k, ValueRange carried) {
            Value xv = vector::LoadOp::create(b, loc, vecType, x, ValueRange{m, k});
            SmallVector<Value> next;
            for (auto [r, n] : llvm::enumerate(rows)) {
              Value wv = vector::LoadOp::create(b, loc, vecType, values,
                                                ValueRange{n, k});
              next.push_back(vector::FMAOp::create(b, loc, wv, xv, carried[r]));
            }
            scf::YieldOp::create(b, loc, next);
          });
      for (int64_t r = 0; r < R; ++r)
        sums[r] = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                              loop.getResult(r));
      // The last K mod V columns, scalar.
      for (int64_t k = vectorK; k < lin.K; ++k) {
        Value xk = load(x, {m, idx(k)});
        for (auto [r, n] : llvm::enumerate(rows))
          sums[r] = math::FmaOp::create(b, loc, load(values, {n, idx(k)}), xk,
                                        sums[r]);
      }
    } else if (gathersDecode()) {
      decodeGathered(m, n0, sums);
    } else {
      sparseRows(n0, 1, sums, [&](Value kBase, Value p, MutableArrayRef<Value> a) {
        Value k = add(kBase, toIndex(load(coordinates, {p})));
        a[0] = math::FmaOp::create(b, loc, load(values, {p}), load(x, {m, k}), a[0]);
      });
    }
    for (int64_t r = 0; r < R; ++r) {
      Value n = add(n0, idx(r));
      Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, n,
                                           idx(lin.N));
      scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
        memref::StoreOp::create(b, loc, sums[r], y, ValueRange{m, n});
        scf::YieldOp::create(b, loc);
      });
    }
  }

  /// Whether V consecutive stored entries of a row can be read as vectors:
  /// CSR, or n:m with whole groups per vector (their k offsets are then a
  /// constant pattern).
  bool gathersDecode() const {
    return lin.layout.kind == WeightLayout::CSR ||
           (lin.layout.kind == WeightLayout::NOutOfM && V % lin.layout.n == 0);
  }

  /// Sparse rows of a decode, V stored entries at a time: their values and
  /// coordinates are contiguous vector loads and x[m, k] a vector.gather, so
  /// a row costs a gather and an FMA per V entries instead of V scalar
  /// chains. Lockstep over the vectors all R rows have (R independent
  /// accumulators), then each row's own vectors, then its last (< V)
  /// entries scalar.
  void decodeGathered(Value m, Value n0, SmallVectorImpl<Value> &sums) {
    bool nm = lin.layout.kind == WeightLayout::NOutOfM;
    SmallVector<Value> starts, lengths;
    rowExtents(n0, starts, lengths);
    if (nm) // in groups: count entries
      for (Value &length : lengths)
        length = mul(length, idx(lin.layout.n));
    auto vectorPart = [&](Value length) {
      return arith::SubIOp::create(
          b, loc, length, arith::RemUIOp::create(b, loc, length, idx(V)));
    };
    Value common = lengths[0];
    for (Value length : ArrayRef<Value>(lengths).drop_front())
      common = arith::MinUIOp::create(b, loc, common, length);
    Value commonVectors = vectorPart(common);
    SmallVector<Value> acc(R, zeroVector());
    auto vectorLoop = [&](Value lo, Value hi, ArrayRef<int64_t> rows) {
      SmallVector<Value> init;
      for (int64_t r : rows)
        init.push_back(acc[r]);
      auto loop = scf::ForOp::create(
          b, loc, lo, hi, idx(V), init,
          [&](OpBuilder &, Location, Value j, ValueRange carried) {
            SmallVector<Value> next;
            for (auto [i, r] : llvm::enumerate(rows))
              next.push_back(gatheredFma(m, starts[r], j, carried[i]));
            scf::YieldOp::create(b, loc, next);
          });
      for (auto [i, r] : llvm::enumerate(rows))
        acc[r] = loop.getResult(i);
    };
    SmallVector<int64_t> allRows = llvm::to_vector(llvm::seq<int64_t>(0, R));
    vectorLoop(idx(0), commonVectors, allRows);
    for (int64_t r = 0; r < R; ++r) {
      Value ownVectors = vectorPart(lengths[r]);
      if (!nm) // n:m rows are all as long: nothing past the lockstep
        vectorLoop(commonVectors, ownVectors, {r});
      auto tail = scf::ForOp::create(
          b, loc, nm ? commonVectors : ownVectors, lengths[r], idx(1),
          ValueRange{sums[r]},
          [&](OpBuilder &, Location, Value j, ValueRange carried) {
            Value p = add(starts[r], j);
            Value k = toIndex(load(coordinates, {p}));
            if (nm)
              k = add(k, mul(arith::DivUIOp::create(b, loc, j, idx(lin.layout.n)),
                             idx(lin.layout.m)));
            scf::YieldOp::create(
                b, loc,
                ValueRange{math::FmaOp::create(b, loc, load(values, {p}),
                                               load(x, {m, k}), carried[0])});
          });
      sums[r] = arith::AddFOp::create(
          b, loc, tail.getResult(0),
          vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc[r]));
    }
  }

  /// acc + values[start + j : +V] * x[m, k(start + j : +V)] (gathered).
  Value gatheredFma(Value m, Value start, Value j, Value acc) {
    Value p = add(start, j);
    auto crdType = cast<MemRefType>(coordinates.getType()).getElementType();
    auto i32Vec = VectorType::get({V}, b.getI32Type());
    Value k = vector::LoadOp::create(b, loc, VectorType::get({V}, crdType),
                                     coordinates, ValueRange{p});
    // GEP sign-extends its indices: widen narrow coordinates as unsigned
    // (crdWidth = 0 stores them as index, which is wide already).
    if (crdType.isInteger() && crdType.getIntOrFloatBitWidth() < 32)
      k = arith::ExtUIOp::create(b, loc, i32Vec, k);
    if (lin.layout.kind == WeightLayout::NOutOfM) {
      // Entry j + i sits in group (j + i) / n, i.e. at k = crd + that * m;
      // V is a multiple of n, so (j + i) / n = j / n + i / n.
      int64_t n = lin.layout.n, mm = lin.layout.m;
      SmallVector<int32_t> pattern;
      for (int64_t i = 0; i < V; ++i)
        pattern.push_back(static_cast<int32_t>(i / n * mm));
      Value groupBase = arith::IndexCastUIOp::create(
          b, loc, b.getI32Type(),
          mul(arith::DivUIOp::create(b, loc, j, idx(n)), idx(mm)));
      Value offsets = arith::AddIOp::create(
          b, loc, vector::BroadcastOp::create(b, loc, i32Vec, groupBase),
          arith::ConstantOp::create(b, loc, i32Vec,
                                    DenseElementsAttr::get(i32Vec, ArrayRef(pattern))));
      k = arith::AddIOp::create(b, loc, k, offsets);
    }
    Value all = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(VectorType::get({V}, b.getI1Type()), true));
    Value xs = vector::GatherOp::create(b, loc, vecType, x, ValueRange{m, idx(0)},
                                        k, all, zeroVector());
    Value w = vector::LoadOp::create(b, loc, vecType, values, ValueRange{p});
    return vector::FMAOp::create(b, loc, w, xs, acc);
  }

  /// stage[u*V + i, column .. column + R] = (acc[0][u][i], ...,
  /// acc[R-1][u][i]): the tile transposed into the stage (flushStage copies
  /// it to y, masking what sticks out past M or N there).
  void store(ArrayRef<Value> acc, Value column) {
    auto rowType = VectorType::get({R}, f32);
    int64_t W = stageWidth();
    for (int64_t u = 0; u < U; ++u) {
      // 4 rows x V tokens (V a multiple of 4): two shuffle stages within
      // each 128-bit lane give each token's 4 values as a quarter of a
      // vector (tokens i, i + 4, i + 8, ... share one). R = 4g rows: g
      // groups of 4, each token's row written in g 4-wide pieces.
      bool shuffled = R % 4 == 0 && V % 4 == 0;
      SmallVector<SmallVector<Value>> quads; // [group][i % 4]
      if (shuffled) {
        auto shuffle = [&](Value l, Value r, int64_t a, int64_t c) -> Value {
          // Per 128-bit lane q: {l[a], r[a], l[a+1], r[a+1]} (unpack, c = 0)
          // or {l[a], l[a+1], r[a], r[a+1]} (pairs of pairs, c = 1).
          SmallVector<int64_t> mask;
          for (int64_t q = 0; q < V; q += 4) {
            if (c == 0)
              mask.append({q + a, V + q + a, q + a + 1, V + q + a + 1});
            else
              mask.append({q + a, q + a + 1, V + q + a, V + q + a + 1});
          }
          return vector::ShuffleOp::create(b, loc, l, r, mask);
        };
        for (int64_t g = 0; g < R / 4; ++g) {
          auto rowAcc = [&](int64_t r) { return acc[(4 * g + r) * U + u]; };
          Value ab0 = shuffle(rowAcc(0), rowAcc(1), 0, 0);
          Value ab1 = shuffle(rowAcc(0), rowAcc(1), 2, 0);
          Value cd0 = shuffle(rowAcc(2), rowAcc(3), 0, 0);
          Value cd1 = shuffle(rowAcc(2), rowAcc(3), 2, 0);
          quads.push_back({shuffle(ab0, cd0, 0, 1), shuffle(ab0, cd0, 2, 1),
                           shuffle(ab1, cd1, 0, 1), shuffle(ab1, cd1, 2, 1)});
        }
      }
      for (int64_t i = 0; i < V; ++i) {
        Value rowStart = add(stageBase, add(idx((u * V + i) * W), column));
        if (shuffled) {
          for (int64_t g = 0; g < R / 4; ++g) {
            Value piece = vector::ExtractStridedSliceOp::create(
                b, loc, quads[g][i % 4], ArrayRef<int64_t>{i / 4 * 4},
                ArrayRef<int64_t>{4}, ArrayRef<int64_t>{1});
            vector::StoreOp::create(b, loc, piece, stages,
                                    ValueRange{add(rowStart, idx(4 * g))});
          }
          continue;
        }
        SmallVector<Value> lanes;
        for (int64_t r = 0; r < R; ++r)
          lanes.push_back(vector::ExtractOp::create(b, loc, acc[r * U + u], i));
        vector::StoreOp::create(b, loc,
                                vector::FromElementsOp::create(b, loc, rowType, lanes),
                                stages, ValueRange{rowStart});
      }
    }
  }

  OpBuilder &b;
  Location loc;
  const SparseLinear &lin;
  int64_t R, V, U, MB;
  int64_t sliceGroups, slices; // n:m k-slices (1 slice: CSR, dense, small K)
  Type f32;
  VectorType vecType;
  Value x, y, positions, coordinates, values;
  // A CSR weight interleaved by row blocks (interleaveRows), else null.
  Value blockStarts, packedEntries;
  // The output stages (one per parallel iteration) and this iteration's.
  Value stages, stageBase;
  bool stagesMayBePartial = true;
};

/// y[b] = A[b] * B[b] with static dense f32 operands, default maps and a
/// zero init.
static bool isPlainBatchMatmul(linalg::BatchMatmulOp op) {
  auto isStaticDenseF32 = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && type.getElementType().isF32() &&
           !getSparseTensorEncoding(type);
  };
  auto nonEmpty = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements() > 0;
  };
  return !op.hasUserDefinedMaps() && op.hasPureTensorSemantics() &&
         isZeroFill(op.getDpsInits()[0]) &&
         llvm::all_of(op->getOperands(), isStaticDenseF32) &&
         llvm::all_of(op->getOperands(), nonEmpty);
}

/// Emits y[b, m, n] = sum_k A[b, m, k] * B[b, k, n] as register tiles of
/// R rows of y x U vectors of V lanes along n: per k, U contiguous loads of
/// B's row k and R broadcasts of A feed R * U independent FMA chains; the
/// tile is stored as R rows of U vectors. Threads split (batch, row block).
class BatchMatmulBuilder {
public:
  BatchMatmulBuilder(OpBuilder &b, Location loc, linalg::BatchMatmulOp op,
                     int64_t rows, int64_t vectors, int64_t lanes)
      : b(b), loc(loc), op(op), R(rows), U(vectors), V(lanes),
        f32(b.getF32Type()), vecType(VectorType::get({V}, f32)) {
    auto yType = cast<RankedTensorType>(op.getResult(0).getType());
    batches = yType.getDimSize(0);
    M = yType.getDimSize(1);
    N = yType.getDimSize(2);
    K = cast<RankedTensorType>(op.getDpsInputs()[0].getType()).getDimSize(2);
  }

  Value build() {
    Value lhs = op.getDpsInputs()[0], rhs = op.getDpsInputs()[1];
    a = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get({batches, M, K}, f32), lhs, /*read_only=*/true);
    w = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get({batches, K, N}, f32), rhs, /*read_only=*/true);
    auto yType = MemRefType::get({batches, M, N}, f32);
    y = memref::AllocOp::create(b, loc, yType, b.getI64IntegerAttr(64));
    int64_t mBlocks = llvm::divideCeil(M, R);
    std::string name =
        llvm::formatv("batch_matmul_{0}x{1}x{2}x{3}", batches, M, K, N).str();
    emitKernelRegion(b, loc, name, [&] {
      scf::ParallelOp::create(
          b, loc, ValueRange{idx(0), idx(0)},
          ValueRange{idx(batches), idx(mBlocks)}, ValueRange{idx(1), idx(1)},
          [&](OpBuilder &, Location, ValueRange ivs) {
            Value m0 = arith::MulIOp::create(b, loc, ivs[1], idx(R));
            scf::ForOp::create(b, loc, idx(0), idx(N), idx(U * V), ValueRange{},
                               [&](OpBuilder &, Location, Value n0, ValueRange) {
                                 tile(ivs[0], m0, n0);
                                 scf::YieldOp::create(b, loc);
                               });
          });
    });
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(yType.getShape(), f32), y,
        /*restrict=*/true, /*writable=*/true);
  }

private:
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value l, Value r) { return arith::AddIOp::create(b, loc, l, r); }

  /// Lanes of the vector at column n that lie inside y (null: all of them,
  /// N is a multiple of the tile width).
  Value laneMask(Value n) {
    if (N % (U * V) == 0)
      return {};
    Value left = arith::SubIOp::create(b, loc, idx(N), n);
    return vector::CreateMaskOp::create(
        b, loc, VectorType::get({V}, b.getI1Type()), ValueRange{left});
  }

  /// B[batch, k, n : n + V], zero in the lanes `mask` leaves out.
  Value loadRow(Value batch, Value k, Value n, Value mask, Value zero) {
    SmallVector<Value, 3> at{batch, k, n};
    if (mask)
      return vector::MaskedLoadOp::create(b, loc, vecType, w, at, mask, zero);
    return vector::LoadOp::create(b, loc, vecType, w, at);
  }

  /// The R x (U * V) tile of y[batch] at (m0, n0).
  void tile(Value batch, Value m0, Value n0) {
    SmallVector<Value> columns, masks;
    for (int64_t u = 0; u < U; ++u) {
      columns.push_back(add(n0, idx(u * V)));
      masks.push_back(laneMask(columns.back()));
    }
    // Rows past M repeat row M - 1; their stores are skipped.
    SmallVector<Value> rowsOfA;
    for (int64_t r = 0; r < R; ++r)
      rowsOfA.push_back(
          arith::MinUIOp::create(b, loc, add(m0, idx(r)), idx(M - 1)));
    Value zero = arith::ConstantOp::create(b, loc, vecType,
                                           DenseElementsAttr::get(vecType, 0.0f));
    SmallVector<Value> init(R * U, zero);
    auto loop = scf::ForOp::create(
        b, loc, idx(0), idx(K), idx(1), init,
        [&](OpBuilder &, Location, Value k, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          SmallVector<Value> wv;
          for (int64_t u = 0; u < U; ++u)
            wv.push_back(loadRow(batch, k, columns[u], masks[u], zero));
          for (int64_t r = 0; r < R; ++r) {
            Value av = memref::LoadOp::create(b, loc, a,
                                              ValueRange{batch, rowsOfA[r], k});
            av = vector::BroadcastOp::create(b, loc, vecType, av);
            for (int64_t u = 0; u < U; ++u)
              next[r * U + u] =
                  vector::FMAOp::create(b, loc, av, wv[u], next[r * U + u]);
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t r = 0; r < R; ++r) {
      Value m = add(m0, idx(r));
      Value inside =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, m, idx(M));
      scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
        for (int64_t u = 0; u < U; ++u) {
          Value acc = loop.getResult(r * U + u);
          SmallVector<Value, 3> at{batch, m, columns[u]};
          if (masks[u])
            vector::MaskedStoreOp::create(b, loc, y, at, masks[u], acc);
          else
            vector::StoreOp::create(b, loc, acc, y, at);
        }
        scf::YieldOp::create(b, loc);
      });
    }
  }

  OpBuilder &b;
  Location loc;
  linalg::BatchMatmulOp op;
  int64_t R, U, V;
  int64_t batches = 0, M = 0, N = 0, K = 0;
  Type f32;
  VectorType vecType;
  Value a, w, y;
};

struct LowerSparseLinearPass
    : public smlir::impl::LowerSparseLinearBase<LowerSparseLinearPass> {
  using LowerSparseLinearBase::LowerSparseLinearBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
        "smlir-lower-sparse-linear", options,
        {"rows", "vectors", "nm-rows", "nm-vectors", "dense-rows",
        "dense-vectors", "lanes"},
        errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  /// A tile option, or (0) the default measured for `lanes`: 8 (AVX2,
  /// 16 registers) on a Zen 3, 16 (AVX-512, 32 registers) on a Zen 4.
  int64_t tile(int64_t option, int64_t avx2, int64_t avx512) const {
    return option > 0 ? option : lanes >= 16 ? avx512 : avx2;
  }

  void runOnOperation() override {
    // Tiles are register tiles: beyond 16 rows or vectors they would not fit
    // any register file (and huge values overflowed the slab arithmetic).
    auto tileOk = [](int64_t v) { return v >= 0 && v <= 16; };
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        !tileOk(rows) ||
        !tileOk(vectors) || !tileOk(nmRows) || !tileOk(nmVectors) ||
        !tileOk(denseRows) || !tileOk(denseVectors)) {
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
      // Each layout has the tile measured best for it (decode: `rows`).
      int64_t tileRows = rows, tileVectors = vectors;
      if (linear.layout.sharedRows > 1 && linear.M >= kDecodeTokens) {
        // A tile inside one row group (R divides the group), as many token
        // vectors as registers allow (R * U accumulators, U slab vectors
        // and a broadcast in 16 registers): the most FMAs per stored k,
        // then the fewest loads (4 x 3 for groups of 4 or 8: 12 FMAs per
        // 8 loads).
        int64_t bestFmas = 0, bestLoads = 0;
        for (int64_t r = 1; r <= std::min<int64_t>(8, linear.layout.sharedRows); ++r) {
          if (linear.layout.sharedRows % r)
            continue;
          int64_t u = std::clamp<int64_t>(registers / (r + 1), 1, nmVectors);
          int64_t fmas = r * u, loads = 1 + u + r;
          if (fmas > bestFmas || (fmas == bestFmas && loads < bestLoads)) {
            tileRows = r;
            tileVectors = u;
            bestFmas = fmas;
            bestLoads = loads;
          }
        }
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
      Value y = MicrokernelBuilder(b, linear.op.getLoc(), linear, tileRows,
                                   tileVectors, kernelLanes)
                    .build();
      Value oldY = linear.op.getResult();
      if (oldY.getType() != y.getType())
        y = tensor::CastOp::create(b, linear.op.getLoc(), oldY.getType(), y);
      oldY.replaceAllUsesWith(y);
      eraseDeadChain(linear.op);
    }
    if (!batched)
      return;
    SmallVector<linalg::BatchMatmulOp> batchMatmuls;
    getOperation().walk([&](linalg::BatchMatmulOp op) {
      if (isPlainBatchMatmul(op))
        batchMatmuls.push_back(op);
    });
    for (linalg::BatchMatmulOp op : batchMatmuls) {
      OpBuilder b(op);
      Value y = BatchMatmulBuilder(b, op.getLoc(), op, rows, vectors, lanes)
                    .build();
      op.getResult(0).replaceAllUsesWith(y);
      eraseDeadChain(op);
    }
  }

  /// `root` and the producers only it used (transposes, kernel, fill).
  static void eraseDeadChain(Operation *root) {
    SmallVector<Operation *> worklist = {root};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      llvm::SmallPtrSet<Operation *, 4> producers;
      for (Value operand : op->getOperands())
        if (Operation *producer = operand.getDefiningOp())
          producers.insert(producer);
      op->erase();
      for (Operation *producer : producers)
        if (producer->use_empty() && isMemoryEffectFree(producer))
          worklist.push_back(producer);
    }
  }
};

} // namespace
