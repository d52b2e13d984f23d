//===- SparsifierKeep.cpp - element-wise keep conditions ------------------===//
//
// SparsifierAttrInterface::buildKeep of each streaming sparsifier: whether
// it keeps one element, for a sparsifier after its producer
// (convert-smlir-to-sparse-tensor) or inside its producer's loop body
// (smlir-fuse-streaming-sparsifiers).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIRDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::smlir;

/// The call-number argument of the function around `op`, or null.
static Value findCallNumber(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  if (!func || func.isExternal())
    return {};
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, kCallNumberAttrName))
      return func.getArgument(i);
  return {};
}

static Value constantI32(OpBuilder &b, Location loc, uint32_t v) {
  return arith::ConstantOp::create(
      b, loc, b.getI32Type(),
      b.getIntegerAttr(b.getI32Type(), static_cast<int32_t>(v)));
}

static Value constantI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64Type(),
                                   b.getI64IntegerAttr(v));
}

// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so an
// element's random number depends only on (seed, linear index, call), never
// on the order threads visit elements. sparse_mlir/philox.py is the
// reference.
constexpr uint32_t kPhiloxM0 = 0xD2511F53, kPhiloxM1 = 0xCD9E8D57;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9, kPhiloxW1 = 0xBB67AE85;

/// The (high, low) 32-bit halves of a 32x32-bit product. Spelled with i64
/// arithmetic rather than arith.mului_extended, which has two results and so
/// is rejected inside a sparsified kernel body.
static std::pair<Value, Value> mulHiLo(OpBuilder &b, Location loc,
                                       uint32_t multiplier, Value x) {
  Type i64 = b.getI64Type(), i32 = b.getI32Type();
  Value wide = arith::MulIOp::create(
      b, loc, constantI64(b, loc, multiplier),
      arith::ExtUIOp::create(b, loc, i64, x));
  Value high = arith::TruncIOp::create(
      b, loc, i32, arith::ShRUIOp::create(b, loc, wide, constantI64(b, loc, 32)));
  Value low = arith::TruncIOp::create(b, loc, i32, wide);
  return {high, low};
}

/// The first word of Philox4x32-10 for counter `c` and key (seed low, high).
static Value buildPhilox(OpBuilder &b, Location loc, std::array<Value, 4> c,
                         uint64_t seed) {
  uint32_t k0 = static_cast<uint32_t>(seed);
  uint32_t k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    auto [hi0, lo0] = mulHiLo(b, loc, kPhiloxM0, c[0]);
    auto [hi1, lo1] = mulHiLo(b, loc, kPhiloxM1, c[2]);
    Value n0 = arith::XOrIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, hi1, c[1]), constantI32(b, loc, k0));
    Value n2 = arith::XOrIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, hi0, c[3]), constantI32(b, loc, k1));
    c = {n0, lo1, n2, lo0};
  }
  return c[0];
}

/// Splits an i64 into its (low, high) i32 words.
static std::pair<Value, Value> splitWords(OpBuilder &b, Location loc,
                                          Value wide) {
  Type i32 = b.getI32Type();
  Value lo = arith::TruncIOp::create(b, loc, i32, wide);
  Value hi = arith::TruncIOp::create(
      b, loc, i32, arith::ShRUIOp::create(b, loc, wide, constantI64(b, loc, 32)));
  return {lo, hi};
}

Value mlir::smlir::buildCallNumber(OpBuilder &b, Location loc, Operation *op) {
  // As an index cast, not the argument itself: sparsification takes a block
  // argument of the enclosing function used inside a kernel for one of the
  // kernel's own operands (an upstream bug: wrong tensor or an assertion).
  if (Value call = findCallNumber(op))
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), call);
  return arith::ConstantIndexOp::create(b, loc, 0);
}

/// `@__smlir_random_keep_<seed>_<cut>(linear: i64, call: index) -> i1`, the
/// keep decision of one random-fraction sparsifier, created on first use.
/// A call is one opaque operation to sparsification: the Philox rounds
/// spelled inline form an expression DAG whose tree, which sparsification's
/// lattice builder walks without sharing, grows exponentially.
static func::FuncOp getOrCreateRandomKeep(OpBuilder &b, ModuleOp module,
                                          RandomFractionAttr random) {
  // fraction * 2^24 is exact in f64, and so is the comparison with a 24-bit
  // integer: the cut is the same as the reference's.
  double cutValue = random.getFraction().convertToDouble() * 16777216.0;
  std::string name = ("__smlir_random_keep_" + Twine(random.getSeed()) + "_" +
                      Twine(static_cast<uint64_t>(std::ceil(cutValue))))
                         .str();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  Location loc = module.getLoc();
  Type i64 = b.getI64Type();
  auto func = func::FuncOp::create(
      b, loc, name, b.getFunctionType({i64, b.getIndexType()}, {b.getI1Type()}));
  func.setPrivate();
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto [indexLo, indexHi] = splitWords(b, loc, entry->getArgument(0));
  auto [callLo, callHi] = splitWords(
      b, loc, arith::IndexCastUIOp::create(b, loc, i64, entry->getArgument(1)));
  Value word = buildPhilox(b, loc, {indexLo, indexHi, callLo, callHi},
                           random.getSeed());
  Value bits24 = arith::ShRUIOp::create(b, loc, word, constantI32(b, loc, 8));
  Value u = arith::UIToFPOp::create(b, loc, b.getF64Type(), bits24);
  Value cut = arith::ConstantOp::create(b, loc, b.getF64Type(),
                                        b.getF64FloatAttr(cutValue));
  Value keep = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, u, cut);
  func::ReturnOp::create(b, loc, keep);
  return func;
}

/// Keep when uniform(seed, linear index, call) >= fraction, where uniform =
/// (word >> 8) * 2^-24 and word the first of Philox4x32-10.
static Value buildRandomKeep(OpBuilder &b, Location loc,
                             RandomFractionAttr random, ValueRange indices,
                             ValueRange sizes, Value callNumber,
                             ModuleOp module) {
  // Row-major linear index of the element.
  Value linear = arith::ConstantIndexOp::create(b, loc, 0);
  for (auto [index, size] : llvm::zip_equal(indices, sizes)) {
    linear = arith::MulIOp::create(b, loc, linear, size);
    linear = arith::AddIOp::create(b, loc, linear, index);
  }
  Value wide = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), linear);
  func::FuncOp keep = getOrCreateRandomKeep(b, module, random);
  return func::CallOp::create(b, loc, keep, ValueRange{wide, callNumber})
      .getResult(0);
}

/// Keep when |x| >= t, with t rounded up to the element type: for a
/// representable |x|, |x| >= rounded-up(t) exactly when |x| >= t. NaN is
/// dropped (`oge` is false for NaN).
static Value buildThresholdKeep(OpBuilder &b, Location loc,
                                ThresholdAttr threshold, Value element) {
  Type elementType = element.getType();
  llvm::APFloat cut = threshold.getValue();
  bool losesInfo = false;
  cut.convert(cast<FloatType>(elementType).getFloatSemantics(),
              llvm::APFloat::rmTowardPositive, &losesInfo);
  Value cutValue = arith::ConstantOp::create(
      b, loc, elementType, b.getFloatAttr(elementType, cut));
  Value magnitude = math::AbsFOp::create(b, loc, element);
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, magnitude,
                               cutValue);
}

FailureOr<Value> KeepAllAttr::buildKeep(OpBuilder &, Location, Value,
                                        ValueRange, ValueRange, Value,
                                        ModuleOp) const {
  // Every nonzero is kept: no condition.
  return Value();
}

FailureOr<Value> ThresholdAttr::buildKeep(OpBuilder &b, Location loc,
                                          Value element, ValueRange,
                                          ValueRange, Value, ModuleOp) const {
  return buildThresholdKeep(b, loc, *this, element);
}

FailureOr<Value> RandomFractionAttr::buildKeep(OpBuilder &b, Location loc,
                                               Value, ValueRange indices,
                                               ValueRange sizes,
                                               Value callNumber,
                                               ModuleOp module) const {
  return buildRandomKeep(b, loc, *this, indices, sizes, callNumber, module);
}
