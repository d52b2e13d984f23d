//===- ConvertSparseMLIRToNVGPU.cpp - 2:4 linears on sparse MMA -----------===//
//
// x[T, K] * W[R, K]^T with a 2:4 f16/bf16 W becomes a kernel of
// `mma.sp.sync` instructions. The sparse MMA operand is A, so the kernel
// computes y^T = W * x^T: W's rows are the MMA's M (16 per fragment), tokens
// its N (8 per fragment), and the f32 accumulators are stored transposed
// into y[T, R].
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.sp", sparsity
// selector 0; g = lane / 4, t = lane % 4):
//   A (compressed values Wc[R, K/2], two kept values per group of four):
//     register 2j + h holds Wc[16 f + g + 8 h][kc + 8 j + 2 t .. +1] for
//     h in {0, 1} and j < mmaK / 16 (kc = k / 2 of the k-step). Python
//     stores Wc in that order (per 16-row tile and k-step, lane by lane), so
//     a lane's A fragment is one contiguous mmaK / 4 elements.
//   B (x, "column major" B[k][n] = x[n][k]): register i holds
//     x[8 f + g][k + 8 i + 2 t .. +1], i < mmaK / 8: what ldmatrix gives
//     lane 4g + t for 8x8 tile i when lanes 8i .. 8i + 7 address rows
//     8 f .. 8 f + 7 at column k + 8 i of x in shared memory.
//   C/D (f32): element (h, e) is y^T[16 f + g + 8 h][8 f' + 2 t + e].
//   Metadata: one 32-bit register per supplying thread; the low half holds
//     row g's 2-bit indices, the high half row g + 8's; each group of four
//     columns takes 4 bits (first kept index in the low 2 bits). m16n8k16:
//     thread 4g supplies columns 0..15 of the k-step; m16n8k32: threads 4g
//     and 4g + 1 supply columns 0..15 and 16..31. Python packs these
//     registers at compile time (sparse_mlir/cuda/nm24.py) as
//     meta[R/16][(K/mmaK) * Q] with entry g (k16) or 2g + j (k32); every
//     thread loads the entry of lane / 4 (and lane % 2).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/IR/SparseMLIROps.h"

#include "../../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_CONVERTSPARSEMLIRTONVGPU
#include "SparseMLIR/Conversion/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

constexpr int64_t kWarpRows = 64;     // 4 fragments of 16 weight rows
constexpr int64_t kWarpTokens = 32;   // 4 fragments of 8 tokens (at least)
constexpr int64_t kStageK = 64;       // x columns per shared-memory stage
constexpr int64_t kSmemPad = 8;       // row pitch of 72 elements (144 B):
                                      // ldmatrix's 8 rows hit distinct banks
constexpr int64_t kCopyElements = 8;  // 16-byte cp.async copies
constexpr int64_t kMaxTileRows = 512; // >= 1 copy per thread and stage
constexpr int64_t kMaxTileTokens = 128;
constexpr int64_t kMaxStaticSmemBytes = 48 * 1024; // without opting in
constexpr int64_t kMaxWarps = 8; // more (~128 registers a thread) cannot
                                 // launch: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
constexpr StringLiteral kKernelModule = "smlir_nm24_kernels";

/// What one kernel computes: y[T, R] (f32) = x[T, K] * W[R, K]^T.
struct LinearShape {
  Type element; // f16 or bf16
  int64_t rows, tokens, depth;
  int64_t tileRows = 0, tileTokens = 0; // this linear's thread-block tile
  int64_t warpTokens = kWarpTokens;      // tokens per warp: 32 or 64
  bool bias = false;                     // y += bias[row] in the epilogue
  Type output;                           // y's element: f32, or the weight's
};

/// A linear reading the weight: the matmul and its (f16/bf16) x operand.
struct WeightLinear {
  linalg::MatmulOp matmul;
  Value x;
  // The element-wise ops after it that the kernel's epilogue computes:
  // `+ bias[j]` (bias: a 1-d f32 tensor) and the truncation to the weight's
  // element type (torch-mlir's F.linear in f16/bf16). Either may be absent.
  linalg::GenericOp biasAdd, truncate;
  Value bias;
};

/// `op` is an all-parallel generic with one output whose body is the single
/// op `T` yielded.
template <typename T>
static T singleBodyOp(linalg::GenericOp op) {
  if (!op || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return nullptr;
  Block &body = op.getRegion().front();
  auto inner = dyn_cast<T>(&body.front());
  if (!inner || body.getTerminator()->getOperand(0) != inner->getResult(0))
    return nullptr;
  return inner;
}

/// The single reader of `v`, as a generic op.
static linalg::GenericOp singleGenericUser(Value v) {
  return v.hasOneUse() ? dyn_cast<linalg::GenericOp>(*v.getUsers().begin())
                       : nullptr;
}

/// Fills `linear`'s epilogue: y + bias[j] (identity map for y, (i, j) -> (j)
/// for the bias), then truncf to `element`, each only as the one reader of
/// the value before it.
static void matchEpilogue(WeightLinear &linear, Type element) {
  Value y = linear.matmul->getResult(0);
  MLIRContext *ctx = y.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap column = AffineMap::get(2, 0, getAffineDimExpr(1, ctx));
  linalg::GenericOp add = singleGenericUser(y);
  if (auto addf = singleBodyOp<arith::AddFOp>(add);
      addf && add.getNumDpsInputs() == 2 && add.getDpsInputs()[0] == y &&
      add.getIndexingMapsArray() ==
          SmallVector<AffineMap>{identity, column, identity} &&
      getElementTypeOrSelf(add.getResult(0).getType()).isF32()) {
    Block &body = add.getRegion().front();
    // The launch copies the bias in where the matmul is: it must exist there.
    Operation *biasDef = add.getDpsInputs()[1].getDefiningOp();
    bool available = !biasDef || (biasDef->getBlock() == add->getBlock() &&
                                  biasDef->isBeforeInBlock(linear.matmul));
    available &= cast<ShapedType>(add.getDpsInputs()[1].getType())
                     .hasStaticShape();
    if (available && ((addf.getLhs() == body.getArgument(0) &&
                       addf.getRhs() == body.getArgument(1)) ||
                      (addf.getLhs() == body.getArgument(1) &&
                       addf.getRhs() == body.getArgument(0)))) {
      linear.biasAdd = add;
      linear.bias = add.getDpsInputs()[1];
      y = add.getResult(0);
    }
  }
  linalg::GenericOp trunc = singleGenericUser(y);
  auto truncf = singleBodyOp<arith::TruncFOp>(trunc);
  if (truncf && trunc.getNumDpsInputs() == 1 &&
      truncf.getIn() == trunc.getRegion().front().getArgument(0) &&
      truncf.getType() == element &&
      llvm::all_of(trunc.getIndexingMapsArray(),
                   [&](AffineMap m) { return m == identity; }))
    linear.truncate = trunc;
}

/// `v` with an element-wise `arith.extf` generic looked through.
static Value stripExtF(Value v) {
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return v;
  Block &body = generic.getRegion().front();
  auto ext = dyn_cast<arith::ExtFOp>(&body.front());
  if (!ext || ext.getIn() != body.getArgument(0) ||
      body.getTerminator()->getOperand(0) != ext.getResult())
    return v;
  return generic.getDpsInputs()[0];
}

static bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// Index constants, each created once at a fixed point (the kernel's entry).
struct ConstantPool {
  OpBuilder b;
  llvm::SmallDenseMap<int64_t, Value> cache;
  Value get(Location loc, int64_t v) {
    Value &c = cache[v];
    if (!c)
      c = arith::ConstantIndexOp::create(b, loc, v);
    return c;
  }
};

/// Index arithmetic on `index` values at `b`'s insertion point.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  ConstantPool &pool;
  Value c(int64_t v) { return pool.get(loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, c(y)) : x; }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, c(y));
  }
  Value div(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, c(y));
  }
  Value rem(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, c(y));
  }
};

/// Builds the kernels and their launches for one module.
class NM24KernelBuilder {
public:
  NM24KernelBuilder(ModuleOp module, int64_t mmaK, int64_t maxTileRows,
                    int64_t maxTileTokens, int64_t warpTokens,
                    int64_t pipelineStages)
      : module(module), mmaK(mmaK), maxTileRows(maxTileRows),
        maxTileTokens(maxTileTokens), warpTokens(warpTokens),
        pipelineStages(pipelineStages) {}

  /// Shared memory of the x stages of a block of `tileTokens` tokens.
  int64_t smemBytes(int64_t tileTokens) const {
    return pipelineStages * tileTokens * (kStageK + kSmemPad) * 2;
  }

  /// The largest thread-block tile within the pass options that divides the
  /// linear: rows a power-of-two multiple of the warp's 64 (so every thread
  /// issues the same number of x copies), then tokens a multiple of 32, with
  /// at most 8 warps and x's stages within 48 KB of static shared memory
  /// (3 stages of 128 tokens are 54 KB). False when the shape is not made
  /// of whole warp tiles.
  bool chooseTile(LinearShape &s) const {
    s.tileRows = 0;
    for (int64_t r = kWarpRows; r <= maxTileRows; r *= 2)
      if (s.rows % r == 0)
        s.tileRows = r;
    s.warpTokens = s.tokens % warpTokens == 0 && warpTokens <= maxTileTokens
                       ? warpTokens
                       : kWarpTokens;
    s.tileTokens = 0;
    for (int64_t t = s.warpTokens; t <= maxTileTokens; t += s.warpTokens)
      if (s.tokens % t == 0 && s.tileRows &&
          (s.tileRows / kWarpRows) * (t / s.warpTokens) <= kMaxWarps &&
          smemBytes(t) <= kMaxStaticSmemBytes)
        s.tileTokens = t;
    return s.tileRows && s.tileTokens;
  }
  /// Warps per block: one per 64 x 32 (rows x tokens) sub-tile.
  static int64_t warps(const LinearShape &s) {
    return (s.tileRows / kWarpRows) * (s.tileTokens / s.warpTokens);
  }
  /// Metadata registers per 16-row tile and k-step (see the file comment).
  int64_t metaPerStep() const { return mmaK == 16 ? 8 : 16; }
  /// A-fragment elements one lane holds per 16-row tile and k-step.
  int64_t aElements() const { return mmaK / 4; }

  /// Values in fragment order (sparse_mlir/cuda/nm24.py): per 16-row tile
  /// and k-step, lane by lane, the lane's A registers; one 16-row tile per
  /// memref row.
  MemRefType valuesType(const LinearShape &s) const {
    return MemRefType::get({s.rows / 16, 8 * s.depth}, s.element);
  }
  MemRefType metaType(const LinearShape &s) const {
    return MemRefType::get({s.rows / 16, s.depth / mmaK * metaPerStep()},
                           IntegerType::get(module->getContext(), 32));
  }

  gpu::GPUFuncOp getOrCreateKernel(const LinearShape &s);

private:
  gpu::GPUModuleOp getOrCreateKernelModule();
  Value mma(OpBuilder &b, Location loc, const LinearShape &s, Value a,
            Value bFrag, Value acc, Value meta);

  ModuleOp module;
  int64_t mmaK, maxTileRows, maxTileTokens, warpTokens, pipelineStages;
  gpu::GPUModuleOp kernelModule;
  llvm::StringMap<gpu::GPUFuncOp> kernels;
};

gpu::GPUModuleOp NM24KernelBuilder::getOrCreateKernelModule() {
  if (kernelModule)
    return kernelModule;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());
  kernelModule = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModule);
  return kernelModule;
}

/// An i32 holding the two 16-bit elements of a vector<2 x bf16> register.
static Value asI32(OpBuilder &b, Location loc, Value reg) {
  Value v = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), reg);
  return vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{0});
}

/// The rows of a vector<n x 2 x bf16> fragment as i32 registers.
static SmallVector<Value> registersI32(OpBuilder &b, Location loc,
                                       Value fragment) {
  SmallVector<Value> regs;
  for (int64_t i = 0, e = cast<VectorType>(fragment.getType()).getDimSize(0);
       i < e; ++i)
    regs.push_back(asI32(
        b, loc, vector::ExtractOp::create(b, loc, fragment, ArrayRef<int64_t>{i})));
  return regs;
}

Value NM24KernelBuilder::mma(OpBuilder &b, Location loc, const LinearShape &s,
                             Value a, Value bFrag, Value acc, Value meta) {
  SmallVector<int64_t> shape = {16, 8, mmaK};
  if (s.element.isF16()) {
    Value meta2 = vector::BitCastOp::create(
        b, loc, VectorType::get({2}, b.getI16Type()),
        vector::BroadcastOp::create(b, loc,
                                    VectorType::get({1}, b.getI32Type()),
                                    meta));
    return nvgpu::MmaSparseSyncOp::create(b, loc, a, bFrag, acc, meta2, shape);
  }
  // bf16: nvvm.mma.sp.sync on 32-bit registers.
  SmallVector<Value> cF32;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t e = 0; e < 2; ++e)
      cF32.push_back(
          vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{h, e}));
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(4, f32));
  Value selector = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  std::array<NVVM::MMATypes, 2> types = {NVVM::MMATypes::bf16,
                                         NVVM::MMATypes::bf16};
  Value d = NVVM::MmaSpOp::create(b, loc, resultType, registersI32(b, loc, a),
                                  registersI32(b, loc, bFrag), cF32, meta,
                                  selector, shape, std::nullopt, types);
  Value out = acc;
  for (int64_t i = 0; i < 4; ++i) {
    Value x = LLVM::ExtractValueOp::create(b, loc, d, ArrayRef<int64_t>{i});
    out = vector::InsertOp::create(b, loc, x, out,
                                   ArrayRef<int64_t>{i / 2, i % 2});
  }
  return out;
}

// The kernel: a block computes a tileRows x tileTokens tile of y^T, each
// warp 64 x warpTokens (4 x 4 or 4 x 8 fragments of 16 x 8). Along K, x
// moves through pipelineStages shared-memory stages of 64 columns filled by
// 16-byte cp.async copies: the copies of the next stages are in flight while
// stage c is multiplied. B fragments come from shared memory through
// ldmatrix; A fragments (the compressed weight, in fragment order) and
// metadata straight from global memory with one 16-byte (8-byte for k16)
// load per lane, fragment and k-step, loaded one stage ahead into registers.
gpu::GPUFuncOp NM24KernelBuilder::getOrCreateKernel(const LinearShape &s) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "nm24_linear_" << s.element << "_k" << mmaK << "_" << s.tokens << "x"
     << s.rows << "x" << s.depth << (s.bias ? "_bias" : "") << "_"
     << s.output;
  if (gpu::GPUFuncOp existing = kernels.lookup(name))
    return existing;

  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(getOrCreateKernelModule().getBody());
  Type f32 = b.getF32Type();
  const int64_t tileTokens = s.tileTokens;
  auto xType = MemRefType::get({s.tokens, s.depth}, s.element);
  auto yType = MemRefType::get({s.tokens, s.rows}, s.output);
  auto smemType = MemRefType::get(
      {pipelineStages, tileTokens, kStageK + kSmemPad}, s.element,
      MemRefLayoutAttrInterface{},
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  SmallVector<Type> operands = {valuesType(s), metaType(s), xType, yType};
  if (s.bias)
    operands.push_back(MemRefType::get({s.rows}, f32));
  auto kernel = gpu::GPUFuncOp::create(b, loc, name,
                                       b.getFunctionType(operands, {}),
                                       TypeRange{smemType});
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // cp.async and ldmatrix address 16-byte rows of x in shared memory.
  kernel.setWorkgroupAttributionAttr(0, "llvm.align", b.getI64IntegerAttr(16));
  // The block size, for ptxas's register allocation (.maxntid). Capping
  // registers further (.minnctapersm 5, 6 or 8 blocks of 2 warps) spilled
  // the 128 accumulator registers: 494 -> 183 TF/s on an H100.
  kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                  b.getDenseI32ArrayAttr({32, static_cast<int32_t>(warps(s)), 1}));
  kernels[name] = kernel;

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value values = entry.getArgument(0), meta = entry.getArgument(1),
        x = entry.getArgument(2), y = entry.getArgument(3);
  Value smem = kernel.getWorkgroupAttributions().front();
  Value lane = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  // Every index constant goes first in the kernel.
  ConstantPool pool{OpBuilder(lane.getDefiningOp()), {}};
  IndexMath im{b, loc, pool};

  const int64_t warpsTokens = tileTokens / s.warpTokens;
  const int64_t threads = 32 * warps(s);
  const int64_t fragRows = kWarpRows / 16, fragTokens = s.warpTokens / 8;
  const int64_t stepsPerStage = kStageK / mmaK;
  const int64_t stages = s.depth / kStageK;
  const int64_t copiesPerThread =
      tileTokens * (kStageK / kCopyElements) / threads;
  const int64_t bTiles = mmaK / 8; // ldmatrix 8x8 tiles per B fragment
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  auto aType = VectorType::get({aElements()}, s.element);
  auto aFragType = VectorType::get({aElements() / 2, 2}, s.element);
  auto bFragType = VectorType::get({bTiles, 2}, s.element);

  Value warp = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::y);
  Value tid = im.add(im.mul(warp, 32), lane);
  Value g = im.div(lane, 4), t = im.rem(lane, 4);
  // Blocks next to each other in launch order share their x tile and walk
  // the (compressed, L2-resident) weight: x is read from DRAM about once.
  Value rowBase =
      im.mul(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x), s.tileRows);
  Value tokenBase =
      im.mul(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y), tileTokens);
  Value warpTokens = im.mul(im.rem(warp, warpsTokens), s.warpTokens);
  Value row0 = im.add(rowBase, im.mul(im.div(warp, warpsTokens), kWarpRows));
  Value tile0 = im.div(row0, 16);
  // The metadata register this thread loads within a k-step.
  Value metaSlot = mmaK == 16 ? g : im.add(im.mul(g, 2), im.rem(lane, 2));
  // The row (token) and 8-column tile whose address this lane gives ldmatrix.
  Value ldRow = im.rem(lane, 8);
  Value ldCol = im.mul(im.rem(im.div(lane, 8), bTiles), 8);

  // x[tokenBase + .., stage * kStageK + ..] -> smem[buffer]: one group.
  auto copyStage = [&](OpBuilder &cb, Location l, Value stage,
                       Value buffer) -> Value {
    IndexMath m{cb, l, pool};
    Value k0 = m.mul(stage, kStageK);
    SmallVector<Value> tokens;
    for (int64_t i = 0; i < copiesPerThread; ++i) {
      Value index = m.add(tid, i * threads);
      Value tok = m.div(index, kStageK / kCopyElements);
      Value col = m.mul(m.rem(index, kStageK / kCopyElements), kCopyElements);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          cb, l, tokenType, smem, ValueRange{buffer, tok, col}, x,
          ValueRange{m.add(tokenBase, tok), m.add(k0, col)},
          cb.getIndexAttr(kCopyElements), Value(), UnitAttr()));
    }
    return nvgpu::DeviceAsyncCreateGroupOp::create(cb, l, tokenType, tokens);
  };
  // The A fragments, then the metadata, of every k-step of `stage`, for the
  // warp's 4 fragment rows.
  auto loadA = [&](OpBuilder &lb, Location l, Value stage) {
    IndexMath m{lb, l, pool};
    SmallVector<Value> frags, metas;
    for (int64_t ks = 0; ks < stepsPerStage; ++ks) {
      Value step = m.add(m.mul(stage, stepsPerStage), ks);
      Value col = m.mul(m.add(m.mul(step, 32), lane), aElements());
      Value metaCol = m.add(m.mul(step, metaPerStep()), metaSlot);
      for (int64_t fr = 0; fr < fragRows; ++fr) {
        Value tile = m.add(tile0, fr);
        Value a = vector::LoadOp::create(
            lb, l, aType, values, ValueRange{tile, col}, /*nontemporal=*/false,
            llvm::MaybeAlign(aElements() * 2));
        frags.push_back(vector::ShapeCastOp::create(lb, l, aFragType, a));
        metas.push_back(
            memref::LoadOp::create(lb, l, meta, ValueRange{tile, metaCol}));
      }
    }
    llvm::append_range(frags, metas);
    return frags;
  };

  auto accType = VectorType::get({2, 2}, f32);
  Value zeroAcc = arith::ConstantOp::create(b, loc, accType,
                                            b.getZeroAttr(accType));
  const int64_t numAcc = fragRows * fragTokens;
  const int64_t numA = stepsPerStage * fragRows;
  // The first pipelineStages - 1 stages in flight before the loop.
  Value prologue;
  for (int64_t i = 0; i < pipelineStages - 1; ++i) {
    Value group = copyStage(b, loc, im.c(std::min(i, stages - 1)), im.c(i));
    prologue = prologue ? prologue : group;
  }
  SmallVector<Value> inits(numAcc, zeroAcc);
  llvm::append_range(inits, loadA(b, loc, im.c(0)));

  auto loop = scf::ForOp::create(
      b, loc, im.c(0), im.c(stages), im.c(1), inits,
      [&](OpBuilder &lb, Location l, Value stage, ValueRange args) {
        IndexMath m{lb, l, pool};
        Value buffer = m.rem(stage, pipelineStages);
        // The copy pipelineStages - 1 stages ahead (the last stage's again
        // at the end: same group count every iteration, and those buffers
        // are not read any more).
        const int64_t ahead = pipelineStages - 1;
        Value next = arith::MinUIOp::create(lb, l, m.add(stage, 1),
                                            m.c(stages - 1));
        Value far = arith::MinUIOp::create(lb, l, m.add(stage, ahead),
                                           m.c(stages - 1));
        Value group = copyStage(lb, l, far,
                                m.rem(m.add(stage, ahead), pipelineStages));
        // All but the newest groups done: this stage is in shared memory.
        nvgpu::DeviceAsyncWaitOp::create(lb, l, group,
                                         lb.getI32IntegerAttr(ahead));
        gpu::BarrierOp::create(lb, l);
        SmallVector<Value> nextA = loadA(lb, l, next);

        SmallVector<Value> acc(args.begin(), args.begin() + numAcc);
        for (int64_t ks = 0; ks < stepsPerStage; ++ks) {
          for (int64_t ft = 0; ft < fragTokens; ++ft) {
            Value row = m.add(m.add(warpTokens, 8 * ft), ldRow);
            Value col = m.add(ldCol, ks * mmaK);
            Value bFrag = nvgpu::LdMatrixOp::create(
                lb, l, bFragType, smem, ValueRange{buffer, row, col},
                /*transpose=*/false, bTiles);
            for (int64_t fr = 0; fr < fragRows; ++fr) {
              Value &a = acc[fr * fragTokens + ft];
              a = mma(lb, l, s, args[numAcc + ks * fragRows + fr], bFrag, a,
                      args[numAcc + numA + ks * fragRows + fr]);
            }
          }
        }
        // Everyone is done with this buffer before it is refilled.
        gpu::BarrierOp::create(lb, l);
        llvm::append_range(acc, nextA);
        scf::YieldOp::create(lb, l, acc);
      });
  // No copy may still be writing shared memory when the block exits (the
  // wait counts groups; its token operand is only an anchor).
  nvgpu::DeviceAsyncWaitOp::create(b, loc, prologue, b.getI32IntegerAttr(0));

  // y[token][row] = D[row][token]: element (h, e) of a fragment is row
  // g + 8h, token 2t + e.
  for (int64_t fr = 0; fr < fragRows; ++fr)
    for (int64_t ft = 0; ft < fragTokens; ++ft) {
      Value acc = loop.getResult(fr * fragTokens + ft);
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 2; ++e) {
          Value v = vector::ExtractOp::create(b, loc, acc,
                                              ArrayRef<int64_t>{h, e});
          Value row = im.add(im.add(row0, 16 * fr + 8 * h), g);
          Value tok = im.add(im.add(tokenBase, warpTokens),
                             im.add(im.mul(t, 2), 8 * ft + e));
          if (s.bias)
            v = arith::AddFOp::create(
                b, loc, v,
                memref::LoadOp::create(b, loc, entry.getArgument(4), row));
          if (s.output != f32)
            v = arith::TruncFOp::create(b, loc, s.output, v);
          memref::StoreOp::create(b, loc, v, y, ValueRange{tok, row});
        }
    }
  gpu::ReturnOp::create(b, loc);
  return kernel;
}

struct ConvertSparseMLIRToNVGPUPass
    : public smlir::impl::ConvertSparseMLIRToNVGPUBase<
          ConvertSparseMLIRToNVGPUPass> {
  using ConvertSparseMLIRToNVGPUBase::ConvertSparseMLIRToNVGPUBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
        "convert-smlir-to-nvgpu", options,
        {"mma-k", "tile-rows", "tile-tokens", "warp-tokens", "pipeline-stages"},
        errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    if (mmaK != 16 && mmaK != 32) {
      getOperation().emitError("convert-smlir-to-nvgpu: mma-k must be 16 "
                               "or 32, got ")
          << static_cast<int64_t>(mmaK);
      return signalPassFailure();
    }
    if (tileRows < kWarpRows || tileRows > kMaxTileRows ||
        !llvm::isPowerOf2_64(tileRows / kWarpRows) ||
        tileRows % kWarpRows || tileTokens < kWarpTokens ||
        tileTokens > kMaxTileTokens || tileTokens % kWarpTokens ||
        (warpTokens != 32 && warpTokens != 64)) {
      getOperation().emitError("convert-smlir-to-nvgpu: tile-rows must be "
                               "64, 128, 256 or 512, tile-tokens a multiple "
                               "of 32 up to 128 and warp-tokens 32 or 64, got ")
          << static_cast<int64_t>(tileRows) << ", "
          << static_cast<int64_t>(tileTokens) << " and "
          << static_cast<int64_t>(warpTokens);
      return signalPassFailure();
    }
    if (pipelineStages != 2 && pipelineStages != 3) {
      getOperation().emitError("convert-smlir-to-nvgpu: pipeline-stages "
                               "must be 2 or 3, got ")
          << static_cast<int64_t>(pipelineStages);
      return signalPassFailure();
    }
    NM24KernelBuilder builder(getOperation(), mmaK, tileRows, tileTokens,
                              warpTokens, pipelineStages);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.isPublic() || func.isExternal())
        continue;
      // Arguments are inserted and erased: visit from the last one.
      for (int64_t i = static_cast<int64_t>(func.getNumArguments()) - 1; i >= 0;
           --i)
        if (failed(lowerWeight(func, i, builder)))
          return signalPassFailure();
    }
  }

  LogicalResult lowerWeight(func::FuncOp func, unsigned index,
                            NM24KernelBuilder &builder);
};

/// The linears reading `weight`, or a diagnostic at the first reader that
/// is not one.
static FailureOr<SmallVector<WeightLinear>>
collectLinears(Value weight, StringRef name) {
  SmallVector<WeightLinear> linears;
  auto fail = [&](Operation *op, const Twine &why) {
    return op->emitError("2:4 weight '")
           << name << "' cannot run on sparse tensor cores: " << why;
  };
  for (Operation *user : weight.getUsers()) {
    auto transpose = dyn_cast<linalg::TransposeOp>(user);
    if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
      return fail(user, "expected it to be read only as x @ W^T "
                        "(linalg.transpose [1, 0] into linalg.matmul)");
    SmallVector<Operation *> readers;
    for (Operation *u : transpose->getResult(0).getUsers()) {
      if (isa<linalg::GenericOp>(u) &&
          stripExtF(u->getResult(0)) == transpose->getResult(0)) {
        llvm::append_range(readers, u->getResult(0).getUsers());
        continue;
      }
      readers.push_back(u);
    }
    for (Operation *reader : readers) {
      auto matmul = dyn_cast<linalg::MatmulOp>(reader);
      if (!matmul || matmul.hasUserDefinedMaps() ||
          stripExtF(matmul.getInputs()[1]) != transpose->getResult(0))
        return fail(reader, "expected W^T to be the right operand of a "
                            "linalg.matmul");
      auto outType = cast<RankedTensorType>(matmul.getOutputs()[0].getType());
      if (!outType.getElementType().isF32() ||
          !isZeroFill(matmul.getOutputs()[0]))
        return fail(matmul, "expected a zero-filled f32 accumulator");
      Value x = stripExtF(matmul.getInputs()[0]);
      auto xType = cast<RankedTensorType>(x.getType());
      if (xType.getElementType() !=
              getElementTypeOrSelf(weight.getType()) ||
          !xType.hasStaticShape() || sparse_tensor::getSparseTensorEncoding(xType))
        return fail(matmul, "expected a dense, static x of the weight's "
                            "element type");
      linears.push_back({matmul, x, {}, {}, {}});
      matchEpilogue(linears.back(), getElementTypeOrSelf(weight.getType()));
    }
  }
  return linears;
}

LogicalResult
ConvertSparseMLIRToNVGPUPass::lowerWeight(func::FuncOp func, unsigned index,
                                          NM24KernelBuilder &builder) {
  auto encoding =
      func.getArgAttrOfType<NMEncodingAttr>(index, kEncodingAttrName);
  if (!encoding)
    return success();
  auto nameAttr = func.getArgAttrOfType<StringAttr>(index, kTensorNameAttrName);
  std::string name = nameAttr ? nameAttr.str() : ("#" + std::to_string(index));
  Value weight = func.getArgument(index);
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  if (!type)
    return func.emitError("2:4 weight '")
           << name << "' (" << encoding << ") must be a ranked tensor, got "
           << weight.getType();
  Type element = type.getElementType();
  auto fail = [&](const Twine &why) {
    return func.emitError("2:4 weight '")
           << name << "' (" << encoding << ", "
           << RankedTensorType::get(type.getShape(), type.getElementType())
           << ") cannot run on sparse tensor cores: " << why;
  };
  if (encoding.getN() != 2 || encoding.getM() != 4)
    return fail("sparse tensor cores take 2:4 only");
  if (!element.isF16() && !element.isBF16())
    return fail("expected f16 or bf16 elements");
  if (type.getRank() != 2 || !type.hasStaticShape())
    return fail("expected a matrix of static shape");
  LinearShape shape{element, type.getDimSize(0), 0, type.getDimSize(1)};
  if (shape.rows % kWarpRows || shape.depth % kStageK)
    return fail("expected rows to be a multiple of " + Twine(kWarpRows) +
                " and columns a multiple of " + Twine(kStageK));
  FailureOr<SmallVector<WeightLinear>> linears =
      collectLinears(weight, name);
  if (failed(linears))
    return failure();
  SmallVector<LinearShape> shapes;
  for (WeightLinear &linear : *linears) {
    LinearShape s = shape;
    s.tokens = cast<RankedTensorType>(linear.x.getType()).getDimSize(0);
    s.bias = static_cast<bool>(linear.biasAdd);
    s.output = linear.truncate ? element : Float32Type::get(&getContext());
    if (!builder.chooseTile(s))
      return linear.matmul.emitError("2:4 weight '")
             << name << "' cannot run on sparse tensor cores: " << s.tokens
             << " tokens are not a multiple of " << kWarpTokens;
    shapes.push_back(s);
  }

  // New arguments at the weight's position: values, metadata, then two
  // scratch buffers per linear.
  MLIRContext *ctx = &getContext();
  Location loc = weight.getLoc();
  auto attrs = [&](StringRef role, StringRef operand) {
    SmallVector<NamedAttribute> a = {
        NamedAttribute(StringAttr::get(ctx, kDeviceAttrName),
                       StringAttr::get(ctx, role)),
        NamedAttribute(StringAttr::get(ctx, kTensorNameAttrName),
                       StringAttr::get(ctx, name))};
    if (role == "nm24_metadata")
      a.push_back(NamedAttribute(StringAttr::get(ctx, kMmaKAttrName),
                                 IntegerAttr::get(IntegerType::get(ctx, 64),
                                                  mmaK)));
    if (!operand.empty())
      a.push_back(NamedAttribute(StringAttr::get(ctx, kKernelOperandAttrName),
                                 StringAttr::get(ctx, operand)));
    return DictionaryAttr::get(ctx, a);
  };
  unsigned next = index + 1;
  auto insert = [&](Type t, StringRef role,
                    StringRef operand = "") -> FailureOr<Value> {
    if (failed(func.insertArgument(next, t, attrs(role, operand), loc)))
      return failure();
    return func.getArgument(next++);
  };
  FailureOr<Value> values = insert(builder.valuesType(shape), "nm24_values");
  FailureOr<Value> meta = insert(builder.metaType(shape), "nm24_metadata");
  if (failed(values) || failed(meta))
    return failure();

  llvm::SetVector<Operation *> dead;
  for (auto [linear, s] : llvm::zip_equal(*linears, shapes)) {
    auto xType = MemRefType::get({s.tokens, s.depth}, element);
    auto yType = MemRefType::get({s.tokens, s.rows}, s.output);
    auto biasType = MemRefType::get({s.rows}, Float32Type::get(ctx));
    FailureOr<Value> dx = insert(xType, "scratch", "x");
    FailureOr<Value> dy = insert(yType, "scratch", "y");
    FailureOr<Value> dbias =
        s.bias ? insert(biasType, "scratch", "bias") : FailureOr<Value>(Value());
    if (failed(dx) || failed(dy) || failed(dbias))
      return failure();
    gpu::GPUFuncOp kernel = builder.getOrCreateKernel(s);

    OpBuilder b(linear.matmul);
    Location l = linear.matmul.getLoc();
    ConstantPool pool{OpBuilder(linear.matmul), {}};
    IndexMath im{b, l, pool};
    Value xBuffer = bufferization::ToBufferOp::create(b, l, xType, linear.x,
                                                      /*readOnly=*/true);
    gpu::MemcpyOp::create(b, l, Type(), ValueRange{}, *dx, xBuffer);
    SmallVector<Value> operands = {*values, *meta, *dx, *dy};
    if (s.bias) {
      Value biasBuffer = bufferization::ToBufferOp::create(
          b, l, biasType, linear.bias, /*readOnly=*/true);
      gpu::MemcpyOp::create(b, l, Type(), ValueRange{}, *dbias, biasBuffer);
      operands.push_back(*dbias);
    }
    gpu::KernelDim3 grid{im.c(s.rows / s.tileRows),
                         im.c(s.tokens / s.tileTokens), im.c(1)};
    gpu::KernelDim3 block{im.c(32), im.c(NM24KernelBuilder::warps(s)),
                          im.c(1)};
    gpu::LaunchFuncOp::create(b, l, kernel, grid, block, Value(), operands);
    Value host = memref::AllocOp::create(b, l, yType);
    gpu::MemcpyOp::create(b, l, Type(), ValueRange{}, host, *dy);
    // The kernel's y stands for the last op it computed: the matmul, its
    // bias add or the truncation (which may sit after the matmul in the
    // block: the bias operand then still dominates the launch).
    Operation *last = linear.truncate   ? linear.truncate.getOperation()
                      : linear.biasAdd ? linear.biasAdd.getOperation()
                                       : linear.matmul.getOperation();
    Value y = bufferization::ToTensorOp::create(
        b, l, last->getResult(0).getType(), host, /*restrict=*/true,
        /*writable=*/true);
    last->getResult(0).replaceAllUsesWith(y);
    for (Operation *op : {linear.truncate.getOperation(),
                          linear.biasAdd.getOperation()})
      if (op)
        dead.insert(op);
    dead.insert(linear.matmul);
    for (Value v : linear.matmul->getOperands())
      if (Operation *def = v.getDefiningOp())
        dead.insert(def);
  }
  // The matmuls first, then their operands' producers (extf generics, the
  // zero fill, W's transposes) where nothing else reads them.
  for (Operation *op : dead.takeVector())
    if (op->use_empty())
      op->erase();
  for (Operation *user : llvm::make_early_inc_range(weight.getUsers()))
    for (Operation *u : llvm::make_early_inc_range(user->getUsers()))
      if (u->use_empty())
        u->erase();
  for (Operation *user : llvm::make_early_inc_range(weight.getUsers()))
    if (user->use_empty())
      user->erase();
  if (!weight.use_empty())
    return fail("it still has readers after lowering");
  return func.eraseArgument(index);
}

} // namespace
