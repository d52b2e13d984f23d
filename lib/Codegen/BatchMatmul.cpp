//===- BatchMatmul.cpp - register tiles for dense batch_matmul ------------===//
//
// A dense f32 linalg.batch_matmul (attention's q * k^T and p * v) needs no
// packing: its right operand's rows are contiguous along n, so a tile of
// R rows of y x U vectors along n accumulates broadcast(a[m, k]) * b[k, n:]
// and is stored as it is.
//
//===----------------------------------------------------------------------===//

#include "BatchMatmul.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

static bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

bool mlir::smlir::codegen::isPlainBatchMatmul(linalg::BatchMatmulOp op) {
  auto isStaticDenseF32 = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && type.getElementType().isF32() &&
           !sparse_tensor::getSparseTensorEncoding(type);
  };
  auto nonEmpty = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements() > 0;
  };
  return !op.hasUserDefinedMaps() && op.hasPureTensorSemantics() &&
         isZeroFill(op.getDpsInits()[0]) &&
         llvm::all_of(op->getOperands(), isStaticDenseF32) &&
         llvm::all_of(op->getOperands(), nonEmpty);
}

namespace {

/// Emits y[b, m, n] = sum_k A[b, m, k] * B[b, k, n] as register tiles of
/// R rows of y x U vectors of V lanes along n: per k, U contiguous loads of
/// B's row k and R broadcasts of A feed R * U independent FMA chains; the
/// tile is stored as R rows of U vectors. Threads split (batch, row block).
class BatchMatmulBuilder : KernelBuilder {
public:
  BatchMatmulBuilder(OpBuilder &b, Location loc, linalg::BatchMatmulOp op,
                     int64_t rows, int64_t vectors, int64_t lanes)
      : KernelBuilder(b, loc), op(op), R(rows), U(vectors), V(lanes),
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
  /// Lanes of the vector at column n that lie inside y (null: all of them,
  /// N is a multiple of the tile width).
  Value laneMask(Value n) {
    if (N % (U * V) == 0)
      return {};
    Value left = arith::SubIOp::create(b, loc, idx(N), n);
    return prefixMask(V, left);
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

  linalg::BatchMatmulOp op;
  int64_t R, U, V;
  int64_t batches = 0, M = 0, N = 0, K = 0;
  Type f32;
  VectorType vecType;
  Value a, w, y;
};

} // namespace

Value mlir::smlir::codegen::buildBatchMatmulKernel(OpBuilder &b, Location loc,
                                      linalg::BatchMatmulOp op, int64_t rows,
                                      int64_t vectors, int64_t lanes) {
  return BatchMatmulBuilder(b, loc, op, rows, vectors, lanes).build();
}
