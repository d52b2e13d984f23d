//===- WidenBoolBuffers.cpp - i1 buffers as one byte per element ----------===//
//
// MLIR 22's memref-to-LLVM conversion asserts (aborting the process) on a
// load or store of a sub-byte element type. Bool tensors (attention masks,
// `all`/`any` reductions, `masked_fill`'s condition) bufferize to
// memref<...xi1>. This pass gives every such buffer i8 elements (torch's own
// bool layout, and what LLVM would store an i1 as anyway): loads truncate,
// stores zero-extend; everything that only passes the buffer along (allocs,
// views, function signatures, loops) just changes type. What it cannot
// rewrite is reported as an error instead of reaching the LLVM lowering.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_WIDENBOOLBUFFERS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;

namespace {

/// A signless integer narrower than a byte (i1 in practice).
static bool isNarrowInteger(Type type) {
  auto integer = dyn_cast<IntegerType>(type);
  return integer && integer.isSignless() && integer.getWidth() < 8;
}

/// Whether memory of this element type cannot be lowered to LLVM by MLIR 22:
/// any int or float (or vector of them) narrower than a byte.
static bool isSubByteElement(Type type) {
  if (auto vector = dyn_cast<VectorType>(type))
    type = vector.getElementType();
  return type.isIntOrFloat() && type.getIntOrFloatBitWidth() < 8;
}

/// A memref (or a function type with one) whose element satisfies `is`.
template <bool (*is)(Type)>
static bool hasMemRefOf(Type type) {
  if (auto memref = dyn_cast<BaseMemRefType>(type))
    return is(memref.getElementType());
  if (auto function = dyn_cast<FunctionType>(type))
    return llvm::any_of(function.getInputs(), hasMemRefOf<is>) ||
           llvm::any_of(function.getResults(), hasMemRefOf<is>);
  return false;
}
static bool hasSubByteMemRef(Type type) {
  return hasMemRefOf<isSubByteElement>(type);
}
/// A memref of narrow integers (or a function type with one).
static bool hasNarrowIntegerMemRef(Type type) {
  return hasMemRefOf<isNarrowInteger>(type);
}

/// i1 -> i8, vector<..xi1> -> vector<..xi8>: a value as it sits in memory.
static Type widenValueType(Type type) {
  Type i8 = IntegerType::get(type.getContext(), 8);
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.clone(i8);
  return i8;
}

class WidenTypeConverter : public TypeConverter {
public:
  WidenTypeConverter() {
    addConversion([](Type type) { return type; });
    addConversion([](MemRefType type) -> Type {
      if (!isNarrowInteger(type.getElementType()))
        return type;
      return MemRefType::get(type.getShape(),
                             IntegerType::get(type.getContext(), 8),
                             type.getLayout(), type.getMemorySpace());
    });
    addConversion([](UnrankedMemRefType type) -> Type {
      if (!isNarrowInteger(type.getElementType()))
        return type;
      return UnrankedMemRefType::get(IntegerType::get(type.getContext(), 8),
                                     type.getMemorySpace());
    });
  }
};

/// Ops that read or write elements: the buffer they access, which operands
/// carry values to store and which results carry loaded values (both widened
/// around the op).
struct DataOperands {
  unsigned base;
  SmallVector<unsigned> stored;
  SmallVector<unsigned> loaded;
};

static std::optional<DataOperands> dataOperandsOf(Operation *op) {
  auto number = [](OpOperand &operand) { return operand.getOperandNumber(); };
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return DataOperands{number(load.getMemrefMutable()), {}, {0}};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return DataOperands{number(store.getMemrefMutable()),
                        {number(store.getValueMutable())}, {}};
  if (auto load = dyn_cast<vector::LoadOp>(op))
    return DataOperands{number(load.getBaseMutable()), {}, {0}};
  if (auto store = dyn_cast<vector::StoreOp>(op))
    return DataOperands{number(store.getBaseMutable()),
                        {number(store.getValueToStoreMutable())}, {}};
  if (auto load = dyn_cast<vector::MaskedLoadOp>(op))
    return DataOperands{number(load.getBaseMutable()),
                        {number(load.getPassThruMutable())}, {0}};
  if (auto store = dyn_cast<vector::MaskedStoreOp>(op))
    return DataOperands{number(store.getBaseMutable()),
                        {number(store.getValueToStoreMutable())}, {}};
  if (auto read = dyn_cast<vector::TransferReadOp>(op))
    return DataOperands{number(read.getBaseMutable()),
                        {number(read.getPaddingMutable())}, {0}};
  // On a memref it has no result (on a tensor nothing is converted).
  if (auto write = dyn_cast<vector::TransferWriteOp>(op))
    return DataOperands{number(write.getBaseMutable()),
                        {number(write.getValueToStoreMutable())}, {}};
  return std::nullopt;
}

/// Ops that do not look at the elements: only their memref types change.
static bool isElementAgnostic(Operation *op) {
  return isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
             memref::ReallocOp, memref::SubViewOp, memref::CastOp,
             memref::ReinterpretCastOp, memref::ExpandShapeOp,
             memref::CollapseShapeOp, memref::TransposeOp, memref::ViewOp,
             memref::MemorySpaceCastOp, memref::CopyOp, memref::DimOp,
             memref::RankOp, memref::GetGlobalOp,
             memref::ExtractStridedMetadataOp,
             memref::ExtractAlignedPointerAsIndexOp,
             memref::AssumeAlignmentOp, bufferization::CloneOp,
             bufferization::DeallocOp>(op);
}

/// Whether the patterns below rewrite this op's i1 buffers.
static bool canWiden(Operation *op) {
  return dataOperandsOf(op) || isElementAgnostic(op) ||
         isa<func::FuncOp, func::CallOp, func::ReturnOp, memref::GlobalOp,
             scf::ForOp, scf::IfOp, scf::WhileOp, scf::ConditionOp,
             scf::YieldOp, BranchOpInterface>(op);
}

/// Loads, stores and buffer-passing ops on i1 memrefs, rebuilt on i8 memrefs
/// (stored values zero-extended, loaded ones truncated back to i1).
struct WidenMemoryOp : public ConversionPattern {
  WidenMemoryOp(const TypeConverter &converter, MLIRContext *context)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1,
                          context) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (op->getNumRegions() != 0)
      return rewriter.notifyMatchFailure(op, "op with regions");
    std::optional<DataOperands> data = dataOperandsOf(op);
    if (!data && !isElementAgnostic(op))
      return rewriter.notifyMatchFailure(op, "not a known memory op");
    Location loc = op->getLoc();
    SmallVector<Value> newOperands(operands);
    SmallVector<Type> newTypes;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(),
                                                newTypes)))
      return rewriter.notifyMatchFailure(op, "result types");
    if (data) {
      // The accessed buffer's element type decides (masks are i1 too).
      auto baseType =
          dyn_cast<MemRefType>(op->getOperand(data->base).getType());
      if (!baseType || !isNarrowInteger(baseType.getElementType()))
        return rewriter.notifyMatchFailure(op, "not an i1 buffer");
      for (unsigned i : data->stored)
        newOperands[i] = arith::ExtUIOp::create(
            rewriter, loc, widenValueType(newOperands[i].getType()),
            newOperands[i]);
      for (unsigned i : data->loaded)
        newTypes[i] = widenValueType(op->getResult(i).getType());
    }
    OperationState state(loc, op->getName());
    state.addOperands(newOperands);
    state.addTypes(newTypes);
    state.addAttributes(op->getAttrs());
    Operation *widened = rewriter.create(state);
    SmallVector<Value> results(widened->getResults());
    if (data)
      for (unsigned i : data->loaded)
        results[i] = arith::TruncIOp::create(
            rewriter, loc, op->getResult(i).getType(), results[i]);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// An i1 global (a constant bool mask) becomes an i8 one with the same
/// values.
struct WidenGlobal : public OpConversionPattern<memref::GlobalOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(memref::GlobalOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast_or_null<MemRefType>(
        getTypeConverter()->convertType(op.getType()));
    if (!type || type == op.getType())
      return failure();
    Attribute initial = op.getInitialValueAttr();
    if (auto dense = dyn_cast_or_null<DenseIntElementsAttr>(initial)) {
      initial = dense.mapValues(type.getElementType(), [](const APInt &v) {
        return v.zext(8);
      });
    } else if (initial && !isa<UnitAttr>(initial)) {
      return rewriter.notifyMatchFailure(op, "initial value not dense");
    }
    rewriter.modifyOpInPlace(op, [&] {
      op.setType(type);
      if (initial)
        op.setInitialValueAttr(initial);
    });
    return success();
  }
};

struct WidenBoolBuffersPass
    : public smlir::impl::WidenBoolBuffersBase<WidenBoolBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    WidenTypeConverter converter;

    // Ops holding a buffer of i1 that no pattern below rewrites: an error
    // naming them, rather than the conversion's generic one.
    bool any = false, unsupported = false;
    module.walk([&](Operation *op) {
      bool narrow =
          llvm::any_of(op->getOperandTypes(), hasNarrowIntegerMemRef) ||
          llvm::any_of(op->getResultTypes(), hasNarrowIntegerMemRef) ||
          llvm::any_of(op->getRegions(), [](Region &region) {
            return llvm::any_of(region.getArgumentTypes(),
                                hasNarrowIntegerMemRef);
          });
      if (auto global = dyn_cast<memref::GlobalOp>(op))
        narrow |= hasNarrowIntegerMemRef(global.getType());
      if (auto function = dyn_cast<FunctionOpInterface>(op))
        narrow |= hasNarrowIntegerMemRef(function.getFunctionType());
      if (!narrow)
        return;
      any = true;
      if (canWiden(op))
        return;
      op->emitError() << "smlir-widen-bool-buffers: cannot give the i1 "
                         "(bool) buffer of '"
                      << op->getName()
                      << "' i8 elements; MLIR 22 cannot lower i1 loads and "
                         "stores to LLVM";
      unsupported = true;
    });
    if (unsupported)
      return signalPassFailure();
    if (!any) {
      if (failed(checkNoSubByteMemory(module)))
        signalPassFailure();
      return;
    }

    ConversionTarget target(*context);
    RewritePatternSet patterns(context);
    patterns.add<WidenMemoryOp, WidenGlobal>(converter, context);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateBranchOpInterfaceTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return converter.isSignatureLegal(op.getFunctionType()) &&
             converter.isLegal(&op.getBody());
    });
    target.addDynamicallyLegalOp<memref::GlobalOp>([&](memref::GlobalOp op) {
      return converter.isLegal(op.getType());
    });
    target.markUnknownOpDynamicallyLegal([&](Operation *op) {
      if (!converter.isLegal(op))
        return false;
      for (Region &region : op->getRegions())
        if (!converter.isLegal(&region))
          return false;
      return true;
    });
    if (failed(applyPartialConversion(module, target, std::move(patterns))) ||
        failed(checkNoSubByteMemory(module)))
      signalPassFailure();
  }

  /// What is left (narrow floats, signed i1) would abort memref-to-LLVM:
  /// report it instead.
  static LogicalResult checkNoSubByteMemory(ModuleOp module) {
    WalkResult walk = module.walk([](Operation *op) {
      Type bad;
      for (Type type : op->getOperandTypes())
        if (hasSubByteMemRef(type))
          bad = type;
      for (Type type : op->getResultTypes())
        if (hasSubByteMemRef(type))
          bad = type;
      if (auto global = dyn_cast<memref::GlobalOp>(op))
        if (hasSubByteMemRef(global.getType()))
          bad = global.getType();
      if (!bad)
        return WalkResult::advance();
      op->emitError() << "smlir-widen-bool-buffers: buffer of sub-byte "
                         "elements ("
                      << bad
                      << ") left: MLIR 22 cannot lower its loads and stores "
                         "to LLVM";
      return WalkResult::interrupt();
    });
    return failure(walk.wasInterrupted());
  }
};

} // namespace
