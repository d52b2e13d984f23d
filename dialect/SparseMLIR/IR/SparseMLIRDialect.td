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
