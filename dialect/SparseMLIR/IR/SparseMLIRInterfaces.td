//===- SparseMLIRInterfaces.td - encoding / sparsifier ifaces -*- tablegen -*-===//

#ifndef SPARSE_MLIR_INTERFACES_TD
#define SPARSE_MLIR_INTERFACES_TD

include "mlir/IR/OpBase.td"

def SparseMLIR_EncodingAttrInterface : AttrInterface<"EncodingAttrInterface"> {
  let cppNamespace = "::mlir::smlir";
  let description = [{
    A storage format for a tensor. Implementations say which upstream
    `#sparse_tensor.encoding` they stand for and which tensor shapes they
    accept.

    ```mlir
    #smlir.csr                        // (i, j) -> (i : dense, j : compressed)
    #smlir.nm<n = 2, m = 4>           // (i, j floordiv 4 : dense, j mod 4 : structured[2, 4])
    ```
  }];
  let methods = [
    InterfaceMethod<[{
        Short, user-facing name of the format (`csr`, `bsr`, `2:4`, ...).
      }], "std::string", "getFormatName", (ins)>,
    InterfaceMethod<[{
        Returns the upstream sparse_tensor encoding for a tensor of rank
        `rank`, or a null attribute for the dense format. The caller must
        have checked the rank with `verifyShape`.
      }], "::mlir::sparse_tensor::SparseTensorEncodingAttr",
      "getSparseTensorEncoding", (ins "int64_t":$rank)>,
    InterfaceMethod<[{
        Checks that the format can store a tensor of this shape (rank,
        divisibility of static dimensions by block sizes).
      }], "::llvm::LogicalResult", "verifyShape",
      (ins "::llvm::ArrayRef<int64_t>":$shape,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError)>,
  ];
}

def SparseMLIR_SparsifierAttrInterface : AttrInterface<"SparsifierAttrInterface"> {
  let cppNamespace = "::mlir::smlir";
  let description = [{
    A rule that decides which values of a tensor are kept. The kind
    (STen's taxonomy) tells passes how it can be implemented:

    - `streaming`: decided per element in one pass with O(1) state, so it can
      be fused into the op that produces the tensor;
    - `blocking`: decided per block of values (n:m magnitude);
    - `materializing`: needs the whole tensor (magnitude pruning, block-wise
      fraction).
  }];
  let methods = [
    InterfaceMethod<"The STen kind of this sparsifier.",
      "::mlir::smlir::SparsifierKind", "getKind", (ins)>,
    InterfaceMethod<[{
        True when the sparsifier compares magnitudes, so the element type
        must be a floating-point type.
      }], "bool", "needsOrdering", (ins)>,
    InterfaceMethod<[{
        Checks the sparsifier's parameters against the tensor shape (block
        and group sizes must divide static dimensions).
      }], "::llvm::LogicalResult", "verifyShape",
      (ins "::llvm::ArrayRef<int64_t>":$shape,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError),
      /*methodBody=*/"", /*defaultImplementation=*/"return ::mlir::success();">,
    InterfaceMethod<[{
        Builds at `builder`'s insertion point (a kernel body) whether a
        streaming sparsifier keeps `element`, the value at `indices` of a
        tensor with dimension sizes `sizes`, as an i1. `callNumber` (an
        index, see `buildCallNumber`) is the call the mask is drawn for;
        helper functions go into `module`. Built only from single-result
        operations that upstream sparsification accepts in a kernel body.

        Returns a null value when every nonzero is kept, and failure for a
        sparsifier that is not streaming (it needs more than one element).
      }], "::mlir::FailureOr<::mlir::Value>", "buildKeep",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::Value":$element, "::mlir::ValueRange":$indices,
           "::mlir::ValueRange":$sizes, "::mlir::Value":$callNumber,
           "::mlir::ModuleOp":$module),
      /*methodBody=*/"", /*defaultImplementation=*/"return ::mlir::failure();">,
  ];
}

#endif // SPARSE_MLIR_INTERFACES_TD
