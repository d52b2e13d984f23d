//===- SparseMLIROps.h - smlir operations -----------------------*- C++ -*-===//

#ifndef SPARSE_MLIR_IR_SPARSEMLIROPS_H
#define SPARSE_MLIR_IR_SPARSEMLIROPS_H

#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "SparseMLIR/IR/SparseMLIROps.h.inc"

#endif // SPARSE_MLIR_IR_SPARSEMLIROPS_H
