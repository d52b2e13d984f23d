//===- Passes.h - smlir transformation passes -------------------*- C++ -*-===//

#ifndef SPARSE_MLIR_TRANSFORMS_PASSES_H
#define SPARSE_MLIR_TRANSFORMS_PASSES_H

#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::smlir {
#define GEN_PASS_DECL
#include "SparseMLIR/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

#endif // SPARSE_MLIR_TRANSFORMS_PASSES_H
