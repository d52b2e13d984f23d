//===- OutputStage.cpp - tiles to y through a stage -------------------------===//
//
// A tile of yT goes transposed into a per-iteration stage of MB tokens x
// stageWidth() columns, copied to y a token row at a time.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

/// Row blocks per output stage: ~64 columns (4 cache lines per token
/// row), a multiple of 16 so that it copies out in whole vectors.
int64_t MicrokernelBuilder::stageRowBlocks() const {
  int64_t unit = std::lcm<int64_t>(R, 16) / R;
  return unit * llvm::divideCeil(64, unit * R);
}

/// Row blocks [first, last) in stages of stageRowBlocks(): `visit(nb,
/// column)` stores row block nb's tile at `column` of the stage, which
/// then goes to y (where `flush` holds, if given).
void MicrokernelBuilder::stagedRowBlocks(Value first, Value last, Value m0, Value flush,
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
void MicrokernelBuilder::flushStage(Value m0, Value n0, Value nEnd) {
  int64_t W = stageWidth();
  // A loop over the block's tokens (the copy unrolled per token made the
  // kernels' code, and LLVM's compile time, grow with MB).
  Value tokens = lin.M % MB == 0
                     ? idx(MB)
                     : arith::MinSIOp::create(
                           b, loc, idx(MB),
                           arith::SubIOp::create(b, loc, idx(lin.M), m0));
  if (yColumns) {
    // Into given columns: scalar read-modify-writes along y's row (the
    // columns ascend). A 16-lane gather + scatter per vector ran ~2x
    // slower than this (AVX-512 scatters are microcoded on Zen 4: ELL +
    // COO's remainder at 1024 x 768 -> 3072, 1525 rows, 1 thread: +1.7 ms).
    scf::ForOp::create(
        b, loc, idx(0), tokens, idx(1), ValueRange{},
        [&](OpBuilder &, Location, Value t, ValueRange) {
          Value m = add(m0, t);
          Value row = arith::SubIOp::create(
              b, loc, add(stageBase, mul(t, idx(W))), n0);
          scf::ForOp::create(
              b, loc, n0, nEnd, idx(1), ValueRange{},
              [&](OpBuilder &, Location, Value n, ValueRange) {
                storeY(load(stages, {add(row, n)}), m, n);
                scf::YieldOp::create(b, loc);
              });
          scf::YieldOp::create(b, loc);
        });
    return;
  }
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
              storeYVector(v, m, n, Value());
              continue;
            }
            // Columns n .. nEnd - 1 of this vector (none when n >= nEnd).
            Value left = arith::SubIOp::create(
                b, loc, arith::MaxSIOp::create(b, loc, nEnd, n), n);
            Value mask = vector::CreateMaskOp::create(
                b, loc, VectorType::get({V}, b.getI1Type()), ValueRange{left});
            storeYVector(v, m, n, mask);
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

/// stage[u*V + i, column .. column + R] = (acc[0][u][i], ...,
/// acc[R-1][u][i]): the tile transposed into the stage (flushStage copies
/// it to y, masking what sticks out past M or N there).
void MicrokernelBuilder::store(ArrayRef<Value> acc, Value column) {
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

/// y's buffer. Accumulate-into reads and writes the `into` operand's buffer
/// in place where the linear is its only reader (the tensor is then dead
/// after it), else a copy of it.
void MicrokernelBuilder::bindOutput() {
  LinearOp op = lin.op; // (accessors are not const)
  Value into = op.getInto();
  if (!into) {
    y = memref::AllocOp::create(b, loc, MemRefType::get({lin.M, lin.N}, f32),
                                b.getI64IntegerAttr(64));
    return;
  }
  accumulate = true;
  auto yType = MemRefType::get(op.getResultType().getShape(), f32);
  bool inPlace = into.hasOneUse();
  Value buffer = bufferization::ToBufferOp::create(b, loc, yType, into,
                                                   /*read_only=*/!inPlace);
  if (inPlace) {
    y = buffer;
  } else {
    y = memref::AllocOp::create(b, loc, yType, b.getI64IntegerAttr(64));
    memref::CopyOp::create(b, loc, buffer, y);
  }
  if (Value columns = op.getColumns()) {
    auto type = cast<RankedTensorType>(columns.getType());
    yColumns = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()),
        columns, /*read_only=*/true);
  }
}

void MicrokernelBuilder::storeY(Value v, Value m, Value n) {
  if (!accumulate) {
    memref::StoreOp::create(b, loc, v, y, ValueRange{m, n});
    return;
  }
  Value column = yColumns ? arith::IndexCastOp::create(
                                b, loc, b.getIndexType(), load(yColumns, {n}))
                          : n;
  Value sum = arith::AddFOp::create(b, loc, load(y, {m, column}), v);
  memref::StoreOp::create(b, loc, sum, y, ValueRange{m, column});
}

/// Accumulating into y's own columns, a (masked) load, add and store (into
/// given columns flushStage stores each with storeY).
void MicrokernelBuilder::storeYVector(Value v, Value m, Value n, Value mask) {
  if (!accumulate) {
    if (mask)
      vector::MaskedStoreOp::create(b, loc, y, ValueRange{m, n}, mask, v);
    else
      vector::StoreOp::create(b, loc, v, y, ValueRange{m, n});
    return;
  }
  assert(!yColumns && "flushStage stores into given columns one by one");
  Value old = mask ? vector::MaskedLoadOp::create(b, loc, vecType, y,
                                                  ValueRange{m, n}, mask,
                                                  zeroVector())
                         .getResult()
                   : vector::LoadOp::create(b, loc, vecType, y, ValueRange{m, n})
                         .getResult();
  Value sum = arith::AddFOp::create(b, loc, old, v);
  if (mask)
    vector::MaskedStoreOp::create(b, loc, y, ValueRange{m, n}, mask, sum);
  else
    vector::StoreOp::create(b, loc, sum, y, ValueRange{m, n});
}
