//===- RowKernel.cpp - vector loops over the rows of a generic ------------===//
//
// Per row (the outer loops, under scf.parallel): the body cloned at vector
// type V lanes at a time, the last vector masked; a reduction keeps U
// vector accumulators per result, neutral-initialized, and combines them
// with the init at the end of the row. Operands that do not vary along the
// row are read once per row and broadcast.
//
//===----------------------------------------------------------------------===//

#include "RowKernel.h"

#include "KernelBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;
using vector::CombiningKind;

std::optional<CombiningKind> mlir::smlir::codegen::combiningKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<CombiningKind>>(op)
      .Case([](arith::AddFOp) { return CombiningKind::ADD; })
      .Case([](arith::MulFOp) { return CombiningKind::MUL; })
      .Case([](arith::MaximumFOp) { return CombiningKind::MAXIMUMF; })
      .Case([](arith::MinimumFOp) { return CombiningKind::MINIMUMF; })
      .Case([](arith::MaxNumFOp) { return CombiningKind::MAXNUMF; })
      .Case([](arith::MinNumFOp) { return CombiningKind::MINNUMF; })
      .Default([](Operation *) { return std::nullopt; });
}

bool mlir::smlir::codegen::readsAlongRow(AffineMap map, unsigned innermost) {
  return map.getNumResults() != 0 &&
         map.getResults().back() ==
             getAffineDimExpr(innermost, map.getContext());
}

std::optional<int64_t>
mlir::smlir::codegen::constantExponent(math::FPowIOp power) {
  APInt exponent;
  if (!matchPattern(power.getRhs(), m_ConstantInt(&exponent)))
    return std::nullopt;
  return exponent.getSExtValue();
}

namespace {

class RowKernelBuilder {
public:
  RowKernelBuilder(OpBuilder &b, const RowKernel &match, int64_t lanes,
                   int64_t vectors)
      : b(b), loc(match.op->getLoc()), op(match.op), reduces(match.reduces),
        combiners(match.combiners), V(lanes), U(vectors), f32(b.getF32Type()),
        vecType(VectorType::get({lanes}, f32)) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    L = ranges.back();
    rows.assign(ranges.begin(), ranges.end() - 1);
  }

  SmallVector<Value> build() {
    for (OpOperand *input : op.getDpsInputOperands())
      inputs.push_back(toBuffer(input->get()));
    for (OpOperand &init : op.getDpsInitsMutable()) {
      // A filled init is a scalar: no buffer to read per row. An
      // element-wise op reads its init only if its body does.
      auto fill = init.get().getDefiningOp<linalg::FillOp>();
      bool read = reduces || !op.getMatchingBlockArgument(&init).use_empty();
      initScalars.push_back(fill ? fill.getInputs()[0] : Value());
      initBuffers.push_back(read && !fill ? toBuffer(init.get()) : Value());
      auto type = cast<RankedTensorType>(init.get().getType());
      outputs.push_back(memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), f32),
          b.getI64IntegerAttr(64)));
    }
    std::string name = reduces ? "row_reduction" : "rows";
    for (int64_t size : op.getStaticLoopRanges())
      name += "_" + std::to_string(size);
    emitKernelRegion(b, loc, name, [&] {
      if (rows.empty()) {
        row({});
        return;
      }
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
    });
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

  Value splat(TypedAttr value) {
    auto type = VectorType::get({V}, value.getType());
    return arith::ConstantOp::create(b, loc, type,
                                     DenseElementsAttr::get(type, value));
  }

  Value broadcast(Value scalar) {
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({V}, scalar.getType()), scalar);
  }

  /// V elements of `buffer` along the row at `k` (masked lanes read 0).
  Value load(Value buffer, ArrayRef<Value> at, Value mask) {
    if (!mask)
      return vector::LoadOp::create(b, loc, vecType, buffer, at);
    return vector::MaskedLoadOp::create(b, loc, vecType, buffer, at, mask,
                                        splat(b.getF32FloatAttr(0.0f)));
  }

  /// x^n by binary exponentiation (1 / x^-n for negative n).
  Value unrolledPower(Value x, int64_t n) {
    Value one = splat(b.getF32FloatAttr(1.0f));
    Value result = one;
    Value square = x;
    for (int64_t left = std::abs(n); left > 0; left >>= 1) {
      if (left & 1)
        result = arith::MulFOp::create(b, loc, result, square);
      if (left > 1)
        square = arith::MulFOp::create(b, loc, square, square);
    }
    return n < 0 ? arith::DivFOp::create(b, loc, one, result).getResult()
                 : result;
  }

  /// The body on the V elements of the row at `k` (`mask`: the lanes inside
  /// the row); `mapping` then maps the body's values to vectors.
  void vectorBody(ValueRange ivs, Value k, Value mask,
                  ArrayRef<Value> rowInvariant, IRMapping &mapping) {
    Block *body = op.getBody();
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands())) {
      Value value = rowInvariant[i];
      if (!value)
        value = load(inputs[i],
                     indices(op.getMatchingIndexingMap(input), ivs, k), mask);
      mapping.map(body->getArgument(i), value);
    }
    for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      BlockArgument out = op.getMatchingBlockArgument(&init);
      if (reduces || out.use_empty())
        continue;
      Value value = initScalars[i]
                        ? broadcast(initScalars[i])
                        : load(initBuffers[i],
                               indices(op.getMatchingIndexingMap(&init), ivs, k),
                               mask);
      mapping.map(out, value);
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
  }

  /// The vector of body value `value` (a scalar from above: broadcast).
  Value lookup(IRMapping &mapping, Value value) {
    if (!mapping.contains(value))
      mapping.map(value, broadcast(value));
    return mapping.lookup(value);
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

  /// Each result's contribution (what its combiner combines with out) for
  /// the V elements of the row at `k`; masked-off lanes hold the neutral
  /// element.
  SmallVector<Value> contributions(ValueRange ivs, Value k, Value mask,
                                   ArrayRef<Value> rowInvariant) {
    IRMapping mapping;
    vectorBody(ivs, k, mask, rowInvariant, mapping);
    SmallVector<Value> values;
    for (Operation *combiner : combiners) {
      Value out = outArgument(combiner);
      Value value = lookup(
          mapping, combiner->getOperand(combiner->getOperand(0) == out ? 1 : 0));
      if (mask)
        value = arith::SelectOp::create(b, loc, mask, value,
                                        splat(neutral(combiner)));
      values.push_back(value);
    }
    return values;
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

  /// Operands that do not vary along the row, read once per row (null for
  /// the others).
  SmallVector<Value> rowInvariantInputs(ValueRange ivs) {
    SmallVector<Value> rowInvariant;
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands())) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (readsAlongRow(map, rows.size())) {
        rowInvariant.push_back(Value());
        continue;
      }
      Value scalar = memref::LoadOp::create(b, loc, inputs[i],
                                            indices(map, ivs, Value()));
      rowInvariant.push_back(broadcast(scalar));
    }
    return rowInvariant;
  }

  Value tailMask(int64_t k) {
    if (L - k >= V)
      return Value();
    return vector::ConstantMaskOp::create(
        b, loc, VectorType::get({V}, b.getI1Type()), ArrayRef<int64_t>{L - k});
  }

  void row(ValueRange ivs) {
    if (reduces)
      reduceRow(ivs);
    else
      mapRow(ivs);
  }

  /// Element-wise: whole vectors, then a masked one.
  void mapRow(ValueRange ivs) {
    SmallVector<Value> rowInvariant = rowInvariantInputs(ivs);
    auto store = [&](Value k, Value mask) {
      IRMapping mapping;
      vectorBody(ivs, k, mask, rowInvariant, mapping);
      Operation *yield = op.getBody()->getTerminator();
      for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable())) {
        Value value = lookup(mapping, yield->getOperand(i));
        SmallVector<Value> at =
            indices(op.getMatchingIndexingMap(&init), ivs, k);
        if (mask)
          vector::MaskedStoreOp::create(b, loc, outputs[i], at, mask, value);
        else
          vector::StoreOp::create(b, loc, value, outputs[i], at);
      }
    };
    int64_t whole = L / V * V;
    if (whole > 0)
      scf::ForOp::create(b, loc, idx(0), idx(whole), idx(V), ValueRange{},
                         [&](OpBuilder &, Location, Value k, ValueRange) {
                           store(k, Value());
                           scf::YieldOp::create(b, loc);
                         });
    if (whole < L)
      store(idx(whole), tailMask(whole));
  }

  /// Reduction: U accumulators per result, then the rest, then the init.
  void reduceRow(ValueRange ivs) {
    SmallVector<Value> rowInvariant = rowInvariantInputs(ivs);
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
      SmallVector<Value> values =
          contributions(ivs, idx(k), tailMask(k), rowInvariant);
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
  bool reduces;
  SmallVector<Operation *> combiners;
  int64_t V, U;
  Type f32;
  VectorType vecType;
  int64_t L = 0;
  SmallVector<int64_t> rows;
  SmallVector<Value> inputs, initScalars, initBuffers, outputs;
};

} // namespace

SmallVector<Value> mlir::smlir::codegen::buildRowKernel(OpBuilder &b,
                                                        const RowKernel &match,
                                                        int64_t lanes,
                                                        int64_t vectors) {
  return RowKernelBuilder(b, match, lanes, vectors).build();
}
