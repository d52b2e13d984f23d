//===- SparseMLIROps.cpp - smlir operations -------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"

using namespace mlir;
using namespace mlir::smlir;

#define GET_OP_CLASSES
#include "SparseMLIR/IR/SparseMLIROps.cpp.inc"

RankedTensorType SparsifyOp::inferResultType(RankedTensorType source,
                                             EncodingAttrInterface encoding) {
  return RankedTensorType::get(
      source.getShape(), source.getElementType(),
      encoding.getSparseTensorEncoding(source.getRank()));
}

void SparsifyOp::build(OpBuilder &builder, OperationState &state, Value source,
                       SparsifierAttrInterface sparsifier,
                       EncodingAttrInterface encoding, StringAttr tensorName) {
  auto type = inferResultType(cast<RankedTensorType>(source.getType()),
                              encoding);
  build(builder, state, type, source, sparsifier, encoding, tensorName);
}

LogicalResult SparsifyOp::verify() {
  // Prefix every message with the tensor's user-facing name when known.
  auto emitError = [&]() {
    InFlightDiagnostic diag = emitOpError();
    if (std::optional<StringRef> name = getTensorName())
      diag << "tensor '" << *name << "': ";
    return diag;
  };
  auto sourceType = getSource().getType();
  auto resultType = getResult().getType();
  if (sparse_tensor::getSparseTensorEncoding(sourceType))
    return emitError() << "source must be a dense tensor, got " << sourceType;
  if (sourceType.getShape() != resultType.getShape() ||
      sourceType.getElementType() != resultType.getElementType())
    return emitError() << "result " << resultType
                       << " must have the shape and element type of the source "
                       << sourceType;

  EncodingAttrInterface encoding = getEncoding();
  if (failed(encoding.verifyShape(sourceType.getShape(), emitError)))
    return failure();
  SparsifierAttrInterface sparsifier = getSparsifier();
  if (sparsifier.needsOrdering() &&
      !isa<FloatType>(sourceType.getElementType()))
    return emitError() << "sparsifier " << sparsifier
                       << " compares magnitudes and needs a floating-point "
                          "tensor, got element type "
                       << sourceType.getElementType();
  if (failed(sparsifier.verifyShape(sourceType.getShape(), emitError)))
    return failure();

  RankedTensorType expected = inferResultType(sourceType, encoding);
  if (expected != resultType)
    return emitError() << "result type must be " << expected << " for encoding "
                       << encoding << ", got " << resultType;
  return success();
}
