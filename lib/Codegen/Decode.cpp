//===- Decode.cpp - the decode kernel ---------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

/// Half precision x (a few tokens) is extended to f32 once, up front: the
/// row loops then gather or permute f32 (AVX-512 has no 16-bit gathers: a
/// bf16 vector.gather became 8 scalar loads, ~3x slower on 2:4 decode).
void MicrokernelBuilder::widenX() {
  if (storage.isF32())
    return;
  Value wide = memref::AllocOp::create(
      b, loc, MemRefType::get({lin.M, lin.K}, f32), b.getI64IntegerAttr(64));
  scf::ForOp::create(
      b, loc, idx(0), idx(lin.M), idx(1), ValueRange{},
      [&](OpBuilder &, Location, Value m, ValueRange) {
        scf::ForOp::create(
            b, loc, idx(0), idx(lin.K), idx(1), ValueRange{},
            [&](OpBuilder &, Location, Value k, ValueRange) {
              memref::StoreOp::create(b, loc, widen(load(x, {m, k})), wide,
                                      ValueRange{m, k});
              scf::YieldOp::create(b, loc);
            });
        scf::YieldOp::create(b, loc);
      });
  x = wide;
}

/// Decode (a few tokens): y[m, n] is a dot product of row n with x[m, :]
/// (no packing, no idle lanes). Dense rows: vectors along k, the x vector
/// shared by R rows, reduced at the end; sparse rows: R scalar chains
/// gathering x[m, k]. Threads split the rows.
void MicrokernelBuilder::buildDecode() {
  widenX();
  parallelRowBlocks([&](Value n0) {
    scf::ForOp::create(b, loc, idx(0), idx(lin.M), idx(1), ValueRange{},
                       [&](OpBuilder &, Location, Value m, ValueRange) {
                         decodeRows(m, n0);
                         scf::YieldOp::create(b, loc);
                       });
  });
}

/// `rowBlock(n0)` for the blocks of R rows from n0, threads splitting them
/// in at most 64 chunks of whole blocks (decode kernels).
void MicrokernelBuilder::parallelRowBlocks(llvm::function_ref<void(Value)> rowBlock) {
  int64_t nBlocks = llvm::divideCeil(lin.N, R);
  int64_t chunks = std::min<int64_t>(nBlocks, 64);
  int64_t blocksPerChunk = llvm::divideCeil(nBlocks, chunks);
  scf::ParallelOp::create(
      b, loc, ValueRange{idx(0)}, ValueRange{idx(chunks)}, ValueRange{idx(1)},
      [&](OpBuilder &, Location, ValueRange ivs) {
        Value first = mul(ivs[0], idx(blocksPerChunk));
        Value last = arith::MinSIOp::create(
            b, loc, add(first, idx(blocksPerChunk)), idx(nBlocks));
        scf::ForOp::create(b, loc, first, last, idx(1), ValueRange{},
                           [&](OpBuilder &, Location, Value nb, ValueRange) {
                             rowBlock(mul(nb, idx(R)));
                             scf::YieldOp::create(b, loc);
                           });
      });
}

void MicrokernelBuilder::decodeRows(Value m, Value n0) {
  Value zero = arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(0));
  SmallVector<Value> sums(R, zero);
  access->decodeRows(*this, m, n0, sums);
  for (int64_t r = 0; r < R; ++r) {
    Value n = add(n0, idx(r));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, n,
                                         idx(lin.N));
    scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
      storeY(sums[r], m, n);
      scf::YieldOp::create(b, loc);
    });
  }
}

/// Sparse rows of a decode, V stored entries at a time: their values and
/// coordinates are contiguous vector loads and x[m, k] a vector.gather, so
/// a row costs a gather and an FMA per V entries instead of V scalar
/// chains. Lockstep over the vectors all R rows have (R independent
/// accumulators), then each row's own vectors, then its last (< V)
/// entries scalar.
void MicrokernelBuilder::decodeGathered(Value m, Value n0, SmallVectorImpl<Value> &sums) {
  SmallVector<Value> starts, lengths;
  rowExtents(n0, starts, lengths);
  for (Value &length : lengths) // n:m counts groups
    length = access->entryCount(*this, length);
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
  // Rows all as long (n:m): nothing past the lockstep.
  bool ragged = access->raggedRows();
  for (int64_t r = 0; r < R; ++r) {
    Value ownVectors = vectorPart(lengths[r]);
    if (ragged)
      vectorLoop(commonVectors, ownVectors, {r});
    auto tail = scf::ForOp::create(
        b, loc, ragged ? ownVectors : commonVectors, lengths[r], idx(1),
        ValueRange{sums[r]},
        [&](OpBuilder &, Location, Value j, ValueRange carried) {
          Value p = add(starts[r], j);
          Value k = access->entryK(*this, j, toIndex(load(coordinates, {p})));
          scf::YieldOp::create(
              b, loc,
              ValueRange{math::FmaOp::create(b, loc, widen(load(values, {p})),
                                             widen(load(x, {m, k})),
                                             carried[0])});
        });
    sums[r] = arith::AddFOp::create(
        b, loc, tail.getResult(0),
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc[r]));
  }
}

/// acc + values[start + j : +V] * x[m, k(start + j : +V)] (gathered).
Value MicrokernelBuilder::gatheredFma(Value m, Value start, Value j, Value acc) {
  Value p = add(start, j);
  auto crdType = cast<MemRefType>(coordinates.getType()).getElementType();
  auto i32Vec = VectorType::get({V}, b.getI32Type());
  Value k = vector::LoadOp::create(b, loc, VectorType::get({V}, crdType),
                                   coordinates, ValueRange{p});
  // GEP sign-extends its indices: widen narrow coordinates as unsigned
  // (crdWidth = 0 stores them as index, which is wide already).
  if (crdType.isInteger() && crdType.getIntOrFloatBitWidth() < 32)
    k = arith::ExtUIOp::create(b, loc, i32Vec, k);
  if (Value offsets = access->gatherOffsets(*this, j))
    k = arith::AddIOp::create(b, loc, k, offsets);
  Value all = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(VectorType::get({V}, b.getI1Type()), true));
  // (x is f32 here: buildDecode extended a half x up front.)
  Value xs = vector::GatherOp::create(b, loc, vecType, x, ValueRange{m, idx(0)},
                                      k, all, zeroVector());
  Value w = widen(vector::LoadOp::create(
      b, loc, VectorType::get({V}, storage), values, ValueRange{p}));
  return vector::FMAOp::create(b, loc, w, xs, acc);
}
