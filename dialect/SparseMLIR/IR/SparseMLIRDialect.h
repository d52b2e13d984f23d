//===- SparseMLIRDialect.h - smlir dialect, attributes ----------*- C++ -*-===//
//
// Public header of the smlir dialect: the dialect class, the STen sparsifier
// kinds, the encoding / sparsifier attribute interfaces and their attributes.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_IR_SPARSEMLIRDIALECT_H
#define SPARSE_MLIR_IR_SPARSEMLIRDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"

#include "SparseMLIR/IR/SparseMLIRDialect.h.inc"
#include "SparseMLIR/IR/SparseMLIREnums.h.inc"
#include "SparseMLIR/IR/SparseMLIRAttrInterfaces.h.inc"

namespace mlir::smlir {
// Parsers / printers of custom attribute parameters (used by generated code).
FailureOr<llvm::APFloat> parseF64Parameter(AsmParser &parser);
void printF64Parameter(AsmPrinter &printer, const llvm::APFloat &value);
FailureOr<SmallVector<int64_t>> parseBlockParameter(AsmParser &parser);
void printBlockParameter(AsmPrinter &printer, ArrayRef<int64_t> block);
FailureOr<bool> parseBoolParameter(AsmParser &parser);

/// The name of the i64 function argument that numbers the calls of a
/// compiled function: #smlir.random_fraction draws a new mask per call.
constexpr StringLiteral kCallNumberAttrName = "smlir.call_number";

/// The call number of the function around `op` as an index (the
/// `callNumber` of SparsifierAttrInterface::buildKeep): its
/// `smlir.call_number` argument, or 0 (the masks of call 0). Built at `b`'s
/// insertion point, outside any kernel.
Value buildCallNumber(OpBuilder &b, Location loc, Operation *op);

/// True when `value` is a tensor with a #sparse_tensor.encoding.
inline bool isSparseTensor(Value value) {
  return static_cast<bool>(
      sparse_tensor::getSparseTensorEncoding(value.getType()));
}
} // namespace mlir::smlir

#define GET_ATTRDEF_CLASSES
#include "SparseMLIR/IR/SparseMLIRAttrs.h.inc"

#endif // SPARSE_MLIR_IR_SPARSEMLIRDIALECT_H
