//===- SparseFallback.cpp - dense reads where no sparse lowering exists ---===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/KernelTags.h"
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
  // Kernels built by smlir-rewrite-sparse-matmul, and element-wise ops that
  // smlir-propagate-encodings made compute on stored entries only.
  if (owner->hasAttr(kSparseKernelAttrName) ||
      owner->hasAttr(kInferredEncodingAttrName))
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

    llvm::StringSet<> reported;
    bool failedIntermediates = false;
    fallBackIntermediates(func, order, reported, failedIntermediates);

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
    if (fallbacks.empty()) {
      if (failedIntermediates)
        signalPassFailure();
      return;
    }

    OpBuilder builder(&entry, entry.begin());
    for (auto &[arg, unsupported] : fallbacks) {
      unsigned index = arg.getArgNumber();
      auto name = func.getArgAttrOfType<StringAttr>(index, kTensorNameAttrName);
      auto encoding = func.getArgAttrOfType<EncodingAttrInterface>(
          index, kEncodingAttrName);
      std::string format = encoding ? encoding.getFormatName() : "sparse";
      StringRef tensorName = name ? name.getValue() : StringRef("<argument>");
      for (Operation *op : unsupported)
        report(op, tensorName, format, reported);
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
      func.setArgAttr(index, kFallbackAttrName, UnitAttr::get(&getContext()));
      if (!sparseReaders.empty()) {
        Value sparse = sparse_tensor::ConvertOp::create(builder, arg.getLoc(),
                                                        sparseType, arg);
        for (OpOperand *use : sparseReaders)
          use->set(sparse);
      }
    }
    if (fail || failedIntermediates)
      return signalPassFailure();
    func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                   func.getResultTypes()));
  }

  /// Sparse intermediates (smlir.sparsify results): readers without a sparse
  /// lowering read one sparse_tensor.convert back to dense.
  void fallBackIntermediates(func::FuncOp func,
                             const DenseMap<Operation *, unsigned> &order,
                             llvm::StringSet<> &reported, bool &failedAny) {
    SmallVector<SparsifyOp> sparsifiers;
    func.walk([&](SparsifyOp op) {
      if (isSparseTensor(op.getResult()))
        sparsifiers.push_back(op);
    });
    for (SparsifyOp op : sparsifiers) {
      SmallVector<OpOperand *> unsupported;
      for (OpOperand &use : op.getResult().getUses())
        if (!hasSparseLowering(use))
          unsupported.push_back(&use);
      if (unsupported.empty())
        continue;
      llvm::sort(unsupported, [&](OpOperand *a, OpOperand *b) {
        return order.lookup(a->getOwner()) < order.lookup(b->getOwner());
      });
      std::string format = op.getEncoding().getFormatName();
      StringRef name = op.getTensorName().value_or("<intermediate>");
      for (OpOperand *use : unsupported)
        report(use->getOwner(), name, format, reported);
      failedAny |= fail;
      if (fail)
        continue;
      OpBuilder builder(op->getContext());
      builder.setInsertionPointAfter(op);
      Value dense = sparse_tensor::ConvertOp::create(
          builder, op.getLoc(), op.getSource().getType(), op.getResult());
      for (OpOperand *use : unsupported)
        use->set(dense);
    }
  }

  void report(Operation *op, StringRef tensorName, StringRef format,
              llvm::StringSet<> &reported) {
    std::string key =
        (op->getName().getStringRef() + "/" + format + "/" + tensorName).str();
    if (!reported.insert(key).second)
      return;
    InFlightDiagnostic diag = fail ? op->emitError() : op->emitWarning();
    diag << "no sparse lowering for '" << op->getName() << "' reading tensor '"
         << tensorName << "' stored as " << format << "; computing it densely";
  }
};

} // namespace
