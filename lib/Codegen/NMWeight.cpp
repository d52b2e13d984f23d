//===- NMWeight.cpp - an n:m W[N, K] in a linear kernel -------------------===//
//
// Every row stores n entries per group of m columns, coordinates in-group:
// the rows of a tile are all as long, so they run in lockstep to the end,
// group by group. The slab is read in k-slices (kSlabSliceBytes); with many
// token blocks the weight is interleaved by row block first. Rows sharing
// one pattern (#smlir.nm<..., rows = r>) read each stored k's slab vectors
// once for the tile (SharedRowsWeight). bf16 2:4 with vdpbf16ps reads a
// row's two entries of a group as one pair (Paired*Weight, BF16Pairs.cpp).
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

namespace {

class NMWeight : public WeightAccess {
public:
  using WeightAccess::WeightAccess;

  void bindBuffers(MicrokernelBuilder &kb) const override {
    kb.coordinates = ToCoordinatesOp::create(kb.b, kb.loc, lin.weight, 2);
    kb.values = ToValuesOp::create(kb.b, kb.loc, lin.weight);
  }

  std::string name(bool) const override {
    return std::to_string(lin.layout.n) + "of" + std::to_string(lin.layout.m);
  }

  double entriesPerRow() const override {
    return double(lin.K) * lin.layout.n / lin.layout.m;
  }

  /// n:m groups whose slab rows (MB f32 each) fill kSlabSliceBytes.
  int64_t groupsPerSlice(int64_t MB) const override {
    return std::max<int64_t>(1, kSlabSliceBytes / (4 * MB * slabRowsPerGroup()));
  }

  /// The slab's rows (MB words each) a group of m columns takes.
  virtual int64_t slabRowsPerGroup() const { return lin.layout.m; }
  int64_t slices(int64_t groupsPerSlice) const override {
    return llvm::divideCeil(lin.K / lin.layout.m, groupsPerSlice);
  }

  void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                 Value &length) const override {
    int64_t groups = lin.K / lin.layout.m;
    start = kb.mul(n, kb.idx(groups * lin.layout.n));
    length = kb.idx(groups);
  }

  // Group j covers k = j*m .. j*m + m - 1 and the row's entries j*n ..
  // j*n + n - 1.
  int64_t entriesPerGroup() const override { return lin.layout.n; }
  Value groupK(MicrokernelBuilder &kb, Value j) const override {
    return kb.mul(j, kb.idx(lin.layout.m));
  }
  Value groupEntry(MicrokernelBuilder &kb, Value j) const override {
    return kb.mul(j, kb.idx(lin.layout.n));
  }
  Value entryCount(MicrokernelBuilder &kb, Value length) const override {
    return kb.mul(length, kb.idx(lin.layout.n));
  }
  Value entryK(MicrokernelBuilder &kb, Value j, Value crd) const override {
    return kb.add(crd, kb.mul(arith::DivUIOp::create(kb.b, kb.loc, j,
                                                     kb.idx(lin.layout.n)),
                              kb.idx(lin.layout.m)));
  }

  Value gatherOffsets(MicrokernelBuilder &kb, Value j) const override {
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    auto i32Vec = VectorType::get({kb.V}, b.getI32Type());
    // Entry j + i sits in group (j + i) / n, i.e. at k = crd + that * m;
    // V is a multiple of n, so (j + i) / n = j / n + i / n.
    int64_t n = lin.layout.n, mm = lin.layout.m;
    SmallVector<int32_t> pattern;
    for (int64_t i = 0; i < kb.V; ++i)
      pattern.push_back(static_cast<int32_t>(i / n * mm));
    Value groupBase = arith::IndexCastUIOp::create(
        b, loc, b.getI32Type(),
        kb.mul(arith::DivUIOp::create(b, loc, j, kb.idx(n)), kb.idx(mm)));
    return arith::AddIOp::create(
        b, loc, vector::BroadcastOp::create(b, loc, i32Vec, groupBase),
        arith::ConstantOp::create(
            b, loc, i32Vec, DenseElementsAttr::get(i32Vec, ArrayRef(pattern))));
  }

  void interleave(MicrokernelBuilder &kb) const override {
    kb.interleaveGroups();
  }

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    if (kb.packedEntries) { // one k-slice
      int64_t blockEntries =
          lin.K / lin.layout.m * entriesPerGroup() * kb.R;
      Value lo = kb.mul(nb, kb.idx(blockEntries));
      interleavedRange(kb, lo, kb.add(lo, kb.idx(blockEntries)), slab, acc);
      return;
    }
    kb.sparseRows(n0, kb.U, acc,
                  [&](Value kBase, Value p, MutableArrayRef<Value> a) {
                    accumulateStored(kb, slab, kBase, p, a);
                  });
  }

  void accumulateGroups(MicrokernelBuilder &kb, Value slab, Value nb, Value g0,
                        Value g1, ArrayRef<Value> starts,
                        SmallVectorImpl<Value> &acc) const override {
    if (kb.packedEntries) {
      // Groups [g0, g1) of row block nb (interleave()'s layout).
      int64_t groups = lin.K / lin.layout.m;
      Value blockBase = kb.mul(nb, kb.idx(groups));
      int64_t groupEntries = entriesPerGroup() * kb.R;
      interleavedRange(kb, kb.mul(kb.add(blockBase, g0), kb.idx(groupEntries)),
                       kb.mul(kb.add(blockBase, g1), kb.idx(groupEntries)),
                       slab, acc);
      return;
    }
    kb.entryLoop(g0, g1, starts, kb.U, acc,
                 [&](Value kBase, Value p, MutableArrayRef<Value> a) {
                   accumulateStored(kb, slab, kBase, p, a);
                 });
  }

  /// Interleaved entries [lo, hi) of a row block, R at a time.
  virtual void interleavedRange(MicrokernelBuilder &kb, Value lo, Value hi,
                                Value slab,
                                SmallVectorImpl<Value> &acc) const {
    kb.interleavedEntries(lo, hi, slab, acc);
  }

  /// Stored entry p of a row into its accumulators.
  virtual void accumulateStored(MicrokernelBuilder &kb, Value slab,
                                Value kBase, Value p,
                                MutableArrayRef<Value> a) const {
    kb.accumulateEntry(slab, kBase, p, a);
  }

  /// V entries at a time where whole groups fill a vector (their k offsets
  /// are then a constant pattern), else R scalar chains gathering x[m, k].
  void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                  SmallVectorImpl<Value> &sums) const override {
    if (kb.V % lin.layout.n == 0) {
      kb.decodeGathered(m, n0, sums);
      return;
    }
    kb.sparseRows(n0, 1, sums, [&](Value kBase, Value p, MutableArrayRef<Value> a) {
      Value k = kb.add(kBase, kb.toIndex(kb.load(kb.coordinates, {p})));
      a[0] = math::FmaOp::create(kb.b, kb.loc, kb.load(kb.values, {p}),
                                 kb.load(kb.x, {m, k}), a[0]);
    });
  }
};

/// n:m rows sharing one pattern in groups of sharedRows: a tile inside one
/// row group; each stored k's U slab vectors are loaded once for its rows.
class SharedRowsWeight : public NMWeight {
public:
  using NMWeight::NMWeight;

  // "2of4r4": the kernel for rows sharing patterns in fours (decode reads
  // each row on its own).
  std::string name(bool decode) const override {
    std::string kind = NMWeight::name(decode);
    if (!decode)
      kind += "r" + std::to_string(lin.layout.sharedRows);
    return kind;
  }

  // Nothing to interleave: a tile's entries share their coordinates.
  void interleave(MicrokernelBuilder &) const override {}

  // A value per row and the tile's one coordinate per stored k (nothing is
  // interleaved).
  double bytesPerEntry() const override {
    return 4 + 1.0 / lin.layout.sharedRows;
  }

  /// Slab slices sized for L2, not L1: a stored k loads U slab vectors for
  /// R * U FMAs, which L2 feeds; 16 KB slices (one row block's partial sums
  /// saved and reloaded every 32 groups) ran ~10% slower on ViT-base's
  /// 788 x 3072 -> 768 (Zen 4, 1 thread).
  int64_t groupsPerSlice(int64_t MB) const override {
    return std::max<int64_t>(1, kSharedSlabSliceBytes / (4 * MB * slabRowsPerGroup()));
  }

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    SmallVector<Value> starts, lengths;
    kb.rowExtents(n0, starts, lengths);
    sharedGroups(kb, kb.idx(0), lengths[0], starts, acc, slab);
  }

  void accumulateGroups(MicrokernelBuilder &kb, Value slab, Value nb, Value g0,
                        Value g1, ArrayRef<Value> starts,
                        SmallVectorImpl<Value> &acc) const override {
    sharedGroups(kb, g0, g1, starts, acc, slab);
  }

  /// Groups [lo, hi) of the tile's shared pattern into its accumulators.
  virtual void sharedGroups(MicrokernelBuilder &kb, Value lo, Value hi,
                            ArrayRef<Value> starts, SmallVectorImpl<Value> &acc,
                            Value slab) const {
    kb.sharedEntryLoop(lo, hi, starts, acc, slab);
  }
};

/// A bf16 2:4 weight read with dot products of pairs (BF16Pairs.cpp): the
/// entry loops step over whole groups (a row's two entries there are one
/// pair), the token blocks read the pair slab.
class PairedNMWeight final : public NMWeight {
public:
  using NMWeight::NMWeight;

  // "2of4dp": dot products of pairs.
  std::string name(bool decode) const override {
    return NMWeight::name(decode) + "dp";
  }

  // One i64 per interleaved pair of entries.
  double bytesPerEntry() const override { return 4; }

  /// The pair slab's 6 rows of a group (a row reads one of them).
  int64_t slabRowsPerGroup() const override { return 6; }

  // Group j: the row's entries 2j and 2j + 1, visited once.
  int64_t entriesPerGroup() const override { return 1; }

  void interleave(MicrokernelBuilder &kb) const override {
    kb.interleavePairs();
  }

  void interleavedRange(MicrokernelBuilder &kb, Value lo, Value hi,
                        Value slab,
                        SmallVectorImpl<Value> &acc) const override {
    kb.pairedEntries(lo, hi, slab, acc);
  }

  void accumulateStored(MicrokernelBuilder &kb, Value slab, Value kBase,
                        Value p, MutableArrayRef<Value> a) const override {
    kb.accumulatePair(slab, kBase, p, a);
  }
};

/// bf16 2:4 rows sharing one pattern, with dot products of pairs: a
/// group's pair slab vectors are loaded once for the tile's rows.
class PairedSharedRowsWeight final : public SharedRowsWeight {
public:
  using SharedRowsWeight::SharedRowsWeight;

  std::string name(bool decode) const override {
    return SharedRowsWeight::name(decode) + "dp";
  }

  /// The pair slab's 6 rows of a group.
  int64_t slabRowsPerGroup() const override { return 6; }

  void sharedGroups(MicrokernelBuilder &kb, Value lo, Value hi,
                    ArrayRef<Value> starts, SmallVectorImpl<Value> &acc,
                    Value slab) const override {
    kb.sharedPairLoop(lo, hi, starts, acc, slab);
  }
};

} // namespace

std::unique_ptr<WeightAccess>
mlir::smlir::codegen::makePairedNMWeight(const SparseLinear &linear) {
  if (linear.layout.sharedRows > 1)
    return std::make_unique<PairedSharedRowsWeight>(linear);
  return std::make_unique<PairedNMWeight>(linear);
}

std::unique_ptr<WeightAccess> mlir::smlir::codegen::makeNMWeight(const SparseLinear &linear) {
  return std::make_unique<NMWeight>(linear);
}

std::unique_ptr<WeightAccess>
mlir::smlir::codegen::makeSharedRowsWeight(const SparseLinear &linear) {
  return std::make_unique<SharedRowsWeight>(linear);
}
