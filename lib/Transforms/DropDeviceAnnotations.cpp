//===- DropDeviceAnnotations.cpp - remove smlir.device & co. --------------===//

#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_DROPDEVICEANNOTATIONS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

struct DropDeviceAnnotationsPass
    : public smlir::impl::DropDeviceAnnotationsBase<DropDeviceAnnotationsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      for (StringRef name :
           {kDeviceAttrName, kKernelOperandAttrName, kMmaKAttrName})
        func.removeArgAttr(i, name);
  }
};

} // namespace
