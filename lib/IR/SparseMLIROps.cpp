//===- SparseMLIROps.cpp - smlir operations -------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"

#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"

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
  if (isa<HybridEncodingAttr>(encoding))
    return emitError() << "encoding " << encoding
                       << " stores a tensor as two parts; smlir.sparsify "
                          "produces one tensor (hybrid weights are split by "
                          "linear regions, compile(mode=\"regions\"))";
  if (auto ell = dyn_cast<ELLEncodingAttr>(encoding); ell && !ell.getWidth())
    return emitError() << "encoding " << encoding
                       << " has no width (it is picked when a weight is "
                          "stored; its sparse_tensor form needs one): give "
                          "#smlir.ell<width = k>";
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

bool LinearOp::isWiderFloat(Type wide, Type narrow) {
  auto wideFloat = dyn_cast<FloatType>(wide);
  auto narrowFloat = dyn_cast<FloatType>(narrow);
  return wideFloat && narrowFloat &&
         wideFloat.getWidth() > narrowFloat.getWidth() &&
         APFloat::isRepresentableBy(narrowFloat.getFloatSemantics(),
                                    wideFloat.getFloatSemantics());
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
  auto element = dyn_cast<FloatType>(input.getElementType());
  if (!element || weight.getElementType() != element)
    return emitOpError() << "expects x and W of one floating-point element "
                            "type, got "
                         << input.getElementType() << " and "
                         << weight.getElementType();
  // y may be wider than x and W: the type the products accumulate in
  // (f16 x f16 -> f32, torch's F.linear in f16 on sparse tensor cores).
  Type resultElement = result.getElementType();
  if (resultElement != element && !isWiderFloat(resultElement, element))
    return emitOpError() << "expects a result element type of " << element
                         << " (x's and W's) or a wider float, got "
                         << resultElement;
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
  // Accumulating into given columns, y is wider than W's rows.
  if ((!getColumns() && mismatch(result.getDimSize(1), n)) ||
      mismatch(result.getDimSize(0), input.getDimSize(0)))
    return emitOpError() << "result " << result << " must be ["
                         << dimString(input.getDimSize(0)) << ", "
                         << dimString(n)
                         << "] (tokens of the input, outputs of the "
                         << orientation << " weight)";
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || mismatch(biasType.getDimSize(0), n) ||
        biasType.getElementType() != resultElement ||
        sparse_tensor::getSparseTensorEncoding(biasType))
      return emitOpError() << "bias must be a dense " << dimString(n)
                           << "-element " << resultElement << " vector, got "
                           << biasType;
  }
  return verifyAccumulateInto(n);
}

/// `into` / `columns` (accumulate-into): y = into + x * W^T, row n of W
/// added into column columns[n] of y where `columns` is given.
LogicalResult LinearOp::verifyAccumulateInto(int64_t n) {
  Value into = getInto(), columns = getColumns();
  if (!into) {
    if (columns)
      return emitOpError() << "columns name where W's rows go in the y it "
                              "accumulates into: they need `into`";
    return success();
  }
  RankedTensorType result = getResultType();
  if (into.getType() != result)
    return emitOpError() << "accumulates into " << into.getType()
                         << ", which must be the result's type " << result;
  if (getBias())
    return emitOpError() << "accumulates into y with a bias: the bias is "
                            "added by the kernel that writes y first, not "
                            "by one accumulating into it";
  if (getOrientation() != WeightOrientation::OutIn)
    return emitOpError() << "accumulates into y only for an out_in weight "
                            "(W[N, K])";
  if (!columns) // (y is then [M, N], checked above)
    return success();
  auto columnsType = cast<RankedTensorType>(columns.getType());
  auto element = dyn_cast<IntegerType>(columnsType.getElementType());
  if (columnsType.getRank() != 1 || !element ||
      (element.getWidth() != 32 && element.getWidth() != 64) ||
      sparse_tensor::getSparseTensorEncoding(columnsType) ||
      (!ShapedType::isDynamic(columnsType.getDimSize(0)) &&
       !ShapedType::isDynamic(n) && columnsType.getDimSize(0) != n))
    return emitOpError() << "columns must be a dense " << dimString(n)
                         << "-element i32 or i64 vector (one y column per row "
                            "of W), got "
                         << columnsType;
  return success();
}

LogicalResult SampledMatmulOp::verify() {
  RankedTensorType lhs = getLhsType(), rhs = getRhsType(),
                   pattern = getPatternType();
  auto result = cast<RankedTensorType>(getResult().getType());
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || pattern.getRank() != 2)
    return emitOpError() << "expects 2-d operands and pattern, got " << lhs
                         << ", " << rhs << " and " << pattern;
  if (sparse_tensor::getSparseTensorEncoding(lhs) ||
      sparse_tensor::getSparseTensorEncoding(rhs))
    return emitOpError() << "expects dense operands (only the pattern is "
                            "sparse), got "
                         << lhs << " and " << rhs;
  if (!sparse_tensor::getSparseTensorEncoding(pattern))
    return emitOpError() << "expects a pattern with a #sparse_tensor.encoding "
                            "(its stored positions are the sampled ones), got "
                         << pattern;
  auto element = dyn_cast<FloatType>(lhs.getElementType());
  if (!element || rhs.getElementType() != element ||
      pattern.getElementType() != element)
    return emitOpError() << "expects operands and pattern of one "
                            "floating-point element type, got "
                         << lhs.getElementType() << ", "
                         << rhs.getElementType() << " and "
                         << pattern.getElementType();
  if (result != pattern)
    return emitOpError() << "result must have the pattern's type " << pattern
                         << " (the same stored positions), got " << result;
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  int64_t lhsT = lhs.getDimSize(getLhsContractionDim());
  int64_t lhsM = lhs.getDimSize(1 - getLhsContractionDim());
  int64_t rhsT = rhs.getDimSize(getRhsContractionDim());
  int64_t rhsN = rhs.getDimSize(1 - getRhsContractionDim());
  if (mismatch(lhsT, rhsT))
    return emitOpError() << "contraction dimensions differ: lhs "
                         << stringifyOperandLayout(getLhsLayout()) << " " << lhs
                         << " has " << dimString(lhsT) << ", rhs "
                         << stringifyOperandLayout(getRhsLayout()) << " " << rhs
                         << " has " << dimString(rhsT);
  if (mismatch(lhsM, pattern.getDimSize(0)) ||
      mismatch(rhsN, pattern.getDimSize(1)))
    return emitOpError() << "pattern " << pattern << " must be ["
                         << dimString(lhsM) << ", " << dimString(rhsN)
                         << "] (rows of the lhs, columns of the rhs as read)";
  return success();
}

LogicalResult Permute2Op::verify() {
  int64_t lanes = getLow().getType().getNumElements();
  if (getIndex().getType().getNumElements() != lanes)
    return emitOpError() << "expects one index per lane (" << lanes
                         << "), got " << getIndex().getType();
  if (lanes != 8 && lanes != 16)
    return emitOpError() << "expects 8 or 16 lanes (AVX-512's 256- and "
                            "512-bit vpermi2ps), got "
                         << getLow().getType();
  return success();
}

LogicalResult GatherRowsOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (!sparse_tensor::getSparseTensorEncoding(table) || table.getRank() != 2)
    return emitOpError() << "expects a sparse 2-d table, got " << table;
  if (sparse_tensor::getSparseTensorEncoding(indices) ||
      sparse_tensor::getSparseTensorEncoding(result))
    return emitOpError() << "expects dense indices and result, got "
                         << indices << " and " << result;
  if (!indices.getElementType().isSignlessInteger())
    return emitOpError() << "expects integer indices, got "
                         << indices.getElementType();
  if (result.getElementType() != table.getElementType())
    return emitOpError() << "expects the table's element type "
                         << table.getElementType() << " in the result, got "
                         << result.getElementType();
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  if (result.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError() << "expects a result of the indices' shape followed "
                            "by the table's row length ("
                         << table.getDimSize(1) << "), got " << result;
  return success();
}

LogicalResult DotBF16PairsOp::verify() {
  int64_t lanes = getAcc().getType().getNumElements();
  if (lanes != 4 && lanes != 8 && lanes != 16)
    return emitOpError() << "expects 4, 8 or 16 f32 lanes (vdpbf16ps's 128-, "
                            "256- and 512-bit forms), got "
                         << getAcc().getType();
  if (getA().getType().getNumElements() != 2 * lanes)
    return emitOpError() << "expects two bf16 lanes per f32 lane ("
                         << 2 * lanes << "), got " << getA().getType();
  return success();
}

/// `%a..., %h attr-dict : type(%a)..., type(%h) -> type(result)`: the
/// last operand is h, the ones before it A.
ParseResult SpMMOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Type> types;
  Type resultType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonTypeList(types) || parser.parseArrow() ||
      parser.parseType(resultType))
    return failure();
  if (operands.size() < 2)
    return parser.emitError(loc, "expects A's operands, then h");
  if (parser.resolveOperands(operands, types, loc, result.operands))
    return failure();
  result.addTypes(resultType);
  return success();
}

void SpMMOp::print(OpAsmPrinter &printer) {
  printer << ' ' << getOperands();
  printer.printOptionalAttrDict((*this)->getAttrs());
  printer << " : " << getOperandTypes() << " -> " << getResult().getType();
}

bool SpMMOp::isCSRMatrix(RankedTensorType type) {
  if (!sparse_tensor::getSparseTensorEncoding(type) || type.getRank() != 2)
    return false;
  sparse_tensor::SparseTensorType st(type);
  return st.isIdentity() && st.isDenseLvl(0) && st.isCompressedLvl(1);
}

/// The form with A as one CSR tensor, [M, K] agreeing with h and the
/// result where static.
static LogicalResult verifySparseMatrix(SpMMOp op, RankedTensorType a,
                                        RankedTensorType h,
                                        RankedTensorType result) {
  if (!SpMMOp::isCSRMatrix(a))
    return op.emitOpError() << "expects A as one CSR tensor (dense then "
                               "compressed levels, identity map), got "
                            << a;
  if (a.getElementType() != h.getElementType() ||
      a.getElementType() != result.getElementType())
    return op.emitOpError() << "expects A, h and result of one element type, "
                               "got "
                            << a.getElementType() << ", " << h.getElementType()
                            << " and " << result.getElementType();
  auto clash = [](int64_t x, int64_t y) {
    return !ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y;
  };
  if (h.getRank() == 2 && clash(a.getDimSize(1), h.getDimSize(0)))
    return op.emitOpError() << "expects h's rows to be A's columns, got " << a
                            << " and " << h;
  if (result.getRank() == 2 && clash(a.getDimSize(0), result.getDimSize(0)))
    return op.emitOpError() << "expects the result's rows to be A's, got " << a
                            << " and " << result;
  return success();
}

LogicalResult SpMMOp::verify() {
  auto type = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  RankedTensorType h = type(getH()), result = type(getResult());
  if (getMatrix().size() != 1 && getMatrix().size() != 3)
    return emitOpError() << "expects A as its three CSR buffers or as one CSR "
                            "tensor, got "
                         << getMatrix().size() << " operands before h";
  if (h.getRank() == 2 && result.getRank() == 2 &&
      (ShapedType::isDynamic(h.getDimSize(1)) ||
       h.getDimSize(1) != result.getDimSize(1)))
    return emitOpError() << "expects a static feature count shared by h and "
                            "the result, got "
                         << h << " and " << result;
  for (RankedTensorType t : {h, result})
    if (sparse_tensor::getSparseTensorEncoding(t))
      return emitOpError() << "expects a dense h and result, got " << t;
  if (h.getRank() != 2 || result.getRank() != 2)
    return emitOpError() << "expects a 2-d h and result, got " << h << " and "
                         << result;
  if (hasSparseMatrix())
    return verifySparseMatrix(*this, type(getMatrix()[0]), h, result);
  RankedTensorType pos = type(getMatrix()[0]), crd = type(getMatrix()[1]),
                   values = type(getMatrix()[2]);
  for (RankedTensorType t : {pos, crd, values})
    if (sparse_tensor::getSparseTensorEncoding(t))
      return emitOpError() << "expects dense tensors (A is given by its CSR "
                              "buffers), got "
                           << t;
  if (pos.getRank() != 1 || crd.getRank() != 1 || values.getRank() != 1)
    return emitOpError() << "expects 1-d positions, coordinates and values, "
                            "got "
                         << pos << ", " << crd << " and " << values;
  if (!pos.getElementType().isSignlessInteger() ||
      !crd.getElementType().isSignlessInteger())
    return emitOpError() << "expects integer positions and coordinates, got "
                         << pos.getElementType() << " and "
                         << crd.getElementType();
  auto element = dyn_cast<FloatType>(values.getElementType());
  if (!element || h.getElementType() != element ||
      result.getElementType() != element)
    return emitOpError() << "expects values, h and result of one "
                            "floating-point element type, got "
                         << values.getElementType() << ", "
                         << h.getElementType() << " and "
                         << result.getElementType();
  int64_t rows = pos.getDimSize(0), m = result.getDimSize(0);
  if (!ShapedType::isDynamic(rows) && !ShapedType::isDynamic(m) &&
      rows != m + 1)
    return emitOpError() << "expects " << m + 1
                         << " positions (result rows + 1), got " << pos;
  return success();
}
