//===- SparseMLIRDialect.td - the smlir dialect ------------*- tablegen -*-===//
//
// The `smlir` dialect: storage encodings and sparsifiers for tensors of a
// PyTorch model, lowered to MLIR's sparse_tensor dialect.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_DIALECT_TD
#define SPARSE_MLIR_DIALECT_TD

include "mlir/IR/OpBase.td"

def SparseMLIR_Dialect : Dialect {
  let name = "smlir";
  let cppNamespace = "::mlir::smlir";
  let summary = "Storage encodings and sparsifiers for PyTorch tensors";
  let description = [{
    The `smlir` dialect describes *what a tensor's storage looks like*
    (encoding attributes: dense, CSR, CSC, COO, BSR, n:m) and *which values
    are kept* (sparsifier attributes classified as in the STen paper:
    streaming, blocking, materializing). The `smlir.sparsify` op attaches
    both to a tensor value; passes lower it to upstream `sparse_tensor`,
    `linalg` and `arith` so that the upstream sparsifier can generate code.

    Every encoding attribute implements `EncodingAttrInterface`, which yields
    the equivalent `#sparse_tensor.encoding`; every sparsifier attribute
    implements `SparsifierAttrInterface`, which yields its kind. Passes query
    the interfaces, never a list of attribute names.

    ```mlir
    %w = smlir.sparsify %arg : tensor<64x64xf32> with #smlir.threshold<0.05>
        as #smlir.csr -> tensor<64x64xf32, #CSR>
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  // Checks the typed discardable attributes of function arguments
  // (smlir.device, smlir.kernel_operand).
  let hasRegionArgAttrVerify = 1;
  // The attributes passes and Python leave on ops and function arguments,
  // named here once (`smlir.<name>`; C++ through the generated helpers,
  // Python through `_smlir.discardable_attr_names()`).
  let discardableAttrs = (ins
    // On function arguments (Python's annotations and the passes' notes).
    /// A model weight (a parameter, bound once), not an input.
    "::mlir::UnitAttr":$weight,
    /// The torch name of the tensor (`encoder.0.linear1.weight`).
    "::mlir::StringAttr":$tensor_name,
    /// The hoisted sparsifier and encoding of a weight argument.
    "::mlir::Attribute":$sparsifier,
    "::mlir::Attribute":$encoding,
    /// How smlir-sparse-fallback stored a sparse weight argument.
    "::mlir::smlir::StorageAttr":$storage,
    /// The i64 argument numbering the calls (#smlir.random_fraction draws
    /// a new mask per call).
    "::mlir::UnitAttr":$call_number,
    /// What a device-resident argument of a 2:4 linear holds
    /// (#smlir.device_buffer<nm24_values | nm24_metadata | scratch>), the
    /// MMA k its metadata is laid out for, and which kernel operand a
    /// scratch argument is (#smlir.kernel_operand<x | y | bias>)
    /// (convert-smlir-to-nvgpu; the dialect verifies them on arguments).
    "::mlir::smlir::DeviceBufferAttr":$device,
    "::mlir::IntegerAttr":$mma_k,
    "::mlir::smlir::KernelOperandAttr":$kernel_operand,
    // On ops.
    /// An element-wise op whose sparse result encoding was inferred from
    /// the named tensor (smlir-propagate-encodings).
    "::mlir::StringAttr":$inferred_encoding,
    /// Where a streaming sparsifier runs (smlir-fuse-streaming-sparsifiers).
    "::mlir::smlir::FusionAttr":$fusion
  );
  let extraClassDeclaration = [{
    /// Adds the attributes (defined next to their storage classes).
    void registerAttributes();
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::sparse_tensor::SparseTensorDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // SPARSE_MLIR_DIALECT_TD
