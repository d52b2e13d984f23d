//===- MatchNM24Linear.cpp - the linears of a 2:4 weight ------------------===//
//
// A 2:4 weight is read by `smlir.linear` ops (x @ W^T, out_in, f16/bf16
// operands accumulated into an f32 result: what smlir-raise-linear makes of
// torch-mlir's F.linear); a bias operand and the linear's following bias add
// and truncation become the kernel's epilogue.
//
//===----------------------------------------------------------------------===//

#include "MatchNM24Linear.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"

using namespace mlir;
using namespace mlir::smlir;
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

/// Fills `linear`'s epilogue: without a bias operand, y + bias[j] (identity
/// map for y, (i, j) -> (j) for the bias); then truncf to `element`, each
/// only as the one reader of the value before it.
static void matchEpilogue(WeightLinear &linear, Type element) {
  Value y = linear.op.getResult();
  MLIRContext *ctx = y.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap column = AffineMap::get(2, 0, getAffineDimExpr(1, ctx));
  linalg::GenericOp add = linear.bias ? nullptr : singleGenericUser(y);
  if (auto addf = singleBodyOp<arith::AddFOp>(add);
      addf && add.getNumDpsInputs() == 2 && add.getDpsInputs()[0] == y &&
      add.getIndexingMapsArray() ==
          SmallVector<AffineMap>{identity, column, identity} &&
      getElementTypeOrSelf(add.getResult(0).getType()).isF32()) {
    Block &body = add.getRegion().front();
    // The launch copies the bias in where the linear is: it must exist there.
    Operation *biasDef = add.getDpsInputs()[1].getDefiningOp();
    bool available = !biasDef || (biasDef->getBlock() == add->getBlock() &&
                                  biasDef->isBeforeInBlock(linear.op));
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

FailureOr<SmallVector<WeightLinear>>
mlir::smlir::nm24::collectLinears(Value weight, StringRef name) {
  SmallVector<WeightLinear> linears;
  auto fail = [&](Operation *op, const Twine &why) {
    return op->emitError("2:4 weight '")
           << name << "' cannot run on sparse tensor cores: " << why;
  };
  Type element = getElementTypeOrSelf(weight.getType());
  // Readers in program order, not use-list order (which depends on how the
  // IR was built): the order of the linears' scratch arguments.
  SmallVector<Operation *> readers;
  weight.getParentRegion()->walk([&](Operation *op) {
    if (llvm::is_contained(op->getOperands(), weight))
      readers.push_back(op);
  });
  for (Operation *user : readers) {
    auto linear = dyn_cast<LinearOp>(user);
    if (!linear || linear.getWeight() != weight)
      return fail(user, "expected it to be read only as x @ W^T by "
                        "smlir.linear (smlir-raise-linear raises torch-mlir's "
                        "linalg.matmul of its linalg.transpose [1, 0] into a "
                        "zero-filled accumulator)");
    if (linear.getOrientation() != WeightOrientation::OutIn)
      return fail(linear, "expected an out_in smlir.linear (x @ W^T)");
    if (linear.getInto())
      return fail(linear, "expected a linear writing y, not accumulating "
                          "into one (`into`: CPU micro-kernels only)");
    if (!linear.getResultType().getElementType().isF32())
      return fail(linear, "expected an f32 result (the kernel accumulates "
                          "in f32)");
    // The verifier gives x the weight's element type.
    if (!linear.getInputType().hasStaticShape())
      return fail(linear, "expected an x of static shape");
    WeightLinear &match = linears.emplace_back();
    match.op = linear;
    match.x = linear.getInput();
    match.bias = linear.getBias();
    // A bias operand has y's element type (f32) and W's outputs, which are
    // static: only its own type may still be dynamic.
    if (match.bias && !cast<ShapedType>(match.bias.getType()).hasStaticShape())
      return fail(linear, "expected a bias of static shape");
    matchEpilogue(match, element);
  }
  return linears;
}
