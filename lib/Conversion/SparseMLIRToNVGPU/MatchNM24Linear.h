//===- MatchNM24Linear.h - the linears of a 2:4 weight ----------*- C++ -*-===//
//
// Private to convert-smlir-to-nvgpu: finds the smlir.linear ops reading a
// 2:4 weight and the epilogue (bias add, truncation) their kernel computes.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H
#define SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H

#include "SparseMLIR/IR/SparseMLIROps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

namespace mlir::smlir::nm24 {

/// A linear reading the weight: the op and its (f16/bf16) x operand.
struct WeightLinear {
  LinearOp op;
  Value x;
  // The epilogue the kernel computes: `+ bias[j]` (bias: a 1-d f32 tensor,
  // the op's bias operand or the single element-wise reader adding it,
  // `biasAdd`) and the truncation to the weight's element type (torch-mlir's
  // F.linear in f16/bf16). Any of them may be absent.
  linalg::GenericOp biasAdd, truncate;
  Value bias;
};

/// The linears reading `weight` (named `name` in diagnostics), each with its
/// epilogue matched, or a diagnostic at the first reader that is not one.
FailureOr<SmallVector<WeightLinear>> collectLinears(Value weight,
                                                    StringRef name);

} // namespace mlir::smlir::nm24

#endif // SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H
