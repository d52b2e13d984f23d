//===- TransposeKernel.cpp - transposes moving the innermost dim ----------===//
//
// Attention's k^T: 8 x 8 tiles of the two dimensions that trade places are
// read 8 contiguous elements per load, transposed in registers and stored
// 8 contiguous elements per output row; the other dimensions run under
// scf.parallel.
//
//===----------------------------------------------------------------------===//

#include "TransposeKernel.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

namespace {

class TransposeKernelBuilder : KernelBuilder {
public:
  TransposeKernelBuilder(OpBuilder &b, linalg::TransposeOp op)
      : KernelBuilder(b, op.getLoc()), op(op), perm(op.getPermutation()),
        inShape(cast<RankedTensorType>(op.getInput().getType()).getShape()),
        r(perm.size()), a(r - 1), c(perm.back()),
        ja(std::distance(perm.begin(), llvm::find(perm, a))) {}

  Value build() {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    auto outType = cast<RankedTensorType>(op.getResult()[0].getType());
    auto f32 = b.getF32Type();
    in = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(inType.getShape(), f32), op.getInput(),
        /*read_only=*/true);
    out = memref::AllocOp::create(b, loc, MemRefType::get(outType.getShape(), f32),
                                  b.getI64IntegerAttr(64));
    std::string name = "transpose";
    for (int64_t size : inType.getShape())
      name += "_" + std::to_string(size);
    for (int64_t p : perm)
      name += "_p" + std::to_string(p);
    emitKernelRegion(b, loc, name, [&] {
      // The output dimensions other than ja and r - 1, in parallel.
      SmallVector<Value> zeros, bounds, ones;
      for (int64_t j = 0; j < static_cast<int64_t>(r) - 1; ++j) {
        if (j == ja)
          continue;
        zeros.push_back(idx(0));
        bounds.push_back(idx(inShape[perm[j]]));
        ones.push_back(idx(1));
      }
      if (zeros.empty()) {
        tiles({});
        return;
      }
      scf::ParallelOp::create(b, loc, zeros, bounds, ones,
                              [&](OpBuilder &, Location, ValueRange ivs) {
                                tiles(ivs);
                              });
    });
    return bufferization::ToTensorOp::create(b, loc, outType, out,
                                             /*restrict=*/true, /*writable=*/true);
  }

private:

  /// in's indices for output position (outer ivs, a = ka, c = kc).
  SmallVector<Value> inIndices(ValueRange outer, Value ka, Value kc) {
    SmallVector<Value> indices(r);
    unsigned next = 0;
    for (int64_t j = 0; j < static_cast<int64_t>(r) - 1; ++j)
      if (j != ja)
        indices[perm[j]] = outer[next++];
    indices[a] = ka;
    indices[c] = kc;
    return indices;
  }
  /// out's indices for the same element.
  SmallVector<Value> outIndices(ValueRange outer, Value ka, Value kc) {
    SmallVector<Value> indices(r);
    unsigned next = 0;
    for (int64_t j = 0; j < static_cast<int64_t>(r) - 1; ++j)
      if (j != ja)
        indices[j] = outer[next++];
    indices[ja] = ka;
    indices[r - 1] = kc;
    return indices;
  }

  void tiles(ValueRange outer) {
    int64_t sa = inShape[a], sc = inShape[c];
    int64_t wholeA = sa / 8 * 8, wholeC = sc / 8 * 8;
    auto octType = VectorType::get({8}, b.getF32Type());
    if (wholeA > 0 && wholeC > 0)
      scf::ForOp::create(
          b, loc, idx(0), idx(wholeC), idx(8), ValueRange{},
          [&](OpBuilder &, Location, Value kc, ValueRange) {
            scf::ForOp::create(
                b, loc, idx(0), idx(wholeA), idx(8), ValueRange{},
                [&](OpBuilder &, Location, Value ka, ValueRange) {
                  SmallVector<Value> rows;
                  for (int64_t i = 0; i < 8; ++i)
                    rows.push_back(vector::LoadOp::create(
                        b, loc, octType, in, inIndices(outer, ka, add(kc, idx(i)))));
                  SmallVector<Value> columns = transpose8x8(b, loc, rows);
                  for (int64_t i = 0; i < 8; ++i)
                    vector::StoreOp::create(b, loc, columns[i], out,
                                            outIndices(outer, add(ka, idx(i)), kc));
                  scf::YieldOp::create(b, loc);
                });
            scf::YieldOp::create(b, loc);
          });
    // The rest: a >= wholeA for every c, and c >= wholeC for a < wholeA.
    auto scalar = [&](int64_t c0, int64_t c1, int64_t a0, int64_t a1) {
      if (c0 >= c1 || a0 >= a1)
        return;
      scf::ForOp::create(
          b, loc, idx(c0), idx(c1), idx(1), ValueRange{},
          [&](OpBuilder &, Location, Value kc, ValueRange) {
            scf::ForOp::create(
                b, loc, idx(a0), idx(a1), idx(1), ValueRange{},
                [&](OpBuilder &, Location, Value ka, ValueRange) {
                  Value v = memref::LoadOp::create(b, loc, in, inIndices(outer, ka, kc));
                  memref::StoreOp::create(b, loc, v, out, outIndices(outer, ka, kc));
                  scf::YieldOp::create(b, loc);
                });
            scf::YieldOp::create(b, loc);
          });
    };
    scalar(0, sc, wholeA, sa);
    scalar(wholeC, sc, 0, wholeA);
  }

  linalg::TransposeOp op;
  ArrayRef<int64_t> perm;
  ArrayRef<int64_t> inShape;
  size_t r;
  int64_t a, c, ja;
  Value in, out;
};

} // namespace

Value mlir::smlir::codegen::buildTransposeKernel(OpBuilder &b,
                                                 linalg::TransposeOp op) {
  return TransposeKernelBuilder(b, op).build();
}
