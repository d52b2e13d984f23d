//===- KernelTags.h - discardable smlir.* attribute names -------*- C++ -*-===//
//
// The attributes passes leave on ops and function arguments for later
// passes (and for Python, which reads some of them from the IR). One
// spelling each, here.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H
#define SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::smlir {

// On linalg ops.
/// An element-wise op whose sparse result encoding was inferred.
constexpr llvm::StringLiteral kInferredEncodingAttrName =
    "smlir.inferred_encoding";
/// A streaming sparsifier fused into (or kept out of) its producer.
constexpr llvm::StringLiteral kFusedSparsifierAttrName =
    "smlir.fused_sparsifier";
constexpr llvm::StringLiteral kNotFusedAttrName = "smlir.not_fused";

// On function arguments.
/// A model weight (a parameter, bound once), not an input.
constexpr llvm::StringLiteral kWeightAttrName = "smlir.weight";
/// The torch name of the tensor (`encoder.0.linear1.weight`).
constexpr llvm::StringLiteral kTensorNameAttrName = "smlir.tensor_name";
/// The hoisted sparsifier and encoding of a weight argument.
constexpr llvm::StringLiteral kSparsifierAttrName = "smlir.sparsifier";
constexpr llvm::StringLiteral kEncodingAttrName = "smlir.encoding";
/// A sparse weight whose reader has no sparse lowering: read densely.
constexpr llvm::StringLiteral kFallbackAttrName = "smlir.fallback";
/// What a device-resident argument of a 2:4 linear holds (its values, its
/// metadata, scratch) and the MMA k the metadata is laid out for
/// (convert-smlir-to-nvgpu).
constexpr llvm::StringLiteral kDeviceAttrName = "smlir.device";
constexpr llvm::StringLiteral kMmaKAttrName = "smlir.mma_k";
/// Which kernel operand a scratch argument is: "x", "y" or "bias".
constexpr llvm::StringLiteral kKernelOperandAttrName = "smlir.kernel_operand";

} // namespace mlir::smlir

#endif // SPARSE_MLIR_TRANSFORMS_KERNELTAGS_H
