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

static std::string dimString(int64_t size) {
  return ShapedType::isDynamic(size) ? "?" : std::to_string(size);
}

LogicalResult LinearOp::verify() {
  RankedTensorType input = getInputType(), weight = getWeightType(),
                   result = getResultType();
  if (input.getRank() != 2 || weight.getRank() != 2 || result.getRank() != 2)
    return emitOpError() << "expects a 2-d input, weight and result, got "
                         << input << ", " << weight << " and " << result;
  if (sparse_tensor::getSparseTensorEncoding(input) ||
      sparse_tensor::getSparseTensorEncoding(result))
    return emitOpError() << "expects a dense input and result (only the "
                            "weight may be sparse)";
  Type element = input.getElementType();
  if (!isa<FloatType>(element) || weight.getElementType() != element ||
      result.getElementType() != element)
    return emitOpError() << "expects one floating-point element type, got "
                         << input.getElementType() << ", "
                         << weight.getElementType() << " and "
                         << result.getElementType();
  // Dimensions must agree where both sides are static.
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  int64_t k = weight.getDimSize(getWeightReductionDim());
  int64_t n = weight.getDimSize(getWeightOutputDim());
  StringRef orientation = stringifyWeightOrientation(getOrientation());
  if (mismatch(input.getDimSize(1), k))
    return emitOpError() << "input has " << input.getDimSize(1)
                         << " features but the " << orientation << " weight "
                         << weight << " reads " << k;
  if (mismatch(result.getDimSize(1), n) ||
      mismatch(result.getDimSize(0), input.getDimSize(0)))
    return emitOpError() << "result " << result << " must be ["
                         << dimString(input.getDimSize(0)) << ", "
                         << dimString(n)
                         << "] (tokens of the input, outputs of the "
                         << orientation << " weight)";
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || mismatch(biasType.getDimSize(0), n) ||
        biasType.getElementType() != element ||
        sparse_tensor::getSparseTensorEncoding(biasType))
      return emitOpError() << "bias must be a dense " << dimString(n)
                           << "-element "
                           << element << " vector, got " << biasType;
  }
  return success();
}
