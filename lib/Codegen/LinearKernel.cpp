//===- LinearKernel.cpp - register-tiled kernels for y = x * W^T ----------===//
//
// An smlir.linear y = x * W^T is lowered here, for a CSR, n:m or dense W[N, K]
// and f32 values, to explicit loops instead of upstream sparsification:
//
//   parallel over (m-block of MB tokens, chunk of weight rows):
//     pack x[m-block, :] feature-major into a K x MB slab (the transpose of
//       x, one cache-sized block at a time, never the whole xT)
//     for each block of R weight rows:
//       R x U vector accumulators (V lanes each, MB = U * V tokens)
//       for the stored entries the R rows have in common (lockstep):
//         acc[r][u] += broadcast(w) * slab[k, u*V : (u+1)*V]
//       the rest of each row alone (CSR rows differ in length)
//       write the R x MB tile of yT as MB rows of y (vectors of R lanes)
//
// With 4+ token blocks a CSR weight is first interleaved by row block
// (padded to the longest row: no per-row rest); n:m rows that share one
// pattern (#smlir.nm<..., rows = r>) load each stored k's slab vectors
// once for the tile's rows.
//
// so neither xT nor yT exists, R * U independent accumulation chains hide
// the FMA latency, and the slab row read for a stored entry is contiguous.
//
// What depends on W's layout is asked of its WeightAccess (DenseWeight.cpp,
// CSRWeight.cpp, NMWeight.cpp).
//
//===----------------------------------------------------------------------===//

#include "LinearKernel.h"
#include "MicrokernelBuilder.h"

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

/// The element types a kernel reads x and W in: f32, or half precision
/// (bf16, f16) extended to f32 where loaded.
static bool isKernelStorage(Type type) {
  return type.isF32() || type.isBF16() || type.isF16();
}

static std::optional<WeightLayout> classifyWeight(Type type) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return std::nullopt;
  if (!getSparseTensorEncoding(tensorType))
    return tensorType.getRank() == 2 && tensorType.hasStaticShape() &&
                   tensorType.getElementType().isF32()
               ? std::optional(WeightLayout{WeightLayout::Dense})
               : std::nullopt;
  SparseTensorType stt(tensorType);
  if (stt.getDimRank() != 2 || !stt.hasStaticDimShape() ||
      !isKernelStorage(stt.getElementType()))
    return std::nullopt;
  ArrayRef<LevelType> lvls = stt.getLvlTypes();
  if (stt.isIdentity() && lvls.size() == 2 && isDenseLT(lvls[0]) &&
      isCompressedLT(lvls[1]) && isUniqueLT(lvls[1]) && isOrderedLT(lvls[1]))
    return WeightLayout{WeightLayout::CSR};
  // (d0, d1) -> (d0 : dense, d1 floordiv m : dense, d1 mod m : structured[n, m])
  if (lvls.size() == 3 && isDenseLT(lvls[0]) && isDenseLT(lvls[1]) &&
      isNOutOfMLT(lvls[2]))
    return WeightLayout{WeightLayout::NOutOfM, static_cast<int64_t>(getN(lvls[2])),
                        static_cast<int64_t>(getM(lvls[2]))};
  if (std::optional<WeightLayout> bsr = classifyBSRWeight(stt))
    return bsr;
  return std::nullopt;
}


std::optional<SparseLinear> mlir::smlir::codegen::matchSparseLinear(LinearOp linear) {
  // x * W with W[K, N] and biases are left to smlir-decompose-linear.
  if (linear.getOrientation() != WeightOrientation::OutIn || linear.getBias())
    return std::nullopt;
  // Accumulate-into: y (into's buffer) is written in place, so its shape
  // must be static like x's.
  if (linear.getInto() && !linear.getResultType().hasStaticShape())
    return std::nullopt;
  Value weight = linear.getWeight();
  std::optional<WeightLayout> layout = classifyWeight(weight.getType());
  Value x = linear.getInput();
  RankedTensorType xType = linear.getInputType();
  // The kernels compute in f32: no f32 -> f64 accumulation. Half precision
  // x and W (one type) accumulate into an f32 y (RaiseLinear's
  // mixed-precision form; the truncation to the model's type follows).
  Type storage = xType.getElementType();
  Type weightElement =
      cast<RankedTensorType>(weight.getType()).getElementType();
  if (!layout || !xType.hasStaticShape() || !isKernelStorage(storage) ||
      weightElement != storage ||
      !linear.getResultType().getElementType().isF32())
    return std::nullopt;
  auto weightShape = linear.getWeightType().getShape();
  // Hoisted weights are function arguments that keep their smlir encoding.
  if (auto arg = dyn_cast<BlockArgument>(weight);
      arg && layout->kind == WeightLayout::NOutOfM)
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      if (auto nm = func.getArgAttrOfType<NMEncodingAttr>(arg.getArgNumber(),
                                                          kEncodingAttrName);
          nm && nm.getN() == layout->n && nm.getM() == layout->m)
        layout->sharedRows = nm.getRows();
  // A CSR argument whose smlir.encoding is #smlir.ell<width = k>: rows all
  // k long, read without positions.
  if (layout->kind == WeightLayout::CSR)
    if (std::optional<int64_t> width = ellWidth(weight, weightShape[1])) {
      layout->kind = WeightLayout::ELL;
      layout->width = *width;
    }
  return SparseLinear{linear, x, weight, *layout, xType.getDimSize(0),
                      xType.getDimSize(1), weightShape[0]};
}

WeightAccess::~WeightAccess() = default;

Value WeightAccess::groupK(MicrokernelBuilder &kb, Value j) const {
  return kb.idx(0);
}

void WeightAccess::accumulateGroups(MicrokernelBuilder &, Value, Value, Value,
                                    Value, ArrayRef<Value>,
                                    SmallVectorImpl<Value> &) const {
  llvm_unreachable("only n:m weights are read in k-slices");
}

static std::unique_ptr<WeightAccess> makeWeightAccess(const SparseLinear &lin,
                                                      bool bf16Pairs) {
  if (bf16Pairs)
    return makePairedNMWeight(lin);
  switch (lin.layout.kind) {
  case WeightLayout::Dense:
    return makeDenseWeight(lin);
  case WeightLayout::CSR:
    return makeCSRWeight(lin);
  case WeightLayout::NOutOfM:
    return lin.layout.sharedRows > 1 ? makeSharedRowsWeight(lin)
                                     : makeNMWeight(lin);
  case WeightLayout::BSR:
    return makeBSRWeight(lin);
  case WeightLayout::ELL:
    return makeELLWeight(lin);
  }
  llvm_unreachable("unknown weight layout");
}

MicrokernelBuilder::MicrokernelBuilder(OpBuilder &b, Location loc,
                                       const SparseLinear &linear,
                                       int64_t rows, int64_t vectors,
                                       int64_t lanes, bool bf16Pairs)
    : KernelBuilder(b, loc), lin(linear),
      access(makeWeightAccess(linear, bf16Pairs)),
      R(rows), V(lanes),
      U(std::min<int64_t>(vectors, llvm::divideCeil(linear.M, lanes))),
      MB(U * V), sliceGroups(access->groupsPerSlice(MB)),
      slices(access->slices(sliceGroups)), f32(b.getF32Type()),
      storage(cast<ShapedType>(linear.x.getType()).getElementType()),
      vecType(VectorType::get({V}, f32)), bf16Pairs(bf16Pairs) {}

/// Returns y[M, N] as a tensor.
Value MicrokernelBuilder::build() {
  x = bufferization::ToBufferOp::create(
      b, loc, MemRefType::get({lin.M, lin.K}, storage), lin.x,
      /*read_only=*/true);
  bindOutput();
  access->bindBuffers(*this);

  emitKernelRegion(b, loc, kernelName(), [&] {
    if (permutedDecode)
      buildPermutedDecodeLoops();
    else if (lin.M < kDecodeTokens)
      buildDecode();
    else
      buildTokenBlocks();
  });
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(cast<MemRefType>(y.getType()).getShape(), f32),
      y, /*restrict=*/true, /*writable=*/true);
}

std::string MicrokernelBuilder::kernelName() const {
  std::string kind = access->name(/*decode=*/lin.M < kDecodeTokens ||
                                             permutedDecode);
  if (permutedDecode)
    kind += "p"; // x permuted in registers
  return llvm::formatv("linear_{0}_{1}x{2}x{3}", kind, lin.M, lin.K, lin.N)
      .str();
}

Value MicrokernelBuilder::zeroVector() {
  return arith::ConstantOp::create(b, loc, vecType,
                                   DenseElementsAttr::get(vecType, 0.0f));
}

Value MicrokernelBuilder::widen(Value v) {
  Type type = v.getType();
  if (getElementTypeOrSelf(type).isF32())
    return v;
  if (auto vector = dyn_cast<VectorType>(type))
    return arith::ExtFOp::create(b, loc, vector.clone(f32), v);
  return arith::ExtFOp::create(b, loc, f32, v);
}

Value mlir::smlir::codegen::buildLinearKernel(OpBuilder &b, Location loc,
                                 const SparseLinear &linear, int64_t rows,
                                 int64_t vectors, int64_t lanes,
                                 bool bf16Pairs) {
  return MicrokernelBuilder(b, loc, linear, rows, vectors, lanes, bf16Pairs)
      .build();
}
