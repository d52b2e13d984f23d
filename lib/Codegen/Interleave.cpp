//===- Interleave.cpp - weights re-laid out per call ------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

/// A CSR weight read by many token blocks, re-laid out once per call:
/// the R rows of row block nb interleaved entry by entry and padded with
/// zero values to the block's longest row, entry p of row r at
/// (blockStarts[nb] + p) * R + r, as one i64: its slab offset k * MB
/// above its value's bits. The token loop then walks one index per
/// block: no per-row pointers, tails or coordinate scaling, and one load
/// per entry besides the slab's (the load ports are what bounds it: a
/// separate offset and value load cost ~25% at 90% sparsity), at the
/// price of the padding (~10% more FMAs at 90% sparsity).
void MicrokernelBuilder::interleaveRows() {
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
                    b, loc, ValueRange{packEntry(mul(k, idx(MB)), widen(load(values, {at})))});
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
void MicrokernelBuilder::interleaveGroups() {
  int64_t groups = lin.K / lin.layout.m, n = lin.layout.n;
  interleaveBlocks(groups * n, [&](Value j, Value start) {
    // Entry j of a row: group j / n, at k = (j / n) * m + crd.
    Value kBase = mul(arith::DivUIOp::create(b, loc, j, idx(n)),
                      idx(lin.layout.m));
    Value at = add(start, j);
    Value k = add(kBase, toIndex(load(coordinates, {at})));
    return packEntry(mul(k, idx(MB)), widen(load(values, {at})));
  });
}

/// packedEntries: per row block nb, `perRow` entries of each of its R rows,
/// entry j of row r at (nb * perRow + j) * R + r, `entry(j, the row's first
/// stored position)` each; rows past N are zero.
void MicrokernelBuilder::interleaveBlocks(
    int64_t perRow, llvm::function_ref<Value(Value j, Value start)> entry) {
  int64_t nBlocks = llvm::divideCeil(lin.N, R);
  packedEntries = memref::AllocOp::create(
      b, loc, MemRefType::get({nBlocks * perRow * R}, b.getI64Type()),
      b.getI64IntegerAttr(64));
  scf::ParallelOp::create(
      b, loc, ValueRange{idx(0)}, ValueRange{idx(nBlocks)}, ValueRange{idx(1)},
      [&](OpBuilder &, Location, ValueRange ivs) {
        Value nb = ivs[0];
        SmallVector<Value> starts, lengths;
        rowExtents(mul(nb, idx(R)), starts, lengths);
        Value base = mul(nb, idx(perRow * R));
        scf::ForOp::create(
            b, loc, idx(0), idx(perRow), idx(1), ValueRange{},
            [&](OpBuilder &, Location, Value j, ValueRange) {
              for (int64_t r = 0; r < R; ++r)
                storeBlockEntry(entry(j, starts[r]), nb, r,
                                add(base, add(mul(j, idx(R)), idx(r))));
              scf::YieldOp::create(b, loc);
            });
      });
}

/// Stores `entry`, row r of row block nb's, at packedEntries[at]; a row
/// past N (the last block's padding) stores 0: a zero at offset 0.
void MicrokernelBuilder::storeBlockEntry(Value entry, Value nb, int64_t r,
                                         Value at) {
  if (lin.N % R)
    entry = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                              add(mul(nb, idx(R)), idx(r)), idx(lin.N)),
        entry, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  memref::StoreOp::create(b, loc, entry, packedEntries, ValueRange{at});
}

/// An interleaved entry: slab offset (index, < 2^31) << 32 | value bits.
Value MicrokernelBuilder::packEntry(Value offset, Value value) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value high = arith::ExtUIOp::create(
      b, loc, i64, arith::IndexCastUIOp::create(b, loc, i32, offset));
  // (An i32 value is already its bits: a bf16 pair, BF16Pairs.cpp.)
  if (!value.getType().isInteger(32))
    value = arith::BitcastOp::create(b, loc, i32, value);
  Value low = arith::ExtUIOp::create(b, loc, i64, value);
  return arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(
          b, loc, high, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32))),
      low);
}

/// Row block nb of an interleaved CSR weight (interleaveRows): all R rows
/// in lockstep to the block's longest row.
void MicrokernelBuilder::interleavedRows(Value nb, Value slab,
                     SmallVectorImpl<Value> &acc) {
  Value lo = mul(load(blockStarts, {nb}), idx(R));
  Value hi = mul(load(blockStarts, {add(nb, idx(1))}), idx(R));
  interleavedEntries(lo, hi, slab, acc);
}

/// Interleaved entries [lo, hi) (a multiple of R apart): R at a time, one
/// per row, each one i64 load, a broadcast and U FMAs on the token
/// block's slab `slab`.
void MicrokernelBuilder::interleavedEntries(Value lo, Value hi, Value slab,
                        SmallVectorImpl<Value> &acc) {
  packedEntryLoop(lo, hi, acc,
                  [&](Value bits, Value row, MutableArrayRef<Value> a) {
                    Value w = vector::BroadcastOp::create(
                        b, loc, vecType,
                        arith::BitcastOp::create(b, loc, f32, bits));
                    for (int64_t u = 0; u < U; ++u) {
                      Value xv = vector::LoadOp::create(
                          b, loc, vecType, slab,
                          ValueRange{add(row, idx(u * V))});
                      a[u] = vector::FMAOp::create(b, loc, w, xv, a[u]);
                    }
                  });
}

/// The loop over packed entries [lo, hi) (a multiple of R apart), R at a
/// time, one per row: each i64 split into its low half (the stored bits, a
/// broadcast from a GPR) and its high half (the slab offset: one shift, no
/// masking), handed to `entry` with that row's U accumulators.
void MicrokernelBuilder::packedEntryLoop(
    Value lo, Value hi, SmallVectorImpl<Value> &acc,
    llvm::function_ref<void(Value bits, Value offset,
                            MutableArrayRef<Value> acc)>
        entry) {
  auto loop = scf::ForOp::create(
      b, loc, lo, hi, idx(R), acc,
      [&](OpBuilder &, Location, Value q, ValueRange carried) {
        SmallVector<Value> next(carried.begin(), carried.end());
        for (int64_t r = 0; r < R; ++r) {
          Value packed = load(packedEntries, {add(q, idx(r))});
          Value bits = arith::TruncIOp::create(b, loc, b.getI32Type(), packed);
          Value offset = arith::IndexCastUIOp::create(
              b, loc, b.getIndexType(),
              arith::ShRUIOp::create(
                  b, loc, packed,
                  arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32))));
          entry(bits, offset, MutableArrayRef<Value>(next).slice(r * U, U));
        }
        scf::YieldOp::create(b, loc, next);
      });
  acc.assign(loop.getResults().begin(), loop.getResults().end());
}
