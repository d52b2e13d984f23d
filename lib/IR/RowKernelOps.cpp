//===- RowKernelOps.cpp - smlir.sddmm_rows and smlir.sparse_attention -----===//
//
// The verifiers of the two ops over a CSR mask's rows (given by its
// buffers) with dense operands read by rows at the stored columns.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::smlir;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

bool staticMismatch(int64_t x, int64_t y) {
  return !ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y;
}

/// Dense tensors; 1-d integer positions and coordinates.
LogicalResult verifyMask(Operation *op, Value pos, Value crd,
                         ArrayRef<Value> all) {
  for (Value v : all)
    if (sparse_tensor::getSparseTensorEncoding(v.getType()))
      return op->emitOpError() << "expects dense tensors (the mask is given "
                                  "by its CSR buffers), got "
                               << v.getType();
  if (typeOf(pos).getRank() != 1 || typeOf(crd).getRank() != 1)
    return op->emitOpError() << "expects 1-d positions and coordinates, got "
                             << pos.getType() << " and " << crd.getType();
  if (!typeOf(pos).getElementType().isSignlessInteger() ||
      !typeOf(crd).getElementType().isSignlessInteger())
    return op->emitOpError()
           << "expects integer positions and coordinates, got "
           << typeOf(pos).getElementType() << " and "
           << typeOf(crd).getElementType();
  return success();
}

/// f32 operands of the given ranks.
LogicalResult verifyOperands(Operation *op, ArrayRef<Value> values,
                             ArrayRef<int64_t> ranks, StringRef names) {
  for (auto [v, rank] : llvm::zip_equal(values, ranks))
    if (typeOf(v).getRank() != rank || !typeOf(v).getElementType().isF32())
      return op->emitOpError() << "expects f32 " << names << ", got "
                               << v.getType();
  return success();
}

/// G entries reduced together by a transpose tree of W-lane vectors.
LogicalResult verifyGroup(Operation *op, int64_t group, int64_t lanes) {
  if (lanes < 2 || lanes > 32 || !llvm::isPowerOf2_64(lanes) || group < 1 ||
      group > lanes || !llvm::isPowerOf2_64(group))
    return op->emitOpError()
           << "expects lanes a power of two from 2 to 32 and group a power "
              "of two up to lanes, got lanes = "
           << lanes << " and group = " << group;
  return success();
}

/// Batch entries and rows (positions = rows + 1) agree where static.
LogicalResult verifyRows(Operation *op, Value pos, RankedTensorType lhs,
                         ArrayRef<RankedTensorType> batched) {
  for (RankedTensorType t : batched)
    if (staticMismatch(t.getDimSize(0), lhs.getDimSize(0)))
      return op->emitOpError() << "expects one batch size, got " << lhs
                               << " and " << t;
  int64_t rows = lhs.getDimSize(1);
  if (!ShapedType::isDynamic(rows) &&
      staticMismatch(typeOf(pos).getDimSize(0), rows + 1))
    return op->emitOpError() << "expects " << rows + 1 << " positions (rows + "
                             << "1), got " << pos.getType();
  return success();
}

} // namespace

int64_t SDDMMRowsOp::getBlockColumns() {
  int64_t dim = typeOf(getA()).getDimSize(2);
  return std::max<int64_t>(16, getL1Budget() / (4 * dim));
}

LogicalResult SDDMMRowsOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMask(op, getPositions(), getCoordinates(),
                        {getPositions(), getCoordinates(), getValues(), getA(),
                         getB(), getResult()})) ||
      failed(verifyOperands(op, {getValues(), getA(), getB(), getResult()},
                            {1, 3, 3, 2},
                            "values [nnz], a [B, M, D], b [B, N, D] and "
                            "result [B, nnz]")) ||
      failed(verifyGroup(op, getGroup(), getLanes())))
    return failure();
  RankedTensorType a = typeOf(getA()), b = typeOf(getB()),
                   result = typeOf(getResult());
  if (ShapedType::isDynamic(a.getDimSize(2)) ||
      a.getDimSize(2) != b.getDimSize(2))
    return emitOpError() << "expects a static contraction D shared by a and "
                            "b, got "
                         << a << " and " << b;
  if (failed(verifyRows(op, getPositions(), a, {b, result})))
    return failure();
  int64_t nnz = result.getDimSize(1);
  for (Value v : {getCoordinates(), getValues()})
    if (staticMismatch(typeOf(v).getDimSize(0), nnz))
      return emitOpError() << "expects the result's " << nnz
                           << " entries per batch entry, got " << v.getType();
  if (getTileRows() < 1 || getTileRows() > 1024 || getL1Budget() < 0 ||
      getMinReuse() < 0 || getPrefetch() < 0 || getPrefetch() > 64)
    return emitOpError() << "expects tile_rows 1 to 1024, l1_budget and "
                            "min_reuse >= 0 and prefetch 0 to 64";
  return success();
}

LogicalResult SparseAttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMask(op, getPositions(), getCoordinates(),
                        {getPositions(), getCoordinates(), getQ(), getK(),
                         getV(), getResult()})) ||
      failed(verifyOperands(op, {getQ(), getK(), getV(), getResult()},
                            {3, 3, 3, 3},
                            "q [B, M, D], k [B, N, D], v [B, N, F] and "
                            "result [B, M, F]")) ||
      failed(verifyGroup(op, getGroup(), getLanes())))
    return failure();
  RankedTensorType q = typeOf(getQ()), k = typeOf(getK()), v = typeOf(getV()),
                   result = typeOf(getResult());
  if (ShapedType::isDynamic(q.getDimSize(2)) ||
      q.getDimSize(2) != k.getDimSize(2))
    return emitOpError() << "expects a static head size D shared by q and k, "
                            "got "
                         << q << " and " << k;
  if (ShapedType::isDynamic(v.getDimSize(2)) ||
      v.getDimSize(2) != result.getDimSize(2))
    return emitOpError() << "expects a static value size F shared by v and "
                            "the result, got "
                         << v << " and " << result;
  // A row's scores sit in a stack buffer of N floats.
  if (ShapedType::isDynamic(k.getDimSize(1)) ||
      k.getDimSize(1) != v.getDimSize(1) || k.getDimSize(1) > (1 << 18))
    return emitOpError() << "expects a static column count N (at most "
                         << (1 << 18) << ") shared by k and v, got " << k
                         << " and " << v;
  if (staticMismatch(q.getDimSize(1), result.getDimSize(1)))
    return emitOpError() << "expects the result's rows to be q's, got " << q
                         << " and " << result;
  return verifyRows(op, getPositions(), q, {k, v, result});
}
