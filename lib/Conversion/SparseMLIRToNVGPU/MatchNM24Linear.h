//===- MatchNM24Linear.h - the linears of a 2:4 weight ----------*- C++ -*-===//
//
// Private to convert-smlir-to-nvgpu: finds the x @ W^T matmuls reading a 2:4
// weight and the epilogue (bias add, truncation) their kernel computes.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H
#define SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

namespace mlir::smlir::nm24 {

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

/// The linears reading `weight` (named `name` in diagnostics), each with its
/// epilogue matched, or a diagnostic at the first reader that is not one.
FailureOr<SmallVector<WeightLinear>> collectLinears(Value weight,
                                                    StringRef name);

} // namespace mlir::smlir::nm24

#endif // SPARSE_MLIR_LIB_CONVERSION_MATCHNM24LINEAR_H
