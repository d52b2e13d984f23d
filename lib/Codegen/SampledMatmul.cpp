//===- SampledMatmul.cpp - the CPU micro-kernel of smlir.sampled_matmul ---===//
//
// result(i, j) = A'(i, :) . B'(:, j) at the pattern's stored (i, j):
//
//   parallel over chunks of rows (groups of rows sharing an n:m pattern
//   stay in one chunk; 1, 2 or 4 chunks: one parallel region per call):
//     for each tile of T (tileTokens: the packed B' tile within L2):
//       pack B' [N, tile] and the chunk's A' rows [rows, tile]
//         feature-major into the chunk's own buffers (8 x 8 register
//         transposes where an operand is T-major; zeros past T, up to the
//         tile's last vector)
//       for each row i of the chunk:
//         E stored entries at a time: E vector accumulators over the tile,
//           acc[e] += A'[i, t:t+V] * B'[j_e, t:t+V]; their sums reduced
//           into one vector through shuffles, written into the entries'
//           values (first tile) or added to them
//         the row's last entries one at a time
//       (rows sharing a pattern: tiles of up to 4 rows x E entries, each
//        B' vector loaded once for the rows)
//
// A dot product per stored entry: nnz * T FMAs, no dense product. Each
// row reads its A' row (in L1) and the B' rows of its entries (in L2).
//
//===----------------------------------------------------------------------===//

#include "SampledMatmul.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

FailureOr<SampledMatmul>
mlir::smlir::codegen::matchSampledMatmul(SampledMatmulOp op, std::string &why) {
  RankedTensorType patternType = op.getPatternType();
  SparseTensorType stt(patternType);
  if (!stt.getElementType().isF32()) {
    why = "the kernel computes in f32";
    return failure();
  }
  if (!stt.hasStaticDimShape() ||
      op.getLhsType().isDynamicDim(1 - op.getLhsContractionDim()) ||
      op.getRhsType().isDynamicDim(1 - op.getRhsContractionDim())) {
    why = "the pattern's rows and columns must be static";
    return failure();
  }
  SampledMatmul sm{op, SampledMatmul::CSR};
  sm.M = patternType.getDimSize(0);
  sm.N = patternType.getDimSize(1);
  ArrayRef<LevelType> lvls = stt.getLvlTypes();
  if (stt.isIdentity() && lvls.size() == 2 && isDenseLT(lvls[0]) &&
      isCompressedLT(lvls[1]) && isUniqueLT(lvls[1]) && isOrderedLT(lvls[1]))
    return sm;
  // (d0, d1) -> (d0 : dense, d1 floordiv m : dense, d1 mod m : structured[n, m])
  if (lvls.size() == 3 && isDenseLT(lvls[0]) && isDenseLT(lvls[1]) &&
      isNOutOfMLT(lvls[2]) && sm.N % static_cast<int64_t>(getM(lvls[2])) == 0) {
    sm.kind = SampledMatmul::NOutOfM;
    sm.n = getN(lvls[2]);
    sm.m = getM(lvls[2]);
    // A pattern argument keeps its smlir encoding (Python's kernels,
    // hoisted sparsifiers): rows sharing one pattern.
    if (auto arg = dyn_cast<BlockArgument>(op.getPattern()))
      if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
        if (auto nm = func.getArgAttrOfType<NMEncodingAttr>(
                arg.getArgNumber(), kEncodingAttrName);
            nm && nm.getN() == sm.n && nm.getM() == sm.m)
          sm.sharedRows = std::max<int64_t>(1, nm.getRows());
    return sm;
  }
  why = "the pattern must be CSR or n:m (other formats have no lowering)";
  return failure();
}

namespace {

class SampledMatmulBuilder : KernelBuilder {
public:
  SampledMatmulBuilder(OpBuilder &b, const SampledMatmul &sm, int64_t lanes,
                       int64_t entries, int64_t tileTokens)
      : KernelBuilder(b, sm.op->getLoc()), sm(sm), op(sm.op), V(lanes), E(entries),
        TT(tileTokens), f32(b.getF32Type()),
        vecType(VectorType::get({lanes}, b.getF32Type())) {}

  SampledMatmulBuffers build() {
    auto buffer = [&](Value tensor) {
      auto type = cast<RankedTensorType>(tensor.getType());
      return bufferization::ToBufferOp::create(
          b, loc, MemRefType::get(type.getShape(), f32), tensor,
          /*read_only=*/true);
    };
    lhs = buffer(op.getLhs());
    rhs = buffer(op.getRhs());
    T = memref::DimOp::create(b, loc, lhs, op.getLhsContractionDim());
    Value pattern = op.getPattern();
    SampledMatmulBuffers result;
    if (sm.kind == SampledMatmul::CSR) {
      positions = ToPositionsOp::create(b, loc, pattern, 1);
      coordinates = ToCoordinatesOp::create(b, loc, pattern, 1);
      result.levels = {positions, coordinates};
    } else {
      coordinates = ToCoordinatesOp::create(b, loc, pattern, 2);
      result.levels = {coordinates};
    }
    values = ToValuesOp::create(b, loc, pattern);
    // The stored entries, from the layout (the values buffer may be longer
    // than what is stored; an n:m one's size is not its count).
    Value nnz = sm.kind == SampledMatmul::CSR
                    ? toIndex(load(positions, {idx(sm.M)}))
                    : idx(sm.M * (sm.N / sm.m) * sm.n);
    out = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, f32), ValueRange{nnz},
        b.getI64IntegerAttr(64));
    // Each chunk of rows (one parallel iteration, all of T) packs its own
    // tiles: one parallel region per call, whose threads meet once (with
    // a region per tile they met 3 times per tile, and a thread the OS
    // preempted stalled the others at each meeting), and each thread's
    // B' tile in its own L2. The B' tile is packed once per chunk: few
    // chunks (4 for 1024+ rows, the threads of this project's hosts).
    units = llvm::divideCeil(sm.M, sm.sharedRows);
    chunks = std::max<int64_t>(
        1, std::min<int64_t>(units, sm.M >= 1024 ? 4 : sm.M >= 256 ? 2 : 1));
    unitsPerChunk = llvm::divideCeil(units, chunks);
    // Heap, not stack: the tiles of large M or N do not fit a thread's stack
    // (ownership-based deallocation frees them).
    lhsTile = memref::AllocOp::create(
        b, loc,
        MemRefType::get({chunks, unitsPerChunk * sm.sharedRows, TT}, f32),
        b.getI64IntegerAttr(64));
    rhsTile = memref::AllocOp::create(
        b, loc, MemRefType::get({chunks, sm.N, TT}, f32),
        b.getI64IntegerAttr(64));
    emitKernelRegion(b, loc, kernelName(), [&] {
      // T = 0: every sum is empty.
      Value empty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, T,
                                          idx(0));
      scf::IfOp::create(b, loc, empty, [&](OpBuilder &, Location) {
        Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
        forLoop(idx(0), nnz, 1, [&](Value p) {
          memref::StoreOp::create(b, loc, zero, out, ValueRange{p});
        });
        scf::YieldOp::create(b, loc);
      });
      parallelLoop(idx(chunks), [&](Value c) { chunk(c); });
    });
    result.values = out;
    return result;
  }

private:
  /// scf.for lo .. hi step `step`, no results.
  void forLoop(Value lo, Value hi, int64_t step,
               llvm::function_ref<void(Value)> body) {
    scf::ForOp::create(b, loc, lo, hi, idx(step), ValueRange{},
                       [&](OpBuilder &, Location, Value iv, ValueRange) {
                         body(iv);
                         scf::YieldOp::create(b, loc);
                       });
  }

  void parallelLoop(Value hi, llvm::function_ref<void(Value)> body) {
    scf::ParallelOp::create(b, loc, ValueRange{idx(0)}, ValueRange{hi},
                            ValueRange{idx(1)},
                            [&](OpBuilder &, Location, ValueRange ivs) {
                              body(ivs[0]);
                            });
  }

  Value cmp(arith::CmpIPredicate predicate, Value l, Value r) {
    return arith::CmpIOp::create(b, loc, predicate, l, r);
  }

  Value minIndex(Value l, Value r) {
    return arith::MinSIOp::create(b, loc, l, r);
  }

  /// Chunk c: units (rows, or groups of rows sharing a pattern)
  /// [c * unitsPerChunk, ..), every tile of T.
  void chunk(Value c) {
    chunkIndex = c;
    Value u0 = minIndex(mul(c, idx(unitsPerChunk)), idx(units));
    Value u1 = minIndex(add(u0, idx(unitsPerChunk)), idx(units));
    chunkRow0 = mul(u0, idx(sm.sharedRows));
    Value rowEnd = minIndex(mul(u1, idx(sm.sharedRows)), idx(sm.M));
    forLoop(idx(0), T, TT, [&](Value t0) {
      Value length = minIndex(idx(TT), arith::SubIOp::create(b, loc, T, t0));
      Value vectors = arith::DivUIOp::create(b, loc, add(length, idx(V - 1)),
                                             idx(V));
      Value padded = mul(vectors, idx(V));
      pack(rhsTile, rhs, idx(0), idx(sm.N), idx(0),
           /*tMajor=*/!op.isRhsTransposed(), t0, padded);
      pack(lhsTile, lhs, chunkRow0, rowEnd, chunkRow0,
           /*tMajor=*/op.isLhsTransposed(), t0, padded);
      Value first = cmp(arith::CmpIPredicate::eq, t0, idx(0));
      if (sm.sharedRows <= 1) {
        forLoop(chunkRow0, rowEnd, 1, [&](Value i) { row(i, vectors, first); });
        return;
      }
      // Whole groups of rows sharing a pattern; the rows of a last, smaller
      // group one at a time.
      forLoop(u0, u1, 1, [&](Value u) {
        Value i0 = mul(u, idx(sm.sharedRows));
        Value end = add(i0, idx(sm.sharedRows));
        scf::IfOp::create(
            b, loc, cmp(arith::CmpIPredicate::ule, end, idx(sm.M)),
            [&](OpBuilder &, Location) {
              sharedGroup(i0, vectors, first);
              scf::YieldOp::create(b, loc);
            },
            [&](OpBuilder &, Location) {
              forLoop(i0, idx(sm.M), 1,
                      [&](Value i) { row(i, vectors, first); });
              scf::YieldOp::create(b, loc);
            });
      });
    });
  }

  /// Where A' row i and B' row j of this chunk's tiles are, at t.
  SmallVector<Value> aAt(Value i, Value t) {
    return {chunkIndex, arith::SubIOp::create(b, loc, i, chunkRow0), t};
  }
  SmallVector<Value> bAt(Value j, Value t) { return {chunkIndex, j, t}; }

  /// The rows i0 .. i0 + sharedRows of one pattern (n:m): tiles of up to
  /// 4 rows x 2 to 8 entries.
  void sharedGroup(Value i0, Value vectors, Value first) {
    int64_t perRow = sm.N / sm.m * sm.n;
    int64_t rows = 1;
    for (int64_t r = std::min<int64_t>(4, sm.sharedRows); r > 1; --r)
      if (sm.sharedRows % r == 0) {
        rows = r;
        break;
      }
    // rows x count accumulators, rows A' vectors and a B' vector in the
    // register file (16 lanes: 32 registers, 8 lanes: 16).
    int64_t count = std::max<int64_t>(1, (V >= 16 ? 24 : 12) / rows);
    count = count >= 8 ? 8 : count >= 4 ? 4 : count >= 2 ? 2 : 1;
    int64_t whole = perRow / count * count;
    forLoop(idx(0), idx(sm.sharedRows / rows), 1, [&](Value block) {
      Value first0 = add(i0, mul(block, idx(rows)));
      Value base = mul(first0, idx(perRow));
      forLoop(idx(0), idx(whole), count, [&](Value q) {
        sharedEntries(first0, rows, add(base, q), perRow, count, vectors, first);
      });
      forLoop(idx(whole), idx(perRow), 1, [&](Value q) {
        sharedEntries(first0, rows, add(base, q), perRow, 1, vectors, first);
      });
    });
  }

  /// tile[chunk, r - tileRow0, t - t0] = the operand's (r, t) for r in
  /// [rBegin, rEnd), t in [t0, t0 + padded), zero past T. `src` is [T, R]
  /// when `tMajor`, else [R, T].
  void pack(Value tile, Value src, Value rBegin, Value rEnd, Value tileRow0,
            bool tMajor, Value t0, Value padded) {
    auto octType = VectorType::get({8}, f32);
    auto at = [&](Value r, Value t) {
      return tMajor ? SmallVector<Value>{t, r} : SmallVector<Value>{r, t};
    };
    auto into = [&](Value r, Value t) -> SmallVector<Value> {
      return {chunkIndex, arith::SubIOp::create(b, loc, r, tileRow0), t};
    };
    forLoop(rBegin, rEnd, 8, [&](Value r0) {
      Value rowsWhole = cmp(arith::CmpIPredicate::ule, add(r0, idx(8)), rEnd);
      forLoop(idx(0), padded, 8, [&](Value tb) {
        Value t = add(t0, tb);
        Value whole = arith::AndIOp::create(
            b, loc, rowsWhole,
            cmp(arith::CmpIPredicate::ule, add(t, idx(8)), T));
        scf::IfOp::create(
            b, loc, whole,
            [&](OpBuilder &, Location) {
              if (tMajor) {
                SmallVector<Value> rows;
                for (int64_t i = 0; i < 8; ++i)
                  rows.push_back(vector::LoadOp::create(
                      b, loc, octType, src, ValueRange{add(t, idx(i)), r0}));
                SmallVector<Value> columns = transpose8x8(b, loc, rows);
                for (int64_t c = 0; c < 8; ++c)
                  vector::StoreOp::create(b, loc, columns[c], tile,
                                          into(add(r0, idx(c)), tb));
              } else {
                for (int64_t c = 0; c < 8; ++c) {
                  Value v = vector::LoadOp::create(
                      b, loc, octType, src, ValueRange{add(r0, idx(c)), t});
                  vector::StoreOp::create(b, loc, v, tile,
                                          into(add(r0, idx(c)), tb));
                }
              }
              scf::YieldOp::create(b, loc);
            },
            [&](OpBuilder &, Location) {
              // A block past rEnd or T: element by element, zeros past T.
              forLoop(idx(0), idx(8), 1, [&](Value c) {
                Value r = add(r0, c);
                scf::IfOp::create(
                    b, loc, cmp(arith::CmpIPredicate::ult, r, rEnd),
                    [&](OpBuilder &, Location) {
                      forLoop(idx(0), idx(8), 1, [&](Value i) {
                        Value ti = add(t, i);
                        auto inside = scf::IfOp::create(
                            b, loc, TypeRange{f32},
                            cmp(arith::CmpIPredicate::ult, ti, T),
                            /*withElseRegion=*/true);
                        {
                          OpBuilder::InsertionGuard guard(b);
                          b.setInsertionPointToStart(inside.thenBlock());
                          scf::YieldOp::create(b, loc,
                                               ValueRange{load(src, at(r, ti))});
                          b.setInsertionPointToStart(inside.elseBlock());
                          scf::YieldOp::create(
                              b, loc,
                              ValueRange{arith::ConstantOp::create(
                                  b, loc, b.getF32FloatAttr(0))});
                        }
                        memref::StoreOp::create(b, loc, inside.getResult(0),
                                                tile, into(r, add(tb, i)));
                      });
                      scf::YieldOp::create(b, loc);
                    });
              });
              scf::YieldOp::create(b, loc);
            });
      });
    });
  }

  /// Where row i's stored entries are: [start, end).
  void rowExtent(Value i, Value &start, Value &end) {
    if (sm.kind == SampledMatmul::CSR) {
      start = toIndex(load(positions, {i}));
      end = toIndex(load(positions, {add(i, idx(1))}));
      return;
    }
    int64_t perRow = sm.N / sm.m * sm.n;
    start = mul(i, idx(perRow));
    end = add(start, idx(perRow));
  }

  /// The column of stored entry p of row i.
  Value column(Value i, Value p) {
    Value crd = toIndex(load(coordinates, {p}));
    if (sm.kind == SampledMatmul::CSR)
      return crd;
    // Entry p is in group p / n of the matrix, group (p / n) - i * N / m of
    // its row; its coordinate is in-group.
    Value group = arith::SubIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, p, idx(sm.n)),
        mul(i, idx(sm.N / sm.m)));
    return add(mul(group, idx(sm.m)), crd);
  }

  void row(Value i, Value vectors, Value first) {
    Value start, end;
    rowExtent(i, start, end);
    Value count = arith::SubIOp::create(b, loc, end, start);
    Value whole = add(start, mul(arith::DivUIOp::create(b, loc, count, idx(E)),
                                 idx(E)));
    forLoop(start, whole, E, [&](Value p) { entries(i, p, E, vectors, first); });
    forLoop(whole, end, 1, [&](Value p) { entries(i, p, 1, vectors, first); });
  }

  /// Stored entries p0 .. p0 + count of row i: their dot products over the
  /// tile's `vectors` vectors, written or added to their values.
  void entries(Value i, Value p0, int64_t count, Value vectors, Value first) {
    sharedEntries(i, 1, p0, 0, count, vectors, first);
  }

  /// The same for rows i0 .. i0 + rows, which share one pattern: entries
  /// q .. q + count of each row (at p0 + r * rowStride + q .. for row
  /// i0 + r), all at row i0's columns. Each B' vector loaded serves the
  /// `rows` rows.
  void sharedEntries(Value i0, int64_t rows, Value p0, int64_t rowStride,
                     int64_t count, Value vectors, Value first) {
    SmallVector<Value> columns, zeros;
    Value zero = arith::ConstantOp::create(
        b, loc, vecType, DenseElementsAttr::get(vecType, 0.0f));
    for (int64_t e = 0; e < count; ++e)
      columns.push_back(column(i0, add(p0, idx(e))));
    for (int64_t a = 0; a < rows * count; ++a)
      zeros.push_back(zero);
    auto loop = scf::ForOp::create(
        b, loc, idx(0), vectors, idx(1), zeros,
        [&](OpBuilder &, Location, Value v, ValueRange acc) {
          Value t = mul(v, idx(V));
          SmallVector<Value> as, next(acc.begin(), acc.end());
          for (int64_t r = 0; r < rows; ++r)
            as.push_back(vector::LoadOp::create(b, loc, vecType, lhsTile,
                                                aAt(add(i0, idx(r)), t)));
          for (int64_t e = 0; e < count; ++e) {
            Value bv = vector::LoadOp::create(b, loc, vecType, rhsTile,
                                              bAt(columns[e], t));
            for (int64_t r = 0; r < rows; ++r)
              next[r * count + e] =
                  vector::FMAOp::create(b, loc, as[r], bv, next[r * count + e]);
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t r = 0; r < rows; ++r)
      write(loop.getResults().slice(r * count, count),
            add(p0, idx(r * rowStride)), first);
  }

  /// Adds the sums of `acc` to values p .. p + acc.size() (writes them on
  /// the first tile), scaled by the pattern's values with `scaled`.
  void write(ValueRange acc, Value p, Value first) {
    int64_t count = acc.size();
    if (V >= 8 && (count == 2 || count == 4 || count == 8)) {
      // All the sums in one vector, for consecutive values.
      Value sums = reduce(acc);
      auto sumType = VectorType::get({count}, f32);
      if (op.getScaled())
        sums = arith::MulFOp::create(
            b, loc, sums,
            vector::LoadOp::create(b, loc, sumType, values, ValueRange{p}));
      Value old = vector::LoadOp::create(b, loc, sumType, out, ValueRange{p});
      Value total = arith::SelectOp::create(
          b, loc, first, sums, arith::AddFOp::create(b, loc, old, sums));
      vector::StoreOp::create(b, loc, total, out, ValueRange{p});
      return;
    }
    for (int64_t e = 0; e < count; ++e) {
      Value pe = add(p, idx(e));
      Value sum = vector::ReductionOp::create(
          b, loc, vector::CombiningKind::ADD, acc[e]);
      if (op.getScaled())
        sum = arith::MulFOp::create(b, loc, sum, load(values, {pe}));
      Value old = load(out, {pe});
      Value total = arith::SelectOp::create(
          b, loc, first, sum, arith::AddFOp::create(b, loc, old, sum));
      memref::StoreOp::create(b, loc, total, out, ValueRange{pe});
    }
  }

  /// The first `width` lanes of `a` plus the next `width`.
  Value foldHalves(Value a, int64_t width) {
    SmallVector<int64_t> low{0}, high{width}, size{width}, unit{1};
    Value lo = vector::ExtractStridedSliceOp::create(
        b, loc, a, ArrayRef<int64_t>(low), ArrayRef<int64_t>(size),
        ArrayRef<int64_t>(unit));
    Value hi = vector::ExtractStridedSliceOp::create(
        b, loc, a, ArrayRef<int64_t>(high), ArrayRef<int64_t>(size),
        ArrayRef<int64_t>(unit));
    return arith::AddFOp::create(b, loc, lo, hi);
  }

  /// [sum(acc[0]), ..., sum(acc[c - 1])] for c = 2, 4 or 8 accumulators:
  /// each folded to 8 lanes, then pairs, quads and octets of them added
  /// lane-wise through shuffles, then the 8 lanes folded to c (8 x 16
  /// lanes: 45 vector ops, against 8 separate reductions' 64 and 8 scalar
  /// read-modify-writes).
  Value reduce(ValueRange acc) {
    SmallVector<Value> level;
    for (Value a : acc) {
      for (int64_t w = V; w > 8; w /= 2)
        a = foldHalves(a, w / 2);
      level.push_back(a);
    }
    // Lane masks of each level: after it, lanes hold partial sums of
    // 2, 4, 8 accumulators in turn (after the third, accumulator e in
    // lane e; after fewer, e in lanes e, e + c, ...).
    const int64_t masks[3][2][8] = {
        {{0, 8, 2, 10, 4, 12, 6, 14}, {1, 9, 3, 11, 5, 13, 7, 15}},
        {{0, 1, 8, 9, 4, 5, 12, 13}, {2, 3, 10, 11, 6, 7, 14, 15}},
        {{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}};
    for (const auto &mask : masks) {
      if (level.size() == 1)
        break;
      SmallVector<Value> next;
      for (size_t i = 0; i < level.size(); i += 2) {
        Value l = vector::ShuffleOp::create(b, loc, level[i], level[i + 1],
                                            ArrayRef<int64_t>(mask[0]));
        Value r = vector::ShuffleOp::create(b, loc, level[i], level[i + 1],
                                            ArrayRef<int64_t>(mask[1]));
        next.push_back(arith::AddFOp::create(b, loc, l, r));
      }
      level = std::move(next);
    }
    Value sums = level.front();
    for (int64_t w = 8; w > static_cast<int64_t>(acc.size()); w /= 2)
      sums = foldHalves(sums, w / 2);
    return sums;
  }

  /// "sampled_matmul_csr_tn_3072x768": the pattern's format, whether A and
  /// B are read transposed, its shape.
  std::string kernelName() {
    std::string format =
        sm.kind == SampledMatmul::CSR
            ? std::string("csr")
            : std::to_string(sm.n) + "of" + std::to_string(sm.m) +
                  (sm.sharedRows > 1 ? "r" + std::to_string(sm.sharedRows)
                                     : std::string());
    std::string layouts = std::string(op.isLhsTransposed() ? "t" : "n") +
                          (op.isRhsTransposed() ? "t" : "n");
    return llvm::formatv("sampled_matmul_{0}_{1}{2}_{3}x{4}", format, layouts,
                         op.getScaled() ? "_scaled" : "", sm.M, sm.N)
        .str();
  }

  const SampledMatmul &sm;
  SampledMatmulOp op; // (its accessors are not const)
  int64_t V, E, TT;
  Type f32;
  VectorType vecType;
  Value lhs, rhs, T, positions, coordinates, values, out, lhsTile, rhsTile;
  int64_t units = 0, chunks = 1, unitsPerChunk = 0;
  Value chunkIndex, chunkRow0; // the chunk being built
};

} // namespace

SampledMatmulBuffers mlir::smlir::codegen::buildSampledMatmulKernel(
    OpBuilder &b, const SampledMatmul &sm, int64_t lanes, int64_t entries,
    int64_t tileTokens) {
  return SampledMatmulBuilder(b, sm, lanes, entries, tileTokens).build();
}
