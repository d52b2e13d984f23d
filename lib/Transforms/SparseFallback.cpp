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
           !isSparseTensor(matmul.getInputs()[1]);
  return false;
}

struct SparseFallbackPass
    : public smlir::impl::SparseFallbackBase<SparseFallbackPass> {
  using SparseFallbackBase::SparseFallbackBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // Program order of ops, so each warning points at the first reader.
    DenseMap<Operation *, unsigned> order;
    func.walk([&](Operation *op) { order[op] = order.size(); });

    // Decide every argument from the original types first: a reader's
    // support may depend on another argument being sparse.
    Block &entry = func.getBody().front();
    SmallVector<std::pair<BlockArgument, SmallVector<Operation *>>> fallbacks;
    for (BlockArgument arg : entry.getArguments()) {
      if (!isSparseTensor(arg))
        continue;
      SmallVector<Operation *> unsupported;
      for (OpOperand &use : arg.getUses())
        if (!hasSparseLowering(use))
          unsupported.push_back(use.getOwner());
      if (unsupported.empty())
        continue;
      llvm::sort(unsupported, [&](Operation *a, Operation *b) {
        return order[a] < order[b];
      });
      fallbacks.emplace_back(arg, std::move(unsupported));
    }
    if (fallbacks.empty())
      return;

    llvm::StringSet<> reported;
    OpBuilder builder(&entry, entry.begin());
    for (auto &[arg, unsupported] : fallbacks) {
      unsigned index = arg.getArgNumber();
      auto name = func.getArgAttrOfType<StringAttr>(index, "smlir.tensor_name");
      auto encoding = func.getArgAttrOfType<EncodingAttrInterface>(
          index, "smlir.encoding");
      std::string format = encoding ? encoding.getFormatName() : "sparse";
      StringRef tensorName = name ? name.getValue() : StringRef("<argument>");
      for (Operation *op : unsupported) {
        std::string key = (op->getName().getStringRef() + "/" + format + "/" +
                           tensorName).str();
        if (!reported.insert(key).second)
          continue;
        InFlightDiagnostic diag = fail ? op->emitError() : op->emitWarning();
        diag << "no sparse lowering for '" << op->getName()
             << "' reading tensor '" << tensorName << "' stored as " << format
             << "; computing it densely";
      }
      if (fail)
        continue;
      // The caller passes the dense weight; readers that had a sparse
      // lowering (or need the sparse type) get it converted once.
      auto sparseType = cast<RankedTensorType>(arg.getType());
      SmallVector<OpOperand *> sparseReaders;
      for (OpOperand &use : arg.getUses())
        if (!llvm::is_contained(unsupported, use.getOwner()))
          sparseReaders.push_back(&use);
      arg.setType(RankedTensorType::get(sparseType.getShape(),
                                        sparseType.getElementType()));
      func.setArgAttr(index, "smlir.fallback", UnitAttr::get(&getContext()));
      if (!sparseReaders.empty()) {
        Value sparse = sparse_tensor::ConvertOp::create(builder, arg.getLoc(),
                                                        sparseType, arg);
        for (OpOperand *use : sparseReaders)
          use->set(sparse);
      }
    }
    if (fail)
      return signalPassFailure();
    func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                   func.getResultTypes()));
  }
};

} // namespace
