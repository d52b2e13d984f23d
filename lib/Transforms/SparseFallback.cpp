//===- SparseFallback.cpp - dense reads where no sparse lowering exists ---===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_SPARSEFALLBACK
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

static bool isSparse(Value v) {
  return static_cast<bool>(sparse_tensor::getSparseTensorEncoding(v.getType()));
}

/// True when `use` of a sparse value has a sparse lowering known to work.
static bool hasSparseLowering(OpOperand &use) {
  Operation *owner = use.getOwner();
  if (owner->hasAttr("smlir.sparse_kernel"))
    return true;
  if (isa<func::ReturnOp>(owner) ||
      isa<sparse_tensor::SparseTensorDialect>(owner->getDialect()))
    return true;
  if (auto matmul = dyn_cast<linalg::MatmulOp>(owner))
    return !matmul.hasUserDefinedMaps() && use.getOperandNumber() == 0 &&
           !isSparse(matmul.getInputs()[1]);
  return false;
}

struct SparseFallbackPass
    : public smlir::impl::SparseFallbackBase<SparseFallbackPass> {
  using SparseFallbackBase::SparseFallbackBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &entry = func.getBody().front();
    llvm::StringSet<> reported;
    bool changed = false, failedAny = false;
    for (BlockArgument arg : entry.getArguments()) {
      if (!isSparse(arg))
        continue;
      SmallVector<Operation *> unsupported;
      for (OpOperand &use : arg.getUses())
        if (!hasSparseLowering(use))
          unsupported.push_back(use.getOwner());
      if (unsupported.empty())
        continue;
      unsigned index = arg.getArgNumber();
      auto name = func.getArgAttrOfType<StringAttr>(index, "smlir.tensor_name");
      auto encoding = func.getArgAttrOfType<EncodingAttrInterface>(
          index, "smlir.encoding");
      std::string format = encoding ? encoding.getFormatName() : "sparse";
      for (Operation *op : unsupported) {
        std::string key = op->getName().getStringRef().str() + "/" + format;
        if (!reported.insert(key).second)
          continue;
        InFlightDiagnostic diag =
            fail ? op->emitError() : op->emitWarning();
        diag << "no sparse lowering for '" << op->getName()
             << "' reading tensor '"
             << (name ? name.getValue() : StringRef("<argument>"))
             << "' stored as " << format << "; computing it densely";
      }
      failedAny |= fail;
      auto type = cast<RankedTensorType>(arg.getType());
      arg.setType(RankedTensorType::get(type.getShape(), type.getElementType()));
      func.setArgAttr(index, "smlir.fallback", UnitAttr::get(&getContext()));
      changed = true;
    }
    if (changed)
      func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                     func.getResultTypes()));
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
