//===- BF16Pairs.cpp - bf16 2:4 token blocks with vdpbf16ps ---------------===//
//
// AVX-512 BF16's vdpbf16ps adds to each f32 lane the dot product of two
// bf16 pairs: pairs along the reduction (k). A 2:4 row stores two entries
// per group of 4 columns, one of the group's 6 column pairs (a < b), so
// each token block packs, after its f32 slab, a pair slab: for group g and
// pair p = (a, b), MB 32-bit words (x[t, 4g + a], x[t, 4g + b]) in bf16,
// at slabSize's K * MB + (6g + p) * MB. A row's group is then one 32-bit
// broadcast of its two values and U dot products on the pair's slab
// vectors: 32 useful MACs per instruction, against 16 per f32 FMA.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

/// The column pairs (a < b) of a group of 4, in pair-slab order.
static constexpr int64_t kPairs[6][2] = {{0, 1}, {0, 2}, {0, 3},
                                         {1, 2}, {1, 3}, {2, 3}};

bool mlir::smlir::codegen::takesBF16Pairs(const SparseLinear &linear,
                                          int64_t lanes) {
  const WeightLayout &layout = linear.layout;
  return lanes == 16 && linear.M >= kDecodeTokens &&
         layout.kind == WeightLayout::NOutOfM && layout.n == 2 &&
         layout.m == 4 &&
         cast<ShapedType>(linear.x.getType()).getElementType().isBF16();
}

int64_t MicrokernelBuilder::slabSize() const {
  int64_t size = lin.K * MB;
  if (bf16Pairs)
    size += lin.K / 4 * 6 * MB;
  return size;
}

/// Block mb's pair slab from its f32 slab (packed just before; x's bf16
/// values are exact in f32, so a value's bf16 bits are its f32 bits' high
/// half): per group, the 4 columns' token vectors are loaded once and
/// combined into the 6 pairs' words, low half column a, high half b.
void MicrokernelBuilder::packPairs(Value slabs, Value mb) {
  Value base = mul(mb, idx(slabSize()));
  auto i32Vec = VectorType::get({V}, b.getI32Type());
  auto splat = [&](int64_t v) {
    return arith::ConstantOp::create(
        b, loc, i32Vec,
        DenseElementsAttr::get(i32Vec, static_cast<int32_t>(v)));
  };
  Value high = splat(static_cast<int32_t>(0xFFFF0000u)), sixteen = splat(16);
  scf::ForOp::create(
      b, loc, idx(0), idx(lin.K / 4), idx(1), ValueRange{},
      [&](OpBuilder &, Location, Value g, ValueRange) {
        Value columns = add(base, mul(g, idx(4 * MB)));
        Value pairs = add(base, add(idx(lin.K * MB), mul(g, idx(6 * MB))));
        for (int64_t u = 0; u < U; ++u) {
          Value bits[4];
          for (int64_t c = 0; c < 4; ++c)
            bits[c] = arith::BitcastOp::create(
                b, loc, i32Vec,
                vector::LoadOp::create(
                    b, loc, vecType, slabs,
                    ValueRange{add(columns, idx(c * MB + u * V))}));
          for (int64_t p = 0; p < 6; ++p) {
            Value hi = arith::AndIOp::create(b, loc, bits[kPairs[p][1]], high);
            Value lo = arith::ShRUIOp::create(b, loc, bits[kPairs[p][0]], sixteen);
            Value word = arith::OrIOp::create(b, loc, hi, lo);
            vector::StoreOp::create(
                b, loc, arith::BitcastOp::create(b, loc, vecType, word), slabs,
                ValueRange{add(pairs, idx(p * MB + u * V))});
          }
        }
        scf::YieldOp::create(b, loc);
      });
}

/// Where group `group`'s pair (c0, c1) (ascending in-group coordinates)
/// starts in a token block's slab: p = c0 + c1 - 1 + min(c0, 1) is its
/// index in kPairs. Clamped to [0, 6): malformed coordinates read a wrong
/// pair, never outside the slab.
Value MicrokernelBuilder::pairOffset(Value group, Value c0, Value c1) {
  Value p = add(add(c0, c1), arith::MinUIOp::create(b, loc, c0, idx(1)));
  p = arith::MinUIOp::create(b, loc, arith::MaxUIOp::create(b, loc, p, idx(1)),
                             idx(6));
  Value pair = add(mul(group, idx(6)), arith::SubIOp::create(b, loc, p, idx(1)));
  return add(idx(lin.K * MB), mul(pair, idx(MB)));
}

/// Stored entries p and p + 1 (one row's group, adjacent in the values) as
/// one 32-bit bf16 pair, entry p in the low half: one 32-bit load.
Value MicrokernelBuilder::pairWord(Value p) {
  Value pair = vector::LoadOp::create(
      b, loc, VectorType::get({2}, b.getBF16Type()), values, ValueRange{p});
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
}

/// The entry-loop visitor (not interleaved): group kBase / 4 of the row
/// whose entries there are p and p + 1.
void MicrokernelBuilder::accumulatePair(Value slab, Value kBase, Value p,
                                        MutableArrayRef<Value> acc) {
  Value c0 = toIndex(load(coordinates, {p}));
  Value c1 = toIndex(load(coordinates, {add(p, idx(1))}));
  Value group = arith::DivUIOp::create(b, loc, kBase, idx(4));
  dotPairs(slab, pairOffset(group, c0, c1), pairWord(p), acc);
}

/// `word` (a bf16 pair) in every token's lane.
Value MicrokernelBuilder::broadcastPair(Value word) {
  auto i32Vec = VectorType::get({V}, b.getI32Type());
  return vector::BitCastOp::create(
      b, loc, VectorType::get({2 * V}, b.getBF16Type()),
      vector::BroadcastOp::create(b, loc, i32Vec, word));
}

/// Token vector u of the pair slab row at `offset`, as bf16 pairs.
Value MicrokernelBuilder::slabPairs(Value slab, Value offset, int64_t u) {
  Value xv = vector::LoadOp::create(b, loc, vecType, slab,
                                    ValueRange{add(offset, idx(u * V))});
  return vector::BitCastOp::create(
      b, loc, VectorType::get({2 * V}, b.getBF16Type()), xv);
}

/// acc[u] = dot_bf16_pairs(acc[u], slab pairs at offset + u * V, word).
void MicrokernelBuilder::dotPairs(Value slab, Value offset, Value word,
                                  MutableArrayRef<Value> acc) {
  Value w = broadcastPair(word);
  for (int64_t u = 0; u < U; ++u)
    acc[u] = DotBF16PairsOp::create(b, loc, vecType, acc[u],
                                    slabPairs(slab, offset, u), w);
}

/// Rows sharing one pattern (a tile inside one row group), groups
/// [lo, hi) of the R rows at `starts`: a group's pair is read from the
/// first row and its U slab vectors loaded once for all R rows (R * U dot
/// products per U loads and R 32-bit broadcasts).
void MicrokernelBuilder::sharedPairLoop(Value lo, Value hi,
                                        ArrayRef<Value> starts,
                                        SmallVectorImpl<Value> &acc,
                                        Value slab) {
  auto loop = scf::ForOp::create(
      b, loc, lo, hi, idx(1), acc,
      [&](OpBuilder &, Location, Value j, ValueRange carried) {
        SmallVector<Value> next(carried.begin(), carried.end());
        Value entry = mul(j, idx(2));
        Value first = add(starts[0], entry);
        Value c0 = toIndex(load(coordinates, {first}));
        Value c1 = toIndex(load(coordinates, {add(first, idx(1))}));
        Value offset = pairOffset(j, c0, c1);
        SmallVector<Value> xv;
        for (int64_t u = 0; u < U; ++u)
          xv.push_back(slabPairs(slab, offset, u));
        for (int64_t r = 0; r < R; ++r) {
          Value w = broadcastPair(pairWord(add(starts[r], entry)));
          for (int64_t u = 0; u < U; ++u)
            next[r * U + u] = DotBF16PairsOp::create(b, loc, vecType,
                                                     next[r * U + u], xv[u], w);
        }
        scf::YieldOp::create(b, loc, next);
      });
  acc.assign(loop.getResults().begin(), loop.getResults().end());
}

/// The weight re-laid out once per call (many token blocks), as
/// interleaveGroups does: group g of row r of row block nb at
/// (nb * groups + g) * R + r, one i64: its pair's slab offset above the
/// pair's bf16 bits. Rows past N are zero.
void MicrokernelBuilder::interleavePairs() {
  interleaveBlocks(lin.K / 4, [&](Value g, Value start) {
    Value at = add(start, mul(g, idx(2)));
    Value c0 = toIndex(load(coordinates, {at}));
    Value c1 = toIndex(load(coordinates, {add(at, idx(1))}));
    return packEntry(pairOffset(g, c0, c1), pairWord(at));
  });
}

/// Interleaved groups [lo, hi) (a multiple of R apart): R at a time, one
/// per row, each one i64 load, a broadcast and U dot products.
void MicrokernelBuilder::pairedEntries(Value lo, Value hi, Value slab,
                                       SmallVectorImpl<Value> &acc) {
  packedEntryLoop(lo, hi, acc,
                  [&](Value word, Value offset, MutableArrayRef<Value> a) {
                    dotPairs(slab, offset, word, a);
                  });
}
