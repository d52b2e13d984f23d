//===- KernelTags.h - the smlir.kernel region builder -----------*- C++ -*-===//
//
// (The smlir.* attribute names are the dialect's: SparseMLIRDialect.h.)
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H
#define SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::smlir {

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

} // namespace mlir::smlir

#endif // SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H
