//===- BatchMatmul.h - register tiles for dense batch_matmul ----*- C++ -*-===//

#ifndef SPARSE_MLIR_CODEGEN_BATCHMATMUL_H
#define SPARSE_MLIR_CODEGEN_BATCHMATMUL_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::smlir::codegen {

/// y[b] = A[b] * B[b] with static dense f32 operands, default maps and a
/// zero init.
bool isPlainBatchMatmul(linalg::BatchMatmulOp op);

/// Emits `op` (a plain batch matmul) as register tiles of `rows` rows of y x
/// `vectors` vectors of `lanes` lanes along n in an smlir.kernel; returns y.
Value buildBatchMatmulKernel(OpBuilder &b, Location loc,
                             linalg::BatchMatmulOp op, int64_t rows,
                             int64_t vectors, int64_t lanes);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_BATCHMATMUL_H
