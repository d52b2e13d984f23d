//===- LowerRowGathers.cpp - smlir.gather_rows of CSR and n:m tables ------===//
//
// For each index: the result row is zero-filled, then the table row's
// stored entries are written at their columns (O(D + stored entries), the
// table's buffers read in place, no dense copy). CSR rows are
// [positions[r], positions[r + 1]); an n:m row stores D / m * n entries from
// r * D / m * n, entry q at column (q / n) * m + its in-group coordinate.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/KernelBuilder.h"
#include "../Codegen/RowStorage.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERROWGATHERS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

namespace {

class GatherBuilder : KernelBuilder {
public:
  GatherBuilder(OpBuilder &b, GatherRowsOp op, RowStorage storage)
      : KernelBuilder(b, op.getLoc()), op(op), storage(storage) {}

  Value build() {
    auto tableType = cast<RankedTensorType>(op.getTable().getType());
    auto indicesType = cast<RankedTensorType>(op.getIndices().getType());
    auto resultType = cast<RankedTensorType>(op.getResult().getType());
    int64_t rank = indicesType.getRank();
    Value table = op.getTable();
    values = ToValuesOp::create(b, loc, table);
    coordinates = ToCoordinatesOp::create(b, loc, table, storage.csr ? 1 : 2);
    if (storage.csr)
      positions = ToPositionsOp::create(b, loc, table, 1);
    Value indices = bufferization::ToBufferOp::create(
        b, loc,
        MemRefType::get(indicesType.getShape(), indicesType.getElementType()),
        op.getIndices(), /*read_only=*/true);
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < rank; ++d)
      if (indicesType.isDynamicDim(d))
        sizes.push_back(memref::DimOp::create(b, loc, indices, d));
    Value result = memref::AllocOp::create(
        b, loc,
        MemRefType::get(resultType.getShape(), resultType.getElementType()),
        sizes, b.getI64IntegerAttr(64));
    // One loop over the indices of any rank: both buffers as 1-d / 2-d.
    Value flatIndices = indices;
    y = result;
    if (rank > 1) {
      SmallVector<ReassociationIndices> all{
          llvm::to_vector(llvm::seq<int64_t>(0, rank))};
      flatIndices = memref::CollapseShapeOp::create(b, loc, indices, all);
      SmallVector<ReassociationIndices> rowsThenD{all[0], {rank}};
      y = memref::CollapseShapeOp::create(b, loc, result, rowsThenD);
    }
    rows = tableType.getDimSize(0);
    D = tableType.getDimSize(1);
    zero = arith::ConstantOp::create(b, loc, resultType.getElementType(),
                                     b.getZeroAttr(resultType.getElementType()));
    Value count = memref::DimOp::create(b, loc, flatIndices, 0);
    scf::ForOp::create(b, loc, idx(0), count, idx(1), ValueRange{},
                       [&](OpBuilder &, Location, Value t, ValueRange) {
                         gatherRow(t, load(flatIndices, {t}));
                         scf::YieldOp::create(b, loc);
                       });
    return bufferization::ToTensorOp::create(b, loc, resultType, result,
                                             /*restrict=*/true,
                                             /*writable=*/true);
  }

private:
  /// y[t, :] = table[index, :], asserting 0 <= index < rows (torch-mlir's
  /// checks, kept: an index computed in the graph is checked nowhere else).
  void gatherRow(Value t, Value index) {
    Type indexType = index.getType();
    Value notNegative = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sge, index,
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(indexType, 0)));
    Value belowRows = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::slt, index,
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(indexType, rows)));
    Value inRange = arith::AndIOp::create(b, loc, notNegative, belowRows);
    cf::AssertOp::create(b, loc, inRange,
                         "embedding index out of range of the sparse table");
    Value r = arith::IndexCastOp::create(b, loc, b.getIndexType(), index);
    scf::ForOp::create(b, loc, idx(0), idx(D), idx(1), ValueRange{},
                       [&](OpBuilder &, Location, Value d, ValueRange) {
                         memref::StoreOp::create(b, loc, zero, y, ValueRange{t, d});
                         scf::YieldOp::create(b, loc);
                       });
    Value lo, hi;
    if (storage.csr) {
      lo = toIndex(load(positions, {r}));
      hi = toIndex(load(positions, {add(r, idx(1))}));
    } else {
      int64_t perRow = D / storage.m * storage.n;
      lo = mul(r, idx(perRow));
      hi = add(lo, idx(perRow));
    }
    scf::ForOp::create(
        b, loc, lo, hi, idx(1), ValueRange{},
        [&](OpBuilder &, Location, Value p, ValueRange) {
          Value column = toIndex(load(coordinates, {p}));
          if (!storage.csr) {
            Value q = arith::SubIOp::create(b, loc, p, lo);
            Value group = arith::DivUIOp::create(b, loc, q, idx(storage.n));
            column = add(mul(group, idx(storage.m)), column);
          }
          memref::StoreOp::create(b, loc, load(values, {p}), y,
                                  ValueRange{t, column});
          scf::YieldOp::create(b, loc);
        });
  }

  GatherRowsOp op;
  RowStorage storage;
  Value values, coordinates, positions, y, zero;
  int64_t rows = 0, D = 0;
};

struct LowerRowGathersPass
    : public smlir::impl::LowerRowGathersBase<LowerRowGathersPass> {
  void runOnOperation() override {
    SmallVector<GatherRowsOp> ops;
    getOperation().walk([&](GatherRowsOp op) { ops.push_back(op); });
    for (GatherRowsOp op : ops) {
      auto table = cast<RankedTensorType>(op.getTable().getType());
      std::optional<RowStorage> storage = rowStorage(table);
      auto indices = cast<RankedTensorType>(op.getIndices().getType());
      if (!storage || indices.getRank() == 0) {
        op.emitOpError() << "has no lowering for a table " << table
                         << " and indices " << indices
                         << " (CSR or n:m tables, indices of rank >= 1)";
        signalPassFailure();
        continue;
      }
      OpBuilder b(op);
      Value result = GatherBuilder(b, op, *storage).build();
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }
};

} // namespace
