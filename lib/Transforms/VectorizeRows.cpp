//===- VectorizeRows.cpp - vector loops along the innermost dimension -----===//
//
// A dense f32 linalg.generic whose operands are contiguous along its
// innermost loop is written here as explicit vector loops over "rows" (the
// outer loops, run by scf.parallel):
//
// - element-wise (all loops parallel): per row, the body on V lanes at a
//   time, stored as vectors, the last vector masked;
// - a reduction of the innermost loop,
//     out[i...] = combine(f(in_0[..., k], in_1[i...], ...), out[i...]),
//   which convert-linalg-to-loops would leave as an ordered scalar chain
//   through memory that LLVM cannot vectorize: per row, U vector
//   accumulators of V lanes per result, neutral-initialized,
//     for k in whole groups of U * V: acc[u] = combine(f(vectors at k + u*V), acc[u])
//     the rest one vector at a time; the last one masked, its masked-off
//       lanes replaced by the neutral element
//     out = combine(reduce(acc[0] . ... . acc[U-1]), init)
//
// f is the op's body cloned at vector type: element-wise ops only. Operands
// that do not vary along the row are read once per row and broadcast.
//
// A transpose that moves the innermost dimension (attention's k^T) reads
// 8 x 8 tiles of the two dimensions that trade places, 8 contiguous
// elements per load, transposes them in registers and stores 8 contiguous
// elements per output row; the other dimensions run under scf.parallel.
// (lib/Codegen/TransposeKernel.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/KernelBuilder.h"
#include "../Codegen/TransposeKernel.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_VECTORIZEROWS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

using vector::CombiningKind;

/// Largest |n| of an x^n unrolled into multiplications.
constexpr int64_t kMaxUnrolledExponent = 16;

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
/// dimensions torch-mlir writes), and the innermost loop appears at most
/// once, last if at all (the operand is contiguous along the row).
static bool isRowAccess(AffineMap map, unsigned innermost) {
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
    if (dim.getPosition() == innermost && position + 1 != results.size())
      return false;
  }
  return true;
}

static bool readsAlongRow(AffineMap map, unsigned innermost) {
  return map.getNumResults() != 0 &&
         map.getResults().back() ==
             getAffineDimExpr(innermost, map.getContext());
}

static std::optional<int64_t> constantExponent(math::FPowIOp power) {
  APInt exponent;
  if (!matchPattern(power.getRhs(), m_ConstantInt(&exponent)))
    return std::nullopt;
  return exponent.getSExtValue();
}

/// An op this pass lowers; for a reduction, each result's combiner op.
struct RowKernel {
  linalg::GenericOp op;
  bool reduces = false;
  SmallVector<Operation *> combiners;
};

/// The combiner of result `init` (out feeds exactly one combiner, whose
/// result is yielded for it), or null.
static Operation *matchCombiner(linalg::GenericOp op, OpOperand &init) {
  Block *body = op.getBody();
  BlockArgument out = op.getMatchingBlockArgument(&init);
  Value yielded = body->getTerminator()->getOperand(init.getOperandNumber() -
                                                    op.getNumDpsInputs());
  Operation *combiner = yielded.getDefiningOp();
  if (!combiner || combiner->getBlock() != body || !out.hasOneUse() ||
      out.getUses().begin()->getOwner() != combiner ||
      !combiningKind(combiner) || !combiner->getResult(0).hasOneUse() ||
      combiner->getOperand(0) == combiner->getOperand(1))
    return nullptr;
  return combiner;
}

static std::optional<RowKernel> matchRowKernel(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumLoops() == 0 ||
      op.getNumReductionLoops() > 1)
    return std::nullopt;
  RowKernel match{op, op.getNumReductionLoops() == 1, {}};
  if (match.reduces &&
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return std::nullopt;
  if (!llvm::all_of(op->getOperandTypes(), isStaticDenseF32) ||
      !llvm::all_of(op->getResultTypes(), isStaticDenseF32))
    return std::nullopt;
  // A streaming sparsifier of the result fuses into the element-wise op
  // later (smlir-fuse-streaming-sparsifiers): leave it a linalg op.
  for (Operation *user : op->getUsers())
    if (user->getDialect() && user->getDialect()->getNamespace() == "smlir")
      return std::nullopt;
  unsigned innermost = op.getNumLoops() - 1;
  for (OpOperand *input : op.getDpsInputOperands())
    if (!isRowAccess(op.getMatchingIndexingMap(input), innermost))
      return std::nullopt;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!isRowAccess(map, innermost) ||
        readsAlongRow(map, innermost) == match.reduces)
      return std::nullopt; // a reduction's result has no innermost index
    if (!match.reduces)
      continue;
    Operation *combiner = matchCombiner(op, init);
    if (!combiner)
      return std::nullopt;
    match.combiners.push_back(combiner);
  }
  // Everything else must be element-wise and free of side effects, so that
  // it can run on vectors (linalg.index, for one, is not).
  Block *body = op.getBody();
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
      if (match.reduces && arg && arg.getOwner() == body &&
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

struct VectorizeRowsPass
    : public smlir::impl::VectorizeRowsBase<VectorizeRowsPass> {
  using VectorizeRowsBase::VectorizeRowsBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
        "smlir-vectorize-rows", options,
        {"lanes", "vectors"},
        errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        vectors < 1 || vectors > 16) {
      getOperation().emitError("smlir-vectorize-rows: lanes must be 4, 8, 16 "
                               "or 32 and vectors 1 to 16");
      return signalPassFailure();
    }
    // Transposes that keep the innermost dimension (attention's head split
    // and merge) are row copies: generic ops like the others.
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::TransposeOp> transposes, moving;
    getOperation().walk([&](linalg::TransposeOp op) {
      ArrayRef<int64_t> permutation = op.getPermutation();
      if (!elementwise || permutation.size() < 2 ||
          !op.hasPureTensorSemantics() ||
          !isStaticDenseF32(op.getInput().getType()))
        return;
      if (permutation.back() == static_cast<int64_t>(permutation.size()) - 1)
        transposes.push_back(op);
      else
        moving.push_back(op);
    });
    for (linalg::TransposeOp op : moving) {
      OpBuilder b(op);
      Value result = buildTransposeKernel(b, op);
      op.getResult()[0].replaceAllUsesWith(result);
      op.erase();
    }
    for (linalg::TransposeOp op : transposes) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op)))
        return signalPassFailure();
    }
    SmallVector<RowKernel> matches;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<RowKernel> match = matchRowKernel(op))
        if (match->reduces || elementwise)
          matches.push_back(*match);
    });
    for (RowKernel &match : matches) {
      OpBuilder b(match.op);
      SmallVector<Value> results =
          RowKernelBuilder(b, match, lanes, vectors).build();
      for (auto [old, replacement] : llvm::zip(match.op.getResults(), results))
        old.replaceAllUsesWith(replacement);
      match.op.erase();
    }
  }
};

} // namespace
