//===- OutlineKernels.cpp - one private function per distinct kernel -----===//
//
// The micro-kernel passes emit each kernel's loops into an `smlir.kernel`
// op. Here every such op becomes a call
// of a private function whose arguments are the buffers the loops read and
// write; constants are cloned in, so the function is specialized exactly as
// the inline loops were. A region whose function would be identical to one
// already outlined (same type, same body: BERT's q, k, v and output
// projections, its two layer norms) calls that one instead, so LLVM
// optimizes and generates its code once.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// Moves the body of `kernel` into a new private function `name` (uniqued)
/// and replaces `kernel` by a call of it.
static func::FuncOp outline(KernelOp kernel, StringRef name,
                            SymbolTable &symbols) {
  Region &body = kernel.getBody();
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(body, captured);
  SmallVector<Value> arguments;
  SmallVector<Operation *> constants;
  for (Value value : captured) {
    Operation *producer = value.getDefiningOp();
    if (producer && producer->hasTrait<OpTrait::ConstantLike>())
      constants.push_back(producer);
    else
      arguments.push_back(value);
  }

  Location loc = kernel.getLoc();
  MLIRContext *context = kernel.getContext();
  auto type = FunctionType::get(context, ValueRange(arguments).getTypes(), {});
  auto module = cast<ModuleOp>(symbols.getOp());
  OpBuilder b(context);
  auto function = func::FuncOp::create(b, loc, ("smlir_" + name).str(), type);
  function.setPrivate();
  symbols.insert(function, module.getBody()->end());
  Block *entry = function.addEntryBlock();
  entry->getOperations().splice(entry->end(), body.front().getOperations());
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc);

  auto insideFunction = [&](OpOperand &use) {
    return function->isProperAncestor(use.getOwner());
  };
  b.setInsertionPointToStart(entry);
  for (Operation *constant : constants) {
    Operation *copy = b.clone(*constant);
    constant->getResult(0).replaceUsesWithIf(copy->getResult(0), insideFunction);
  }
  for (auto [value, argument] : llvm::zip(arguments, entry->getArguments()))
    value.replaceUsesWithIf(argument, insideFunction);

  b.setInsertionPoint(kernel);
  func::CallOp::create(b, loc, function, arguments);
  kernel.erase();
  return function;
}

static bool sameKernel(func::FuncOp a, func::FuncOp b) {
  return a.getFunctionType() == b.getFunctionType() &&
         OperationEquivalence::isRegionEquivalentTo(
             &a.getBody(), &b.getBody(),
             OperationEquivalence::IgnoreLocations);
}

struct OutlineKernelsPass
    : public smlir::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<KernelOp> kernels;
    module.walk([&](KernelOp kernel) {
      // Kernels of this module's own functions (the outlined function goes
      // into its symbol table).
      auto function = kernel->getParentOfType<func::FuncOp>();
      if (function && function->getParentOp() == module &&
          kernel.getBody().hasOneBlock())
        kernels.push_back(kernel);
    });
    SymbolTable symbols(module);
    llvm::StringMap<SmallVector<func::FuncOp>> outlined;
    for (KernelOp kernel : kernels) {
      StringRef name = kernel.getName();
      SmallVector<func::FuncOp> &same = outlined[name];
      func::FuncOp function = outline(kernel, name, symbols);
      auto previous = llvm::find_if(
          same, [&](func::FuncOp other) { return sameKernel(other, function); });
      if (previous == same.end()) {
        same.push_back(function);
        continue;
      }
      if (failed(SymbolTable::replaceAllSymbolUses(
              function, (*previous).getSymNameAttr(), module)))
        return signalPassFailure();
      symbols.erase(function);
    }
  }
};

} // namespace
