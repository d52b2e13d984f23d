//===- OutlineKernels.cpp - one private function per distinct kernel -----===//
//
// The micro-kernel passes emit each kernel's loops into an scf.execute_region
// tagged `smlir.kernel` (KernelTags.h). Here every such region becomes a call
// of a private function whose arguments are the buffers the loops read and
// write; constants are cloned in, so the function is specialized exactly as
// the inline loops were. A region whose function would be identical to one
// already outlined (same type, same body: BERT's q, k, v and output
// projections, its two layer norms) calls that one instead, so LLVM
// optimizes and generates its code once.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/KernelTags.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// Moves the body of `region` into a new private function `name` (uniqued)
/// and replaces `region` by a call of it.
static func::FuncOp outline(scf::ExecuteRegionOp region, StringRef name,
                            SymbolTable &symbols) {
  Region &body = region.getRegion();
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

  Location loc = region.getLoc();
  MLIRContext *context = region.getContext();
  auto type = FunctionType::get(context, ValueRange(arguments).getTypes(), {});
  auto module = cast<ModuleOp>(symbols.getOp());
  OpBuilder b(context);
  auto function = func::FuncOp::create(b, loc, ("smlir_" + name).str(), type);
  function.setPrivate();
  symbols.insert(function, module.getBody()->end());
  Block *entry = function.addEntryBlock();
  entry->getOperations().splice(entry->end(), body.front().getOperations());
  Operation *yield = entry->getTerminator();
  b.setInsertionPoint(yield);
  func::ReturnOp::create(b, yield->getLoc());
  yield->erase();

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

  b.setInsertionPoint(region);
  func::CallOp::create(b, loc, function, arguments);
  region.erase();
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
    SmallVector<scf::ExecuteRegionOp> regions;
    module.walk([&](scf::ExecuteRegionOp region) {
      // Kernels of this module's own functions (the outlined function goes
      // into its symbol table), named by a string.
      auto function = region->getParentOfType<func::FuncOp>();
      if (region->getAttrOfType<StringAttr>(kKernelRegionAttrName) &&
          function && function->getParentOp() == module &&
          region.getNumResults() == 0 && region.getRegion().hasOneBlock())
        regions.push_back(region);
    });
    SymbolTable symbols(module);
    llvm::StringMap<SmallVector<func::FuncOp>> outlined;
    for (scf::ExecuteRegionOp region : regions) {
      StringRef name =
          region->getAttrOfType<StringAttr>(kKernelRegionAttrName).getValue();
      SmallVector<func::FuncOp> &same = outlined[name];
      func::FuncOp function = outline(region, name, symbols);
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
