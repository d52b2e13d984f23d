//===- ConvertSparseMLIRToNVGPU.cpp - 2:4 linears on sparse MMA -----------===//
//
// smlir.linear x[T, K] * W[R, K]^T with a 2:4 f16/bf16 W into an f32 y
// becomes a kernel of `mma.sp.sync` instructions (NM24KernelBuilder.cpp: the
// kernel and its fragment layouts). Every public function's 2:4 weight argument
// is replaced by its device-resident values and metadata (plus scratch buffers
// for x, y and the bias of each linear); each linear reading it
// (MatchNM24Linear.cpp) becomes copies in, a gpu.launch_func and a copy of y
// out.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/IR/SparseMLIROps.h"

#include "../../Utils/IntegerOptions.h"
#include "MatchNM24Linear.h"
#include "NM24KernelBuilder.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_CONVERTSPARSEMLIRTONVGPU
#include "SparseMLIR/Conversion/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::nm24;

namespace {

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
    // The host side has no lowering of smlir.linear: one not reading a 2:4
    // weight argument of a public function is an error here, not a failure
    // to bufferize later.
    WalkResult leftover = getOperation().walk([](LinearOp linear) {
      linear.emitError("smlir.linear has no GPU lowering: its weight is not "
                       "a 2:4 argument of a public function");
      return WalkResult::interrupt();
    });
    if (leftover.wasInterrupted())
      return signalPassFailure();
  }

  LogicalResult lowerWeight(func::FuncOp func, unsigned index,
                            NM24KernelBuilder &builder);
};


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
    s.bias = static_cast<bool>(linear.bias);
    s.output = linear.truncate ? element : Float32Type::get(&getContext());
    if (!builder.chooseTile(s))
      return linear.op.emitError("2:4 weight '")
             << name << "' cannot run on sparse tensor cores: " << s.tokens
             << " tokens are not a multiple of " << kWarpTokens;
    shapes.push_back(s);
  }

  // New arguments at the weight's position: values, metadata, then two
  // scratch buffers per linear.
  MLIRContext *ctx = &getContext();
  Location loc = weight.getLoc();
  auto attrs = [&](DeviceBuffer role, std::optional<KernelOperand> operand) {
    SmallVector<NamedAttribute> a = {
        NamedAttribute(StringAttr::get(ctx, kDeviceAttrName),
                       DeviceBufferAttr::get(ctx, role)),
        NamedAttribute(StringAttr::get(ctx, kTensorNameAttrName),
                       StringAttr::get(ctx, name))};
    if (role == DeviceBuffer::NM24Metadata)
      a.push_back(NamedAttribute(StringAttr::get(ctx, kMmaKAttrName),
                                 IntegerAttr::get(IntegerType::get(ctx, 64),
                                                  mmaK)));
    if (operand)
      a.push_back(NamedAttribute(StringAttr::get(ctx, kKernelOperandAttrName),
                                 KernelOperandAttr::get(ctx, *operand)));
    return DictionaryAttr::get(ctx, a);
  };
  unsigned next = index + 1;
  auto insert = [&](Type t, DeviceBuffer role,
                    std::optional<KernelOperand> operand =
                        std::nullopt) -> FailureOr<Value> {
    if (failed(func.insertArgument(next, t, attrs(role, operand), loc)))
      return failure();
    return func.getArgument(next++);
  };
  FailureOr<Value> values =
      insert(builder.valuesType(shape), DeviceBuffer::NM24Values);
  FailureOr<Value> meta =
      insert(builder.metaType(shape), DeviceBuffer::NM24Metadata);
  if (failed(values) || failed(meta))
    return failure();

  llvm::SetVector<Operation *> dead;
  for (auto [linear, s] : llvm::zip_equal(*linears, shapes)) {
    auto xType = MemRefType::get({s.tokens, s.depth}, element);
    auto yType = MemRefType::get({s.tokens, s.rows}, s.output);
    auto biasType = MemRefType::get({s.rows}, Float32Type::get(ctx));
    FailureOr<Value> dx =
        insert(xType, DeviceBuffer::Scratch, KernelOperand::X);
    FailureOr<Value> dy =
        insert(yType, DeviceBuffer::Scratch, KernelOperand::Y);
    FailureOr<Value> dbias =
        s.bias ? insert(biasType, DeviceBuffer::Scratch, KernelOperand::Bias)
               : FailureOr<Value>(Value());
    if (failed(dx) || failed(dy) || failed(dbias))
      return failure();
    gpu::GPUFuncOp kernel = builder.getOrCreateKernel(s);

    OpBuilder b(linear.op);
    Location l = linear.op.getLoc();
    ConstantPool pool{OpBuilder(linear.op), {}};
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
    // The kernel's y stands for the last op it computed: the linear, its
    // bias add or the truncation (which may sit after the linear in the
    // block: the bias operand then still dominates the launch).
    Operation *last = linear.truncate  ? linear.truncate.getOperation()
                      : linear.biasAdd ? linear.biasAdd.getOperation()
                                       : linear.op.getOperation();
    Value y = bufferization::ToTensorOp::create(
        b, l, last->getResult(0).getType(), host, /*restrict=*/true,
        /*writable=*/true);
    last->getResult(0).replaceAllUsesWith(y);
    for (Operation *op : {linear.truncate.getOperation(),
                          linear.biasAdd.getOperation()})
      if (op)
        dead.insert(op);
    dead.insert(linear.op);
  }
  // The epilogues, then the linears (all of W's readers).
  for (Operation *op : dead.takeVector())
    if (op->use_empty())
      op->erase();
  if (!weight.use_empty())
    return fail("it still has readers after lowering");
  return func.eraseArgument(index);
}

} // namespace
