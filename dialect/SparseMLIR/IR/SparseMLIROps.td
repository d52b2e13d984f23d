//===- SparseMLIROps.td - smlir operations -----------------*- tablegen -*-===//

#ifndef SPARSE_MLIR_OPS_TD
#define SPARSE_MLIR_OPS_TD

include "mlir/Interfaces/SideEffectInterfaces.td"
include "SparseMLIR/IR/SparseMLIRAttrs.td"

class SparseMLIR_Op<string mnemonic, list<Trait> traits = []>
    : Op<SparseMLIR_Dialect, mnemonic, traits>;

def SparseMLIR_SparsifyOp : SparseMLIR_Op<"sparsify", [Pure]> {
  let summary = "Attach a sparsifier and a storage encoding to a tensor";
  let description = [{
    Produces `source` with the values the `sparsifier` drops set to zero,
    stored in `encoding`. The result type is the source type with the
    `#sparse_tensor.encoding` that `encoding` stands for (none for
    `#smlir.dense`). `tensor_name` (optional) is the tensor's user-facing name (a
    parameter's fully qualified name or a torch.fx node name) and is used in
    diagnostics and sparsity plans.

    The verifier checks that the encoding fits the shape (rank, static
    dimensions divisible by blocks and groups), that sparsifiers comparing
    magnitudes see a floating-point tensor, and that the result type carries
    exactly the encoding's sparse_tensor equivalent.

    ```mlir
    #CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed),
                                     posWidth = 32, crdWidth = 32 }>
    %w = smlir.sparsify %arg : tensor<64x32xf32> with #smlir.threshold<0.05>
        as #smlir.csr {tensor_name = "linear1.weight"} -> tensor<64x32xf32, #CSR>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source,
                       SparseMLIR_SparsifierAttrInterface:$sparsifier,
                       SparseMLIR_EncodingAttrInterface:$encoding,
                       OptionalAttr<StrAttr>:$tensor_name);
  let results = (outs AnyRankedTensor:$result);
  // The types come first: a dialect attribute directly followed by `:` would
  // take the type as its own.
  let assemblyFormat = [{
    $source `:` type($source) `with` $sparsifier `as` $encoding attr-dict
    `->` type($result)
  }];
  let builders = [
    // Infers the result type from the encoding (the caller has checked the
    // rank with EncodingAttrInterface::verifyShape).
    OpBuilder<(ins "::mlir::Value":$source,
                   "::mlir::smlir::SparsifierAttrInterface":$sparsifier,
                   "::mlir::smlir::EncodingAttrInterface":$encoding,
                   CArg<"::mlir::StringAttr", "{}">:$tensorName)>
  ];
  let extraClassDeclaration = [{
    /// The result type for `source` stored in `encoding`.
    static ::mlir::RankedTensorType inferResultType(
        ::mlir::RankedTensorType source,
        ::mlir::smlir::EncodingAttrInterface encoding);
  }];
  let hasVerifier = 1;
}

#endif // SPARSE_MLIR_OPS_TD
