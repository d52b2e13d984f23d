//===- MatchNM24Linear.cpp - the linears of a 2:4 weight ------------------===//
//
// A 2:4 weight is read as x @ W^T: a linalg.transpose [1, 0] into the right
// operand of a linalg.matmul, with element-wise extf generics looked
// through; the matmul's bias add and truncation become the kernel's
// epilogue.
//
//===----------------------------------------------------------------------===//

#include "MatchNM24Linear.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::smlir::nm24;

/// `op` is an all-parallel generic with one output whose body is the single
/// op `T` yielded.
template <typename T>
static T singleBodyOp(linalg::GenericOp op) {
  if (!op || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return nullptr;
  Block &body = op.getRegion().front();
  auto inner = dyn_cast<T>(&body.front());
  if (!inner || body.getTerminator()->getOperand(0) != inner->getResult(0))
    return nullptr;
  return inner;
}

/// The single reader of `v`, as a generic op.
static linalg::GenericOp singleGenericUser(Value v) {
  return v.hasOneUse() ? dyn_cast<linalg::GenericOp>(*v.getUsers().begin())
                       : nullptr;
}

/// Fills `linear`'s epilogue: y + bias[j] (identity map for y, (i, j) -> (j)
/// for the bias), then truncf to `element`, each only as the one reader of
/// the value before it.
static void matchEpilogue(WeightLinear &linear, Type element) {
  Value y = linear.matmul->getResult(0);
  MLIRContext *ctx = y.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap column = AffineMap::get(2, 0, getAffineDimExpr(1, ctx));
  linalg::GenericOp add = singleGenericUser(y);
  if (auto addf = singleBodyOp<arith::AddFOp>(add);
      addf && add.getNumDpsInputs() == 2 && add.getDpsInputs()[0] == y &&
      add.getIndexingMapsArray() ==
          SmallVector<AffineMap>{identity, column, identity} &&
      getElementTypeOrSelf(add.getResult(0).getType()).isF32()) {
    Block &body = add.getRegion().front();
    // The launch copies the bias in where the matmul is: it must exist there.
    Operation *biasDef = add.getDpsInputs()[1].getDefiningOp();
    bool available = !biasDef || (biasDef->getBlock() == add->getBlock() &&
                                  biasDef->isBeforeInBlock(linear.matmul));
    available &= cast<ShapedType>(add.getDpsInputs()[1].getType())
                     .hasStaticShape();
    if (available && ((addf.getLhs() == body.getArgument(0) &&
                       addf.getRhs() == body.getArgument(1)) ||
                      (addf.getLhs() == body.getArgument(1) &&
                       addf.getRhs() == body.getArgument(0)))) {
      linear.biasAdd = add;
      linear.bias = add.getDpsInputs()[1];
      y = add.getResult(0);
    }
  }
  linalg::GenericOp trunc = singleGenericUser(y);
  auto truncf = singleBodyOp<arith::TruncFOp>(trunc);
  if (truncf && trunc.getNumDpsInputs() == 1 &&
      truncf.getIn() == trunc.getRegion().front().getArgument(0) &&
      truncf.getType() == element &&
      llvm::all_of(trunc.getIndexingMapsArray(),
                   [&](AffineMap m) { return m == identity; }))
    linear.truncate = trunc;
}

/// `v` with an element-wise `arith.extf` generic looked through.
static Value stripExtF(Value v) {
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return v;
  Block &body = generic.getRegion().front();
  auto ext = dyn_cast<arith::ExtFOp>(&body.front());
  if (!ext || ext.getIn() != body.getArgument(0) ||
      body.getTerminator()->getOperand(0) != ext.getResult())
    return v;
  return generic.getDpsInputs()[0];
}

static bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

FailureOr<SmallVector<WeightLinear>>
mlir::smlir::nm24::collectLinears(Value weight, StringRef name) {
  SmallVector<WeightLinear> linears;
  auto fail = [&](Operation *op, const Twine &why) {
    return op->emitError("2:4 weight '")
           << name << "' cannot run on sparse tensor cores: " << why;
  };
  for (Operation *user : weight.getUsers()) {
    auto transpose = dyn_cast<linalg::TransposeOp>(user);
    if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
      return fail(user, "expected it to be read only as x @ W^T "
                        "(linalg.transpose [1, 0] into linalg.matmul)");
    SmallVector<Operation *> readers;
    for (Operation *u : transpose->getResult(0).getUsers()) {
      if (isa<linalg::GenericOp>(u) &&
          stripExtF(u->getResult(0)) == transpose->getResult(0)) {
        llvm::append_range(readers, u->getResult(0).getUsers());
        continue;
      }
      readers.push_back(u);
    }
    for (Operation *reader : readers) {
      auto matmul = dyn_cast<linalg::MatmulOp>(reader);
      if (!matmul || matmul.hasUserDefinedMaps() ||
          stripExtF(matmul.getInputs()[1]) != transpose->getResult(0))
        return fail(reader, "expected W^T to be the right operand of a "
                            "linalg.matmul");
      auto outType = cast<RankedTensorType>(matmul.getOutputs()[0].getType());
      if (!outType.getElementType().isF32() ||
          !isZeroFill(matmul.getOutputs()[0]))
        return fail(matmul, "expected a zero-filled f32 accumulator");
      Value x = stripExtF(matmul.getInputs()[0]);
      auto xType = cast<RankedTensorType>(x.getType());
      if (xType.getElementType() != getElementTypeOrSelf(weight.getType()) ||
          !xType.hasStaticShape() ||
          sparse_tensor::getSparseTensorEncoding(xType))
        return fail(matmul, "expected a dense, static x of the weight's "
                            "element type");
      linears.push_back({matmul, x, {}, {}, {}});
      matchEpilogue(linears.back(), getElementTypeOrSelf(weight.getType()));
    }
  }
  return linears;
}
