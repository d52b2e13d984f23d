//===- SDDMMRows.cpp - the grouped SDDMM row kernel -----------------------===//
//
// values[h, j] = (a[h, i, :] . b[h, col_j, :]) (* mask value) for the
// stored entries j of each row i of a CSR mask, b read by rows (attention's
// k). The per-entry form (a D-lane product and a D-lane reduction per
// entry) spends as many shuffles and adds on each reduction as on the
// product, and streams a 256-byte b row from L2 per entry. So:
//
//   parallel over batch entries and tiles of T rows:
//     the tile's column span (its rows' first and last columns); where the
//     tile reads each column of the span MIN_REUSE+ times (local / banded
//     masks), column blocks of b that fit L1, each read by every row of
//     the tile before the next; else one block
//     for each block, each row i of the tile (a cursor per row):
//       a_i = a[h, i, :] as ceil(D / W) vectors of W lanes (in registers)
//       G entries at a time while the G-th is in the block:
//         acc_g = sum over chunks of a_i[c] * b[col_g][c]    (FMA, W lanes)
//         the G accumulators summed lane-wise by a transpose tree (log2 G
//         levels of two shuffles and one add per pair): one vector<G>
//         holds the G dot products; times the G mask values; one store
//       then one entry at a time while in the block (a W-lane reduction)
//     (unblocked tiles prefetch b's rows PREFETCH groups ahead: they come
//     from L2 / L3 in random order; measured 5-10% at S = 4096)
//
// Measured on a Zen 5 at D = 64, S = 4096, one thread: 1.2x (random mask)
// to 1.7x (banded) the per-entry form.
//
//===----------------------------------------------------------------------===//

#include "SDDMMRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

//===----------------------------------------------------------------------===//
// GroupedDots
//===----------------------------------------------------------------------===//

GroupedDots::GroupedDots(OpBuilder &b, Location loc, int64_t dim,
                         int64_t lanes, int64_t group)
    : KernelBuilder(b, loc), dim(dim), lanes(lanes), group(group),
      chunks(llvm::divideCeil(dim, lanes)),
      vecType(VectorType::get({lanes}, b.getF32Type())) {}

Value GroupedDots::buffer(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*read_only=*/true);
}

Value GroupedDots::dimOf(Value memref, int64_t d) {
  int64_t size = cast<MemRefType>(memref.getType()).getDimSize(d);
  if (!ShapedType::isDynamic(size))
    return idx(size);
  return memref::DimOp::create(b, loc, memref, d);
}

Value GroupedDots::loadChunk(Value memref, Value h, Value row, int64_t chunk) {
  SmallVector<Value, 3> at{h, row, idx(chunk * lanes)};
  if ((chunk + 1) * lanes <= dim)
    return vector::LoadOp::create(b, loc, vecType, memref, at);
  // Past D: zeros (a masked read, no out-of-bounds access).
  Value zero = arith::ConstantOp::create(
      b, loc, vecType, DenseElementsAttr::get(vecType, 0.0f));
  return vector::MaskedLoadOp::create(
      b, loc, vecType, memref, at,
      prefixMask(lanes, idx(dim - chunk * lanes)), zero);
}

SmallVector<Value> GroupedDots::loadRow(Value memref, Value h, Value row) {
  SmallVector<Value> out;
  for (int64_t k = 0; k < chunks; ++k)
    out.push_back(loadChunk(memref, h, row, k));
  return out;
}

Value GroupedDots::dot(ArrayRef<Value> row, Value memref, Value h, Value col) {
  Value chains[2];
  for (int64_t k = 0; k < chunks; ++k) {
    Value bv = loadChunk(memref, h, col, k);
    Value &chain = chains[k % 2];
    chain = chain ? vector::FMAOp::create(b, loc, row[k], bv, chain).getResult()
                  : arith::MulFOp::create(b, loc, row[k], bv,
                                          arith::FastMathFlags::contract)
                        .getResult();
  }
  if (!chains[1])
    return chains[0];
  // (no reassoc here: LLVM would fold the two chains back into one)
  return arith::AddFOp::create(b, loc, chains[0], chains[1]);
}

Value GroupedDots::groupSums(ArrayRef<Value> row, Value memref, Value h,
                             ArrayRef<Value> cols) {
  SmallVector<Value> level;
  for (Value col : cols)
    level.push_back(dot(row, memref, h, col));
  auto fast = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  // Each level adds pairs lane-wise: after it, lane l holds a partial sum of
  // accumulator l mod (2 * block) of the level's.
  for (int64_t block = 1; level.size() > 1; block *= 2) {
    SmallVector<int64_t> loMask, hiMask;
    for (int64_t g = 0; g < lanes; g += 2 * block)
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t l = 0; l < block; ++l) {
          loMask.push_back(half * lanes + g + l);
          hiMask.push_back(half * lanes + g + block + l);
        }
    SmallVector<Value> next;
    for (size_t p = 0; p + 1 < level.size(); p += 2) {
      Value x = level[p], y = level[p + 1];
      Value lo = vector::ShuffleOp::create(b, loc, x, y, loMask);
      Value hi = vector::ShuffleOp::create(b, loc, x, y, hiMask);
      next.push_back(arith::AddFOp::create(b, loc, lo, hi, fast));
    }
    level = std::move(next);
  }
  // Lanes l and l + G hold parts of the same entry.
  Value merged = level.front();
  for (int64_t width = lanes; width > group; width /= 2) {
    int64_t half = width / 2;
    SmallVector<int64_t> low{0}, high{half}, size{half}, unit{1};
    Value lo = vector::ExtractStridedSliceOp::create(b, loc, merged, low, size,
                                                     unit);
    Value hi = vector::ExtractStridedSliceOp::create(b, loc, merged, high,
                                                     size, unit);
    merged = arith::AddFOp::create(b, loc, lo, hi, fast);
  }
  return merged;
}

Value GroupedDots::total(Value partial) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                     partial, /*acc=*/Value(),
                                     arith::FastMathFlags::reassoc);
}

void GroupedDots::prefetchRow(Value memref, Value h, Value col) {
  for (int64_t k = 0; k < chunks; ++k)
    memref::PrefetchOp::create(b, loc, memref,
                               ValueRange{h, col, idx(k * lanes)},
                               /*isWrite=*/false, /*localityHint=*/3,
                               /*isDataCache=*/true);
}

std::string mlir::smlir::codegen::sizeName(int64_t size) {
  return ShapedType::isDynamic(size) ? "dyn" : std::to_string(size);
}

//===----------------------------------------------------------------------===//
// smlir.sddmm_rows
//===----------------------------------------------------------------------===//

namespace {

class SDDMMRowsBuilder : GroupedDots {
public:
  SDDMMRowsBuilder(OpBuilder &b, SDDMMRowsOp op)
      : GroupedDots(b, op.getLoc(),
                    cast<RankedTensorType>(op.getA().getType()).getDimSize(2),
                    op.getLanes(), op.getGroup()),
        op(op) {}

  Value build(Value destination) {
    pos = buffer(op.getPositions());
    crd = buffer(op.getCoordinates());
    vals = buffer(op.getValues());
    a = buffer(op.getA());
    bm = buffer(op.getB());
    out = destination;
    if (!out) {
      auto type = cast<RankedTensorType>(op.getResult().getType());
      SmallVector<Value, 2> sizes;
      if (type.isDynamicDim(0))
        sizes.push_back(dimOf(a, 0));
      if (type.isDynamicDim(1))
        sizes.push_back(dimOf(vals, 0));
      out = memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()),
          sizes, b.getI64IntegerAttr(64));
    }
    auto aType = cast<MemRefType>(a.getType());
    auto bType = cast<MemRefType>(bm.getType());
    std::string name =
        llvm::formatv("sddmm_rows_csr_{0}x{1}x{2}_g{3}w{4}{5}",
                      sizeName(aType.getDimSize(1)),
                      sizeName(bType.getDimSize(1)), dim, group,
                      lanes, op.getScaled() ? "_scaled" : "")
            .str();
    emitKernelRegion(b, loc, name, [&] {
      rows = dimOf(a, 1);
      cols = dimOf(bm, 1);
      nnzLast = arith::SubIOp::create(b, loc, toIndex(load(pos, {rows})),
                                      idx(1));
      int64_t T = op.getTileRows();
      Value tiles = arith::CeilDivUIOp::create(b, loc, rows, idx(T));
      scf::ParallelOp::create(
          b, loc, ValueRange{idx(0), idx(0)}, ValueRange{dimOf(a, 0), tiles},
          ValueRange{idx(1), idx(1)},
          [&](OpBuilder &, Location, ValueRange ivs) { tile(ivs[0], ivs[1]); });
    });
    return out;
  }

private:
  Value lessThan(Value l, Value r) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, l, r);
  }

  /// Tile t of batch entry h.
  void tile(Value h, Value t) {
    int64_t T = op.getTileRows();
    auto cursorsType = MemRefType::get({T}, b.getIndexType());
    Value cursors = memref::AllocaOp::create(b, loc, cursorsType);
    Value i0 = mul(t, idx(T));
    Value iend = arith::MinUIOp::create(b, loc, add(i0, idx(T)), rows);
    Value count = arith::SubIOp::create(b, loc, iend, i0);
    // The tile's column span: its rows' first and last stored columns (and
    // each row's cursor at its first entry).
    auto span = scf::ForOp::create(
        b, loc, idx(0), count, idx(1), ValueRange{cols, idx(0)},
        [&](OpBuilder &, Location, Value r, ValueRange minMax) {
          Value i = add(i0, r);
          Value p = toIndex(load(pos, {i}));
          Value q = toIndex(load(pos, {add(i, idx(1))}));
          memref::StoreOp::create(b, loc, p, cursors, ValueRange{r});
          auto some = scf::IfOp::create(
              b, loc, lessThan(p, q),
              [&](OpBuilder &, Location) {
                Value first = toIndex(load(crd, {p}));
                Value q1 = arith::SubIOp::create(b, loc, q, idx(1));
                Value last = add(toIndex(load(crd, {q1})), idx(1));
                Value lo = arith::MinUIOp::create(b, loc, minMax[0], first);
                Value hi = arith::MaxUIOp::create(b, loc, minMax[1], last);
                scf::YieldOp::create(b, loc, ValueRange{lo, hi});
              },
              [&](OpBuilder &, Location) {
                scf::YieldOp::create(b, loc, minMax);
              });
          scf::YieldOp::create(b, loc, some.getResults());
        });
    Value lo = span.getResult(0), hi = span.getResult(1);
    // Column blocks of b (kept in L1 while the tile's rows read them) where
    // the tile reads each column of its span min_reuse+ times on average
    // (local / banded masks); else one block (the rows read b as stored).
    Value entries = arith::SubIOp::create(b, loc, toIndex(load(pos, {iend})),
                                          toIndex(load(pos, {i0})));
    Value width = arith::SubIOp::create(b, loc, hi, lo);
    Value reused = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                         entries,
                                         mul(width, idx(op.getMinReuse())));
    Value block = arith::SelectOp::create(b, loc, reused,
                                          idx(op.getBlockColumns()), cols);
    scf::ForOp::create(
        b, loc, lo, hi, block, ValueRange{},
        [&](OpBuilder &, Location, Value c0, ValueRange) {
          Value cend = arith::MinUIOp::create(b, loc, add(c0, block), cols);
          scf::ForOp::create(
              b, loc, idx(0), count, idx(1), ValueRange{},
              [&](OpBuilder &, Location, Value r, ValueRange) {
                rowInBlock(h, add(i0, r), r, cursors, cend, reused);
                scf::YieldOp::create(b, loc);
              });
          scf::YieldOp::create(b, loc);
        });
  }

  /// Row i's entries in the block (columns below `cend`) from its cursor
  /// on; the cursor moves past them.
  void rowInBlock(Value h, Value i, Value r, Value cursors, Value cend,
                  Value reused) {
    Value hi = toIndex(load(pos, {add(i, idx(1))}));
    Value start = load(cursors, {r});
    SmallVector<Value> row = loadRow(a, h, i);
    Value next = start;
    if (group > 1 && op.getPrefetch() > 0) {
      auto ifOp = scf::IfOp::create(
          b, loc, reused,
          [&](OpBuilder &, Location) {
            Value end = groups(row, h, start, hi, cend, false);
            scf::YieldOp::create(b, loc, end);
          },
          [&](OpBuilder &, Location) {
            Value end = groups(row, h, start, hi, cend, true);
            scf::YieldOp::create(b, loc, end);
          });
      next = ifOp.getResult(0);
    } else if (group > 1) {
      next = groups(row, h, start, hi, cend, false);
    }
    // The row's last entries in the block, one at a time.
    Value end = whileInBlock(next, hi, cend, 1, [&](Value j) {
      Value sum = total(dot(row, bm, h, toIndex(load(crd, {j}))));
      if (op.getScaled())
        sum = arith::MulFOp::create(b, loc, sum, load(vals, {j}));
      memref::StoreOp::create(b, loc, sum, out, ValueRange{h, j});
    });
    memref::StoreOp::create(b, loc, end, cursors, ValueRange{r});
  }

  /// A loop over entries `step` at a time from `start` while the last of
  /// them is below `hi` and in the block: `body(j)` per step; returns where
  /// it stopped.
  Value whileInBlock(Value start, Value hi, Value cend, int64_t step,
                     function_ref<void(Value)> body) {
    Type index = b.getIndexType();
    auto loop = scf::WhileOp::create(
        b, loc, TypeRange{index}, ValueRange{start},
        [&](OpBuilder &, Location, ValueRange args) {
          Value last = add(args[0], idx(step - 1));
          auto go = scf::IfOp::create(
              b, loc, lessThan(last, hi),
              [&](OpBuilder &, Location) {
                scf::YieldOp::create(
                    b, loc, lessThan(toIndex(load(crd, {last})), cend));
              },
              [&](OpBuilder &, Location) {
                scf::YieldOp::create(
                    b, loc, ValueRange{arith::ConstantOp::create(
                                b, loc, b.getBoolAttr(false))});
              });
          scf::ConditionOp::create(b, loc, go.getResult(0), args);
        },
        [&](OpBuilder &, Location, ValueRange args) {
          body(args[0]);
          scf::YieldOp::create(b, loc, ValueRange{add(args[0], idx(step))});
        });
    return loop.getResult(0);
  }

  /// G entries at a time (see the file's comment); `prefetching`: b's rows
  /// `prefetch` groups ahead are asked for (past the last entry: the
  /// last entry's row).
  Value groups(ArrayRef<Value> row, Value h, Value start, Value hi, Value cend,
               bool prefetching) {
    return whileInBlock(start, hi, cend, group, [&](Value j0) {
      SmallVector<Value> columns;
      for (int64_t g = 0; g < group; ++g)
        columns.push_back(toIndex(load(crd, {add(j0, idx(g))})));
      if (prefetching)
        for (int64_t g = 0; g < group; ++g) {
          Value ahead = arith::MinUIOp::create(
              b, loc, add(j0, idx(op.getPrefetch() * group + g)), nnzLast);
          prefetchRow(bm, h, toIndex(load(crd, {ahead})));
        }
      Value sums = groupSums(row, bm, h, columns);
      auto sumType = VectorType::get({group}, b.getF32Type());
      if (op.getScaled())
        sums = arith::MulFOp::create(
            b, loc, sums,
            vector::LoadOp::create(b, loc, sumType, vals, ValueRange{j0}));
      vector::StoreOp::create(b, loc, sums, out, ValueRange{h, j0});
    });
  }

  SDDMMRowsOp op;
  Value pos, crd, vals, a, bm, out, rows, cols, nnzLast;
};

} // namespace

Value mlir::smlir::codegen::buildSDDMMRowsKernel(OpBuilder &b, SDDMMRowsOp op,
                                                 Value destination) {
  return SDDMMRowsBuilder(b, op).build(destination);
}
