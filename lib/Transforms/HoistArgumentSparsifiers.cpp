//===- HoistArgumentSparsifiers.cpp - sparsify weights at compile time ----===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_HOISTARGUMENTSPARSIFIERS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {


struct HoistArgumentSparsifiersPass
    : public smlir::impl::HoistArgumentSparsifiersBase<
          HoistArgumentSparsifiersPass> {
  // A module pass: whether a function is called inside the module is a
  // question about the whole module.
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      // Callers inside the module would pass dense tensors to the new sparse
      // arguments: only entry points (called from outside) are rewritten.
      if (!SymbolTable::symbolKnownUseEmpty(func, module))
        continue;
      hoist(func);
    }
  }

  void hoist(func::FuncOp func) {
    Block &entry = func.getBody().front();
    bool changed = false;
    for (BlockArgument arg : entry.getArguments()) {
      // Only weights (marked by the importer) are sparsified by the caller;
      // activations keep their sparsifier inside the function.
      if (!func.getArgAttr(arg.getArgNumber(), kWeightAttrName))
        continue;
      SmallVector<SparsifyOp> sparsifiers;
      for (Operation *user : arg.getUsers())
        if (auto op = dyn_cast<SparsifyOp>(user))
          sparsifiers.push_back(op);
      // Two different sparsifiers on one argument cannot both be hoisted.
      if (sparsifiers.size() != 1)
        continue;
      SparsifyOp op = sparsifiers.front();
      RankedTensorType denseType = op.getSource().getType();
      RankedTensorType sparseType = op.getResult().getType();

      unsigned index = arg.getArgNumber();
      func.setArgAttr(index, kSparsifierAttrName, op.getSparsifier());
      func.setArgAttr(index, kEncodingAttrName, op.getEncoding());
      if (StringAttr name = op.getTensorNameAttr())
        func.setArgAttr(index, kTensorNameAttrName, name);

      SmallVector<OpOperand *> denseUses;
      for (OpOperand &use : arg.getUses())
        if (use.getOwner() != op)
          denseUses.push_back(&use);
      arg.setType(sparseType);
      op.getResult().replaceAllUsesWith(arg);
      op.erase();
      // Other readers of the weight see the sparsified values, densified.
      if (!denseUses.empty() && sparseType != denseType) {
        OpBuilder builder(&entry, entry.begin());
        Value dense = sparse_tensor::ConvertOp::create(builder, arg.getLoc(),
                                                       denseType, arg);
        for (OpOperand *use : denseUses)
          use->set(dense);
      }
      changed = true;
    }
    if (changed)
      func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                     func.getResultTypes()));
  }
};

} // namespace
