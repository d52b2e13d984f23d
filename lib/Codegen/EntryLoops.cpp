//===- EntryLoops.cpp - loops over a row block's entries --------------------===//
//
// The inner loops of a token-block tile: over the entries a block's rows
// have in common (lockstep), each ragged row's rest, rows sharing one
// pattern, and dense rows.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

/// acc[u] += w * slab[k, u*V : (u+1)*V]: the token-block visitor.
void MicrokernelBuilder::accumulateEntry(Value slab, Value kBase, Value p,
                     MutableArrayRef<Value> acc) {
  Value k = add(kBase, toIndex(load(coordinates, {p})));
  Value w = vector::BroadcastOp::create(b, loc, vecType,
                                        widen(load(values, {p})));
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
void MicrokernelBuilder::entryLoop(Value lo, Value hi, ArrayRef<Value> starts, int64_t perRow,
               SmallVectorImpl<Value> &acc, EntryVisitor visit) {
  auto loop = scf::ForOp::create(
      b, loc, lo, hi, idx(1), acc,
      [&](OpBuilder &, Location, Value j, ValueRange carried) {
        SmallVector<Value> next(carried.begin(), carried.end());
        // Group j (n:m: k = j*m .. j*m + m - 1, the row's entries j*n ..
        // j*n + n - 1; CSR: entry j alone).
        Value kBase = access->groupK(*this, j);
        Value first = access->groupEntry(*this, j);
        for (int64_t e = 0; e < access->entriesPerGroup(); ++e)
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
void MicrokernelBuilder::sharedEntryLoop(Value lo, Value hi, ArrayRef<Value> starts,
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
                              return widen(load(values, {add(starts[r], entry)}));
                            });
        }
        scf::YieldOp::create(b, loc, next);
      });
  acc.assign(loop.getResults().begin(), loop.getResults().end());
}

/// acc[r][u] += broadcast(weight(r)) * slab[row + u*V : +V] for the R
/// rows of a tile that share one k: the U slab vectors are loaded once
/// (dense weights, n:m rows sharing a pattern).
void MicrokernelBuilder::accumulateSlabRow(Value slab, Value row, MutableArrayRef<Value> acc,
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
void MicrokernelBuilder::sparseRows(Value n0, int64_t perRow, SmallVectorImpl<Value> &acc,
                EntryVisitor visit) {
  SmallVector<Value> starts, lengths;
  rowExtents(n0, starts, lengths);
  Value common = lengths[0];
  for (Value length : ArrayRef<Value>(lengths).drop_front())
    common = arith::MinUIOp::create(b, loc, common, length);
  entryLoop(idx(0), common, starts, perRow, acc, visit);
  if (!access->raggedRows())
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
void MicrokernelBuilder::rowExtents(Value n0, SmallVectorImpl<Value> &starts,
                SmallVectorImpl<Value> &lengths) {
  for (int64_t r = 0; r < R; ++r) {
    // Unclamped where R divides N: the rows' starts are then one base plus
    // constants, one register for all R rows.
    Value nClamped =
        lin.N % R == 0
            ? add(n0, idx(r))
            : arith::MinUIOp::create(b, loc, add(n0, idx(r)), idx(lin.N - 1));
    Value start, length;
    access->rowExtent(*this, nClamped, start, length);
    starts.push_back(start);
    lengths.push_back(length);
  }
}

/// Dense W: every k, one slab row shared by the R rows (R * U FMAs per
/// U loads, as in a dense GEMM micro-kernel).
void MicrokernelBuilder::denseLoop(Value slab, ArrayRef<Value> rows,
               SmallVectorImpl<Value> &acc) {
  auto loop = scf::ForOp::create(
      b, loc, idx(0), idx(lin.K), idx(1), acc,
      [&](OpBuilder &, Location, Value k, ValueRange carried) {
        SmallVector<Value> next(carried.begin(), carried.end());
        accumulateSlabRow(slab, mul(k, idx(MB)), next,
                          [&](int64_t r) { return widen(load(values, {rows[r], k})); });
        scf::YieldOp::create(b, loc, next);
      });
  acc.assign(loop.getResults().begin(), loop.getResults().end());
}
