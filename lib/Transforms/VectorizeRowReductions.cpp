//===- VectorizeRowReductions.cpp - vector loops for innermost reductions -===//
//
// A dense reduction along the innermost loop,
//
//   out[i...] = combine(f(in_0[..., k], in_1[i...], ...), out[i...])
//
// lowered by convert-linalg-to-loops keeps its accumulator in memory and
// combines in loop order, so LLVM cannot vectorize it (an ordered fadd chain
// runs at one add per 3-4 cycles). This pass writes the loops itself:
//
//   scf.parallel over the rows (the outer, parallel loops):
//     U vector accumulators of V lanes per result, neutral-initialized
//     for k in whole groups of U * V: acc[u] = combine(f(vectors at k + u*V), acc[u])
//     the rest one vector at a time; the last vector masked, its masked-off
//       lanes replaced by the neutral element
//     out = combine(reduce(acc[0] . ... . acc[U-1]), init)
//
// f is the op's body cloned at vector type: element-wise ops only.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_VECTORIZEROWREDUCTIONS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;

namespace {

using vector::CombiningKind;

/// The vector.reduction kind of a combiner op, if it is one we lower.
static std::optional<CombiningKind> combiningKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<CombiningKind>>(op)
      .Case([](arith::AddFOp) { return CombiningKind::ADD; })
      .Case([](arith::MulFOp) { return CombiningKind::MUL; })
      .Case([](arith::MaximumFOp) { return CombiningKind::MAXIMUMF; })
      .Case([](arith::MinimumFOp) { return CombiningKind::MINIMUMF; })
      .Case([](arith::MaxNumFOp) { return CombiningKind::MAXNUMF; })
      .Case([](arith::MinNumFOp) { return CombiningKind::MINNUMF; })
      .Default([](Operation *) { return std::nullopt; });
}

static bool isStaticDenseF32(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() && tensor.getElementType().isF32() &&
         !sparse_tensor::getSparseTensorEncoding(tensor);
}

/// Map results are loop dimensions or the constant 0 (the keepdim size-1
/// dimensions torch-mlir writes), and `innermost` appears at most once,
/// last if at all (the operand is contiguous along the reduced loop).
static bool isRowAccess(AffineMap map, unsigned innermost, bool allowInnermost) {
  ArrayRef<AffineExpr> results = map.getResults();
  for (auto [position, expr] : llvm::enumerate(results)) {
    if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      if (constant.getValue() != 0)
        return false;
      continue;
    }
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return false;
    if (dim.getPosition() == innermost &&
        (!allowInnermost || position + 1 != results.size()))
      return false;
  }
  return true;
}

/// Largest |n| of an x^n unrolled into multiplications.
constexpr int64_t kMaxUnrolledExponent = 16;

static std::optional<int64_t> constantExponent(math::FPowIOp power) {
  APInt exponent;
  if (!matchPattern(power.getRhs(), m_ConstantInt(&exponent)))
    return std::nullopt;
  return exponent.getSExtValue();
}

/// A reduction this pass lowers, with each result's combiner op.
struct RowReduction {
  linalg::GenericOp op;
  SmallVector<Operation *> combiners;
};

static std::optional<RowReduction> matchRowReduction(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumLoops() == 0 ||
      op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return std::nullopt;
  if (!llvm::all_of(op->getOperandTypes(), isStaticDenseF32) ||
      !llvm::all_of(op->getResultTypes(), isStaticDenseF32))
    return std::nullopt;
  unsigned innermost = op.getNumLoops() - 1;
  for (OpOperand *input : op.getDpsInputOperands())
    if (!isRowAccess(op.getMatchingIndexingMap(input), innermost, true))
      return std::nullopt;
  RowReduction match{op, {}};
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (!isRowAccess(op.getMatchingIndexingMap(&init), innermost, false))
      return std::nullopt;
    // out must feed exactly one combiner, whose result is yielded for it.
    BlockArgument out = op.getMatchingBlockArgument(&init);
    Value yielded = yield.getOperand(init.getOperandNumber() - op.getNumDpsInputs());
    Operation *combiner = yielded.getDefiningOp();
    if (!combiner || combiner->getBlock() != body || !out.hasOneUse() ||
        out.getUses().begin()->getOwner() != combiner ||
        !combiningKind(combiner) || !combiner->getResult(0).hasOneUse() ||
        combiner->getOperand(0) == combiner->getOperand(1))
      return std::nullopt;
    match.combiners.push_back(combiner);
  }
  // Everything else must be element-wise and free of side effects, so that
  // it can run on vectors (linalg.index, for one, is not).
  for (Operation &inner : body->without_terminator()) {
    if (llvm::is_contained(match.combiners, &inner))
      continue;
    // x^n (torch's pow with an integer exponent) is unrolled into
    // multiplications; LLVM's powi wants a scalar exponent.
    if (auto power = dyn_cast<math::FPowIOp>(inner)) {
      std::optional<int64_t> exponent = constantExponent(power);
      if (!exponent || std::abs(*exponent) > kMaxUnrolledExponent)
        return std::nullopt;
      continue;
    }
    if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner) ||
        !(inner.hasTrait<OpTrait::Elementwise>() ||
          inner.hasTrait<OpTrait::ConstantLike>()))
      return std::nullopt;
    for (Value operand : inner.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (arg && arg.getOwner() == body &&
          arg.getArgNumber() >= op.getNumDpsInputs())
        return std::nullopt; // reads an out value other than through a combiner
      // Values from above are broadcast: scalars only.
      if (!op.getRegion().isAncestor(operand.getParentRegion()) &&
          !operand.getType().isIntOrIndexOrFloat())
        return std::nullopt;
    }
  }
  return match;
}

class RowReductionBuilder {
public:
  RowReductionBuilder(OpBuilder &b, const RowReduction &match, int64_t lanes,
                      int64_t vectors)
      : b(b), loc(match.op->getLoc()), op(match.op), combiners(match.combiners),
        V(lanes), U(vectors), f32(b.getF32Type()),
        vecType(VectorType::get({lanes}, f32)) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    L = ranges.back();
    rows.assign(ranges.begin(), ranges.end() - 1);
  }

  SmallVector<Value> build() {
    for (OpOperand *input : op.getDpsInputOperands())
      inputs.push_back(toBuffer(input->get()));
    for (OpOperand &init : op.getDpsInitsMutable()) {
      // A filled init is a scalar: no buffer to read per row.
      auto fill = init.get().getDefiningOp<linalg::FillOp>();
      initScalars.push_back(fill ? fill.getInputs()[0] : Value());
      initBuffers.push_back(fill ? Value() : toBuffer(init.get()));
      auto type = cast<RankedTensorType>(init.get().getType());
      outputs.push_back(memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), f32),
          b.getI64IntegerAttr(64)));
    }
    if (rows.empty()) {
      row({});
    } else {
      SmallVector<Value> zeros, bounds, ones;
      for (int64_t size : rows) {
        zeros.push_back(idx(0));
        bounds.push_back(idx(size));
        ones.push_back(idx(1));
      }
      scf::ParallelOp::create(b, loc, zeros, bounds, ones,
                              [&](OpBuilder &, Location, ValueRange ivs) {
                                row(ivs);
                              });
    }
    SmallVector<Value> results;
    for (Value output : outputs)
      results.push_back(bufferization::ToTensorOp::create(
          b, loc,
          RankedTensorType::get(cast<MemRefType>(output.getType()).getShape(),
                                f32),
          output, /*restrict=*/true, /*writable=*/true));
    return results;
  }

private:
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  Value toBuffer(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    return bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), f32), tensor,
        /*read_only=*/true);
  }

  /// The operand's indices at row `ivs` and position `k` along the row.
  SmallVector<Value> indices(AffineMap map, ValueRange ivs, Value k) {
    SmallVector<Value> at;
    for (AffineExpr expr : map.getResults()) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr))
        at.push_back(dim.getPosition() == rows.size() ? k
                                                      : ivs[dim.getPosition()]);
      else
        at.push_back(idx(cast<AffineConstantExpr>(expr).getValue()));
    }
    return at;
  }

  bool readsAlongRow(AffineMap map) {
    return map.getNumResults() != 0 &&
           map.getResults().back() == b.getAffineDimExpr(rows.size());
  }

  Value splat(TypedAttr value) {
    auto type = VectorType::get({V}, value.getType());
    return arith::ConstantOp::create(b, loc, type,
                                     DenseElementsAttr::get(type, value));
  }

  /// Each result's contribution (what its combiner combines with out) for
  /// the V elements of the row at `k`; `mask` selects the lanes inside it.
  SmallVector<Value> contributions(ValueRange ivs, Value k, Value mask,
                                   ArrayRef<Value> rowInvariant) {
    Block *body = op.getBody();
    IRMapping mapping;
    Value zero = splat(b.getF32FloatAttr(0.0f));
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands())) {
      Value value = rowInvariant[i];
      if (!value) {
        SmallVector<Value> at =
            indices(op.getMatchingIndexingMap(input), ivs, k);
        value = mask ? vector::MaskedLoadOp::create(b, loc, vecType, inputs[i],
                                                     at, mask, zero)
                           .getResult()
                     : vector::LoadOp::create(b, loc, vecType, inputs[i], at)
                           .getResult();
      }
      mapping.map(body->getArgument(i), value);
    }
    for (Operation &inner : body->without_terminator()) {
      if (llvm::is_contained(combiners, &inner))
        continue;
      // Values from above the op and constants are scalars: broadcast them.
      for (Value operand : inner.getOperands())
        if (!mapping.contains(operand))
          mapping.map(operand, broadcast(operand));
      if (auto power = dyn_cast<math::FPowIOp>(inner)) {
        mapping.map(power.getResult(),
                    unrolledPower(mapping.lookup(power.getLhs()),
                                  *constantExponent(power)));
        continue;
      }
      if (inner.hasTrait<OpTrait::ConstantLike>()) {
        Operation *scalar = b.clone(inner);
        mapping.map(inner.getResult(0), broadcast(scalar->getResult(0)));
        continue;
      }
      Operation *vectorOp = b.clone(inner, mapping);
      for (OpResult result : vectorOp->getResults())
        result.setType(VectorType::get({V}, result.getType()));
    }
    SmallVector<Value> values;
    for (Operation *combiner : combiners) {
      Value out = outArgument(combiner);
      Value value = combiner->getOperand(combiner->getOperand(0) == out ? 1 : 0);
      if (!mapping.contains(value))
        mapping.map(value, broadcast(value));
      value = mapping.lookup(value);
      if (mask)
        value = arith::SelectOp::create(b, loc, mask, value,
                                        splat(neutral(combiner)));
      values.push_back(value);
    }
    return values;
  }

  /// x^n by binary exponentiation (1 / x^-n for negative n).
  Value unrolledPower(Value x, int64_t n) {
    Value result = splat(b.getF32FloatAttr(1.0f));
    Value square = x;
    for (int64_t left = std::abs(n); left > 0; left >>= 1) {
      if (left & 1)
        result = arith::MulFOp::create(b, loc, result, square);
      if (left > 1)
        square = arith::MulFOp::create(b, loc, square, square);
    }
    if (n < 0)
      result = arith::DivFOp::create(b, loc, splat(b.getF32FloatAttr(1.0f)),
                                     result);
    return result;
  }

  Value broadcast(Value scalar) {
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({V}, scalar.getType()), scalar);
  }

  Value outArgument(Operation *combiner) {
    for (Value operand : combiner->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand))
        if (arg.getOwner() == op.getBody() &&
            arg.getArgNumber() >= op.getNumDpsInputs())
          return arg;
    llvm_unreachable("combiner without its out value");
  }

  TypedAttr neutral(Operation *combiner) {
    return *arith::getNeutralElement(combiner);
  }

  /// combine(value, acc) with the combiner op of result `i`.
  Value combine(unsigned i, Value value, Value acc) {
    Operation *combiner = combiners[i];
    Value out = outArgument(combiner);
    IRMapping mapping;
    for (Value operand : combiner->getOperands())
      mapping.map(operand, operand == out ? acc : value);
    Operation *combined = b.clone(*combiner, mapping);
    combined->getResult(0).setType(value.getType());
    return combined->getResult(0);
  }

  /// One row: the accumulation loops, then each result's store.
  void row(ValueRange ivs) {
    // Operands that do not vary along the row, read once per row.
    SmallVector<Value> rowInvariant;
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands())) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (readsAlongRow(map)) {
        rowInvariant.push_back(Value());
        continue;
      }
      Value scalar = memref::LoadOp::create(b, loc, inputs[i],
                                            indices(map, ivs, Value()));
      rowInvariant.push_back(broadcast(scalar));
    }
    unsigned numResults = combiners.size();
    SmallVector<Value> accs;
    for (Operation *combiner : combiners)
      accs.append(U, splat(neutral(combiner)));
    // Whole groups of U vectors: U independent chains per result.
    int64_t grouped = L / (U * V) * (U * V);
    if (grouped > 0) {
      auto loop = scf::ForOp::create(
          b, loc, idx(0), idx(grouped), idx(U * V), accs,
          [&](OpBuilder &, Location, Value k0, ValueRange carried) {
            SmallVector<Value> next(carried.begin(), carried.end());
            for (int64_t u = 0; u < U; ++u) {
              Value k = arith::AddIOp::create(b, loc, k0, idx(u * V));
              SmallVector<Value> values =
                  contributions(ivs, k, Value(), rowInvariant);
              for (unsigned i = 0; i < numResults; ++i)
                next[i * U + u] = combine(i, values[i], next[i * U + u]);
            }
            scf::YieldOp::create(b, loc, next);
          });
      accs.assign(loop.getResults().begin(), loop.getResults().end());
    }
    SmallVector<Value> acc;
    for (unsigned i = 0; i < numResults; ++i) {
      Value sum = accs[i * U];
      for (int64_t u = 1; u < U; ++u)
        sum = combine(i, accs[i * U + u], sum);
      acc.push_back(sum);
    }
    // The rest, one vector at a time (all static: L is known).
    for (int64_t k = grouped; k < L; k += V) {
      Value mask;
      if (L - k < V)
        mask = vector::ConstantMaskOp::create(
            b, loc, VectorType::get({V}, b.getI1Type()),
            ArrayRef<int64_t>{L - k});
      SmallVector<Value> values = contributions(ivs, idx(k), mask, rowInvariant);
      for (unsigned i = 0; i < numResults; ++i)
        acc[i] = combine(i, values[i], acc[i]);
    }
    for (unsigned i = 0; i < numResults; ++i) {
      Value reduced = vector::ReductionOp::create(
          b, loc, *combiningKind(combiners[i]), acc[i],
          arith::FastMathFlags::reassoc);
      OpOperand *init = op.getDpsInitOperand(i);
      SmallVector<Value> at =
          indices(op.getMatchingIndexingMap(init), ivs, Value());
      Value initial = initScalars[i];
      if (!initial)
        initial = memref::LoadOp::create(b, loc, initBuffers[i], at);
      memref::StoreOp::create(b, loc, combine(i, reduced, initial), outputs[i],
                              at);
    }
  }

  OpBuilder &b;
  Location loc;
  linalg::GenericOp op;
  SmallVector<Operation *> combiners;
  int64_t V, U;
  Type f32;
  VectorType vecType;
  int64_t L = 0;
  SmallVector<int64_t> rows;
  SmallVector<Value> inputs, initScalars, initBuffers, outputs;
};

struct VectorizeRowReductionsPass
    : public smlir::impl::VectorizeRowReductionsBase<
          VectorizeRowReductionsPass> {
  using VectorizeRowReductionsBase::VectorizeRowReductionsBase;

  void runOnOperation() override {
    if (lanes < 1 || vectors < 1) {
      getOperation().emitError("smlir-vectorize-row-reductions: lanes and "
                               "vectors must be positive");
      return signalPassFailure();
    }
    SmallVector<RowReduction> matches;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<RowReduction> match = matchRowReduction(op))
        matches.push_back(*match);
    });
    for (RowReduction &match : matches) {
      OpBuilder b(match.op);
      SmallVector<Value> results =
          RowReductionBuilder(b, match, lanes, vectors).build();
      for (auto [old, replacement] : llvm::zip(match.op.getResults(), results))
        old.replaceAllUsesWith(replacement);
      match.op.erase();
    }
  }
};

} // namespace
