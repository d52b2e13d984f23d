//===- UnsignedInsertionIndices.cpp - unsigned narrow positions -----------===//
//
// Works around MLIR 22's sparse insertion codegen, which sign-extends the
// narrow positions it loads (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_UNSIGNEDINSERTIONINDICES
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;

namespace {

/// Upstream's insertion functions (SparseTensorCodegen's
/// genInsertionCallHelper names them "_insert_<level types>_<shape>_...").
bool isInsertionFunction(func::FuncOp func) {
  return func.isPrivate() && func.getSymName().starts_with("_insert_");
}

/// A sign-extending cast of a narrow integer to index.
bool isNarrowToIndex(arith::IndexCastOp cast) {
  auto integer = dyn_cast<IntegerType>(cast.getIn().getType());
  return integer && integer.isSignless() && integer.getWidth() < 64 &&
         cast.getType().isIndex();
}

struct UnsignedInsertionIndicesPass
    : public smlir::impl::UnsignedInsertionIndicesBase<
          UnsignedInsertionIndicesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!isInsertionFunction(func))
        continue;
      SmallVector<arith::IndexCastOp> casts;
      func.walk([&](arith::IndexCastOp cast) {
        if (isNarrowToIndex(cast))
          casts.push_back(cast);
      });
      for (arith::IndexCastOp cast : casts) {
        OpBuilder b(cast);
        Value unsignedCast = arith::IndexCastUIOp::create(
            b, cast.getLoc(), cast.getType(), cast.getIn());
        cast.replaceAllUsesWith(unsignedCast);
        cast.erase();
      }
    }
  }
};

} // namespace
