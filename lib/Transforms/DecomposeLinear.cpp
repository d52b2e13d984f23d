//===- DecomposeLinear.cpp - smlir.linear as a W * x^T linalg.generic -----===//
//
// The linears no micro-kernel took become what upstream sparsification
// lowers fast for a sparse W: W's rows outermost, a contiguous axpy over the
// activations,
//
//   xT = transpose(x); yT[n, m] += W[n, k] * xT[k, m]; y = transpose(yT)
//
// (W[k, n] through its map for an in_out weight; operands extended in the
// body where y is wider), then the bias added.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_DECOMPOSELINEAR
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

static Value transpose2d(OpBuilder &b, Location loc, Value source) {
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, source);
  std::swap(sizes[0], sizes[1]);
  Type elementType = cast<RankedTensorType>(source.getType()).getElementType();
  Value init = tensor::EmptyOp::create(b, loc, sizes, elementType);
  return linalg::TransposeOp::create(b, loc, source, init,
                                     ArrayRef<int64_t>{1, 0})
      .getResult()[0];
}

static Value decompose(OpBuilder &b, LinearOp linear) {
  Location loc = linear.getLoc();
  MLIRContext *ctx = b.getContext();
  Value x = linear.getInput(), weight = linear.getWeight();
  bool weightIsKN = linear.getOrientation() == WeightOrientation::InOut;
  Type elementType = linear.getResultType().getElementType();
  // xT[k, m]: activations feature-major so the inner loop is contiguous.
  Value xT = transpose2d(b, loc, x);
  SmallVector<OpFoldResult> ytSizes = {
      tensor::getMixedSize(b, loc, weight, linear.getWeightOutputDim()),
      tensor::getMixedSize(b, loc, x, 0)};
  Value zero = arith::ConstantOp::create(b, loc, elementType,
                                         b.getZeroAttr(elementType));
  Value ytInit =
      linalg::FillOp::create(
          b, loc, ValueRange{zero},
          ValueRange{tensor::EmptyOp::create(b, loc, ytSizes, elementType)})
          .getResult(0);
  AffineExpr n, m, k;
  bindDims(ctx, n, m, k);
  SmallVector<AffineExpr> wIndex = {n, k};
  if (weightIsKN)
    std::swap(wIndex[0], wIndex[1]);
  SmallVector<AffineMap> maps = {AffineMap::get(3, 0, wIndex, ctx),
                                 AffineMap::get(3, 0, {k, m}, ctx),
                                 AffineMap::get(3, 0, {n, m}, ctx)};
  auto kernel = linalg::GenericOp::create(
      b, loc, ytInit.getType(), ValueRange{weight, xT}, ValueRange{ytInit},
      maps,
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                    utils::IteratorType::parallel,
                                    utils::IteratorType::reduction},
      [&](OpBuilder &nested, Location l, ValueRange args) {
        // A wider result (f16 x f16 -> f32) accumulates extended operands,
        // as torch's F.linear does.
        auto extend = [&](Value v) -> Value {
          return v.getType() == elementType
                     ? v
                     : arith::ExtFOp::create(nested, l, elementType, v);
        };
        Value wValue = extend(args[0]);
        Value xValue = extend(args[1]);
        Value product = arith::MulFOp::create(nested, l, wValue, xValue);
        Value sum = arith::AddFOp::create(nested, l, args[2], product);
        linalg::YieldOp::create(nested, l, sum);
      });
  Value y = transpose2d(b, loc, kernel.getResult(0));
  if (y.getType() != linear.getResultType())
    y = tensor::CastOp::create(b, loc, linear.getResultType(), y);
  Value bias = linear.getBias();
  if (!bias)
    return y;
  // y[m, n] += bias[n], in place.
  AffineMap id = b.getMultiDimIdentityMap(2);
  AffineMap row = AffineMap::get(2, 0, {b.getAffineDimExpr(1)}, ctx);
  return linalg::GenericOp::create(
             b, loc, y.getType(), ValueRange{bias}, ValueRange{y},
             ArrayRef<AffineMap>{row, id},
             ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                           utils::IteratorType::parallel},
             [&](OpBuilder &nested, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   nested, l,
                   ValueRange{arith::AddFOp::create(nested, l, args[1],
                                                    args[0])});
             })
      .getResult(0);
}

struct DecomposeLinearPass
    : public smlir::impl::DecomposeLinearBase<DecomposeLinearPass> {
  void runOnOperation() override {
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp linear) { linears.push_back(linear); });
    for (LinearOp linear : linears) {
      // Accumulate-into is the micro-kernels' output stage; its generic
      // form (a scatter-add into given columns) is not written here.
      if (linear.getInto()) {
        linear.emitOpError()
            << "accumulates into y (`into`), which only the CPU "
               "micro-kernels of smlir-lower-sparse-linear lower; this "
               "linear has none (a static f32 or half x and a CSR, ELL, BSR, "
               "n:m or dense W)";
        return signalPassFailure();
      }
      OpBuilder b(linear);
      linear.getResult().replaceAllUsesWith(decompose(b, linear));
      linear.erase();
    }
  }
};

} // namespace
