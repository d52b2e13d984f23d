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

#include "SparseMLIR/IR/SparseMLIREnums.h.inc"
#include "SparseMLIR/IR/SparseMLIRAttrInterfaces.h.inc"

namespace mlir::smlir {
// Parsers / printers of custom attribute parameters (used by generated code).
FailureOr<llvm::APFloat> parseF64Parameter(AsmParser &parser);
void printF64Parameter(AsmPrinter &printer, const llvm::APFloat &value);
FailureOr<SmallVector<int64_t>> parseBlockParameter(AsmParser &parser);
void printBlockParameter(AsmPrinter &printer, ArrayRef<int64_t> block);
FailureOr<bool> parseBoolParameter(AsmParser &parser);

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

// After the attributes: the dialect's discardable-attribute helpers use them.
#include "SparseMLIR/IR/SparseMLIRDialect.h.inc"

namespace mlir::smlir {
// The discardable attributes' names, as the dialect's ODS declares them.
#define SMLIR_ATTR_NAME(constant, helper)                                      \
  constexpr StringLiteral constant = SparseMLIRDialect::helper::getNameStr();
SMLIR_ATTR_NAME(kWeightAttrName, WeightAttrHelper)
SMLIR_ATTR_NAME(kTensorNameAttrName, TensorNameAttrHelper)
SMLIR_ATTR_NAME(kSparsifierAttrName, SparsifierAttrHelper)
SMLIR_ATTR_NAME(kEncodingAttrName, EncodingAttrHelper)
SMLIR_ATTR_NAME(kStorageAttrName, StorageAttrHelper)
SMLIR_ATTR_NAME(kCallNumberAttrName, CallNumberAttrHelper)
SMLIR_ATTR_NAME(kDeviceAttrName, DeviceAttrHelper)
SMLIR_ATTR_NAME(kMmaKAttrName, MmaKAttrHelper)
SMLIR_ATTR_NAME(kKernelOperandAttrName, KernelOperandAttrHelper)
SMLIR_ATTR_NAME(kInferredEncodingAttrName, InferredEncodingAttrHelper)
SMLIR_ATTR_NAME(kFusionAttrName, FusionAttrHelper)
#undef SMLIR_ATTR_NAME
} // namespace mlir::smlir

#endif // SPARSE_MLIR_IR_SPARSEMLIRDIALECT_H
