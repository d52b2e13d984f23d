//===- KernelBuilder.h - what every micro-kernel builder emits --*- C++ -*-===//
//
// Private to lib/: the kernel region (smlir.kernel), index math, masks and
// the 8 x 8 register transposes shared by smlir-lower-sparse-linear,
// smlir-lower-batch-matmul and smlir-vectorize-rows.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_KERNELBUILDER_H
#define SPARSE_MLIR_CODEGEN_KERNELBUILDER_H

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::smlir::codegen {

/// Emits `body` (which builds through `b`) inside an smlir.kernel named
/// `name`; `b` then inserts after the kernel.
template <typename BodyFn>
void emitKernelRegion(OpBuilder &b, Location loc, llvm::StringRef name,
                      BodyFn body) {
  auto kernel = KernelOp::create(b, loc, b.getStringAttr(name));
  OpBuilder::InsertionGuard guard(b);
  b.createBlock(&kernel.getBody());
  body();
}

/// The 8 x 8 transpose of `rows` (8 vectors of 8 f32 lanes): column c of the
/// result holds lane c of every row. The AVX network: unpack pairs of rows,
/// shuffle pairs of pairs, then exchange 128-bit halves (24 shuffles).
SmallVector<Value> transpose8x8(OpBuilder &b, Location loc,
                                ArrayRef<Value> rows);

/// `root` and the producers only it used (transposes, kernel, fill).
void eraseDeadChain(Operation *root);

/// Index math through one builder and location. Every helper creates its
/// constants anew (kernels are canonicalized later): callers rely on the
/// exact ops and their order.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value idx(int64_t v);
  Value add(Value l, Value r);
  Value mul(Value l, Value r);
  /// `v` as an index (unsigned: stored coordinates and positions).
  Value toIndex(Value v);
  Value load(Value memref, ValueRange indices);
  /// The first `count` of `lanes` lanes.
  Value prefixMask(int64_t lanes, Value count);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_KERNELBUILDER_H
