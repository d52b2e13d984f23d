//===- Passes.h - smlir conversion passes -----------------------*- C++ -*-===//

#ifndef SPARSE_MLIR_CONVERSION_PASSES_H
#define SPARSE_MLIR_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::smlir {
#define GEN_PASS_DECL
#include "SparseMLIR/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "SparseMLIR/Conversion/Passes.h.inc"
} // namespace mlir::smlir

#endif // SPARSE_MLIR_CONVERSION_PASSES_H
