//===- TransposeKernel.h - transposes moving the innermost dim --*- C++ -*-===//

#ifndef SPARSE_MLIR_CODEGEN_TRANSPOSEKERNEL_H
#define SPARSE_MLIR_CODEGEN_TRANSPOSEKERNEL_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::smlir::codegen {

/// out = transpose(in) with a static f32 `in` of rank r >= 2 whose
/// innermost dimension a = r - 1 moves (to output position ja) and whose
/// dimension c = perm[r - 1] becomes the output's innermost: 8 x 8 tiles of
/// (c, a) through registers, the rest (partial tiles) one element at a time.
/// Emits it in an smlir.kernel; returns out.
Value buildTransposeKernel(OpBuilder &b, linalg::TransposeOp op);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_TRANSPOSEKERNEL_H
