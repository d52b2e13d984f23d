//===- NM24KernelBuilder.cpp - 2:4 linears on sparse MMA ------------------===//
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

#include "NM24KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::nm24;

bool NM24KernelBuilder::chooseTile(LinearShape &s) const {
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
    regs.push_back(asI32(b, loc,
                         vector::ExtractOp::create(b, loc, fragment,
                                                   ArrayRef<int64_t>{i})));
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
                  b.getDenseI32ArrayAttr(
                      {32, static_cast<int32_t>(warps(s)), 1}));
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
