//===- SparseMLIRAttrs.td - encodings and sparsifiers ------*- tablegen -*-===//

#ifndef SPARSE_MLIR_ATTRS_TD
#define SPARSE_MLIR_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "SparseMLIR/IR/SparseMLIRDialect.td"
include "SparseMLIR/IR/SparseMLIRInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums and parameters
//===----------------------------------------------------------------------===//

def SparseMLIR_SparsifierKind : I32EnumAttr<"SparsifierKind",
    "STen sparsifier kind", [
      I32EnumAttrCase<"Streaming", 0, "streaming">,
      I32EnumAttrCase<"Blocking", 1, "blocking">,
      I32EnumAttrCase<"Materializing", 2, "materializing">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

def SparseMLIR_WeightOrientation : I32EnumAttr<"WeightOrientation",
    "how a linear's weight is indexed", [
      I32EnumAttrCase<"OutIn", 0, "out_in">,
      I32EnumAttrCase<"InOut", 1, "in_out">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

// `#smlir.weight_orientation<in_out>`: W[K, N] (x @ W, HF's Conv1D) rather
// than nn.Linear's W[N, K].
def SparseMLIR_WeightOrientationAttr
    : EnumAttr<SparseMLIR_Dialect, SparseMLIR_WeightOrientation,
               "weight_orientation"> {
  let assemblyFormat = "`<` $value `>`";
}

def SparseMLIR_OperandLayout : I32EnumAttr<"OperandLayout",
    "how a matmul operand is read", [
      I32EnumAttrCase<"Identity", 0, "identity">,
      I32EnumAttrCase<"Transposed", 1, "transposed">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

// `#smlir.operand_layout<transposed>`: the operand is stored as the
// transpose of what the product reads (dy [T, N] read as dy^T [N, T]).
def SparseMLIR_OperandLayoutAttr
    : EnumAttr<SparseMLIR_Dialect, SparseMLIR_OperandLayout,
               "operand_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

// A float printed in its shortest round-trip form; parsed from a decimal or
// a hexadecimal bit pattern (0x7FF8000000000000 is NaN).
class SparseMLIR_F64Parameter<string desc> : APFloatParameter<desc> {
  let parser = "::mlir::smlir::parseF64Parameter($_parser)";
  let printer = "::mlir::smlir::printF64Parameter($_printer, $_self)";
}

// `[r, c]`: a block shape.
def SparseMLIR_BlockParameter : ArrayRefParameter<"int64_t", "block shape"> {
  let parser = "::mlir::smlir::parseBlockParameter($_parser)";
  let printer = "::mlir::smlir::printBlockParameter($_printer, $_self)";
}

// Index bit width of positions / coordinates: 0 means `index` (64 bits).
class SparseMLIR_WidthParameter<string default>
    : DefaultValuedParameter<"unsigned", default,
                             "bit width (0 = index, 8, 16, 32, 64)">;

class SparseMLIR_BoolParameter<string default>
    : DefaultValuedParameter<"bool", default, "true or false"> {
  let parser = "::mlir::smlir::parseBoolParameter($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

//===----------------------------------------------------------------------===//
// Encodings
//===----------------------------------------------------------------------===//

class SparseMLIR_Encoding<string name, string attrMnemonic>
    : AttrDef<SparseMLIR_Dialect, name,
              [DeclareAttrInterfaceMethods<SparseMLIR_EncodingAttrInterface>]> {
  let mnemonic = attrMnemonic;
}

def SparseMLIR_DenseEncodingAttr : SparseMLIR_Encoding<"DenseEncoding", "dense"> {
  let summary = "Dense (row-major) storage";
  let description = [{
    Every value is stored; the tensor type carries no sparse_tensor encoding.
    A sparsifier attached with a dense encoding only zeroes values.

    ```mlir
    %m = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.1>
        as #smlir.dense -> tensor<8x8xf32>
    ```
  }];
}

def SparseMLIR_CSREncodingAttr : SparseMLIR_Encoding<"CSREncoding", "csr"> {
  let summary = "Compressed sparse rows";
  let description = [{
    Rank >= 2: every leading dimension dense, the last one compressed, so a
    rank-3 tensor is a batch of CSR matrices. Buffers are the positions
    (torch's `crow_indices`), coordinates (`col_indices`) and values.

    ```mlir
    #smlir.csr                                  // 32-bit positions and coordinates
    #smlir.csr<posWidth = 64, crdWidth = 16>
    // tensor<MxN> -> #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed),
    //                                          posWidth = 32, crdWidth = 32 }>
    ```
  }];
  let parameters = (ins SparseMLIR_WidthParameter<"32">:$posWidth,
                        SparseMLIR_WidthParameter<"32">:$crdWidth);
  let assemblyFormat = "(`<` struct(params)^ `>`)?";
  let genVerifyDecl = 1;
}

def SparseMLIR_CSCEncodingAttr : SparseMLIR_Encoding<"CSCEncoding", "csc"> {
  let summary = "Compressed sparse columns";
  let description = [{
    Rank >= 2: leading dimensions dense, then the last dimension dense and the
    one before it compressed (column-major within each matrix).

    ```mlir
    #smlir.csc   // (d0, d1) -> (d1 : dense, d0 : compressed)
    ```
  }];
  let parameters = (ins SparseMLIR_WidthParameter<"32">:$posWidth,
                        SparseMLIR_WidthParameter<"32">:$crdWidth);
  let assemblyFormat = "(`<` struct(params)^ `>`)?";
  let genVerifyDecl = 1;
}

def SparseMLIR_COOEncodingAttr : SparseMLIR_Encoding<"COOEncoding", "coo"> {
  let summary = "Coordinate list";
  let description = [{
    Rank >= 1: the first dimension `compressed(nonunique)`, the others
    `singleton` with coordinates stored as separate arrays (structure of
    arrays), as torch's `indices()` rows.

    ```mlir
    #smlir.coo   // (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa))
    ```
  }];
  let parameters = (ins SparseMLIR_WidthParameter<"32">:$posWidth,
                        SparseMLIR_WidthParameter<"32">:$crdWidth);
  let assemblyFormat = "(`<` struct(params)^ `>`)?";
  let genVerifyDecl = 1;
}

def SparseMLIR_BSREncodingAttr : SparseMLIR_Encoding<"BSREncoding", "bsr"> {
  let summary = "Block compressed sparse rows";
  let description = [{
    Rank 2: the matrix is tiled into `r x c` blocks; block rows are dense,
    block columns compressed, and each stored block is dense. Static
    dimensions must be divisible by the block.

    ```mlir
    #smlir.bsr<block = [4, 4]>
    // (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense)
    ```
  }];
  let parameters = (ins SparseMLIR_BlockParameter:$block,
                        SparseMLIR_WidthParameter<"32">:$posWidth,
                        SparseMLIR_WidthParameter<"32">:$crdWidth);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def SparseMLIR_NMEncodingAttr : SparseMLIR_Encoding<"NMEncoding", "nm"> {
  let summary = "n:m structured sparsity along the last dimension";
  let description = [{
    Rank >= 1, `0 < n < m`: every group of `m` consecutive values of the last
    dimension holds at most `n` nonzeros. Only the `n` values and their
    in-group positions (`crdWidth` bits each, default 8) are stored. 2:4 is
    the format of NVIDIA sparse tensor cores.

    With `rows = r > 1` (STen's grouped n:m), every `r` consecutive indices
    of the second-to-last dimension (weight rows) share one pattern: each
    group of `m` keeps the same positions in all `r` rows. The storage is
    the same (so any n:m reader reads it); a linear's micro-kernel reads
    each activation row once for the `r` weight rows instead of once per row.
    Where `r` does not divide the dimension, the last group holds the rows
    left.

    ```mlir
    #smlir.nm<n = 2, m = 4>
    // (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])
    #smlir.nm<n = 2, m = 4, rows = 4>
    ```
  }];
  let parameters = (ins "int64_t":$n, "int64_t":$m,
                        SparseMLIR_WidthParameter<"8">:$crdWidth,
                        DefaultValuedParameter<"int64_t", "1",
                                               "rows sharing one pattern">:$rows);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// `width = k`: a width the user gave (>= 1); left out: picked from the weight.
def SparseMLIR_EllWidthParameter
    : OptionalParameter<"std::optional<int64_t>", "nonzeros stored per row"> {
  let printer = "$_printer << *$_self";
}

def SparseMLIR_ELLEncodingAttr : SparseMLIR_Encoding<"ELLEncoding", "ell"> {
  let summary = "ELLPACK: every row stores the same number of entries";
  let description = [{
    Rank 2: each row stores `width` (column, value) pairs, its first
    nonzeros by column, padded with zeros at columns the row does not use
    where it has fewer; no positions are stored (row `i`'s entries are
    `i * width ... (i + 1) * width - 1`). Buffers: the coordinates
    (`crdWidth` bits each, rows x width) and the values.

    `width` left out: picked when the weight is stored, from its row counts
    (alone: the longest row; as a hybrid's first part: the median row).
    Verified: `width >= 1`. Rows longer than `width` need a second part
    (`#smlir.hybrid<[#smlir.ell<...>, #smlir.coo], ...>`). No upstream
    level type has implicit positions: with a width, its
    `#sparse_tensor.encoding` is the CSR whose rows all hold `width`
    entries (64-bit positions 0, width, 2 * width, ..., passed but not
    read by the ELL micro-kernel: a weight argument whose `smlir.encoding`
    is `#smlir.ell<width = k>` takes it, see smlir-lower-sparse-linear);
    without one there is none and `smlir.sparsify` refuses it.

    ```mlir
    #smlir.ell<width = 4>
    #smlir.ell                      // width picked from the weight
    ```
  }];
  let parameters = (ins SparseMLIR_EllWidthParameter:$width,
                        SparseMLIR_WidthParameter<"32">:$crdWidth);
  let assemblyFormat = "(`<` struct(params)^ `>`)?";
  let genVerifyDecl = 1;
}

def SparseMLIR_HybridEncodingAttr : SparseMLIR_Encoding<"HybridEncoding", "hybrid"> {
  let summary = "Composable format: a matrix stored as the sum of two sparse parts";
  let description = [{
    SparseTIR's composable formats. The tensor is split into two disjoint
    parts, each stored in its own sparse format; a reader computes with each
    part and sums. With a block format first (`bsr`), a block goes to it when
    at least `threshold` of its entries are nonzero; every other nonzero goes
    to the second part. With `ell` first, each row's first `width` nonzeros
    go to it and the rest to the second part (`coo` or `csr`); `threshold`
    is then unused.

    Verified: exactly two parts, each a sparse format (not `dense`, not
    itself hybrid); `ell` only first, followed by `coo` or `csr`;
    `threshold` in [0, 1]; a shape must suit both parts.
    There is no single upstream `#sparse_tensor.encoding` for it
    (`getSparseTensorEncoding` is null): linear regions store and run the two
    parts, and `smlir.sparsify` refuses it.

    ```mlir
    #smlir.hybrid<[#smlir.bsr<block = [4, 4]>, #smlir.csr], threshold = 0.5>
    #smlir.hybrid<[#smlir.ell<width = 4>, #smlir.coo], threshold = 0.5>
    ```
  }];
  let parameters = (ins
      ArrayRefParameter<"::mlir::smlir::EncodingAttrInterface", "parts">:$parts,
      SparseMLIR_F64Parameter<"fill a block needs to be stored in the first part">:$threshold);
  let assemblyFormat = "`<` `[` $parts `]` `,` `threshold` `=` $threshold `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Sparsifiers
//===----------------------------------------------------------------------===//

// `overridden` lists interface methods with a default that the attribute
// implements itself.
class SparseMLIR_Sparsifier<string name, string attrMnemonic,
                            list<string> overridden = []>
    : AttrDef<SparseMLIR_Dialect, name,
              [DeclareAttrInterfaceMethods<SparseMLIR_SparsifierAttrInterface,
                                           overridden>]> {
  let mnemonic = attrMnemonic;
}

def SparseMLIR_KeepAllAttr
    : SparseMLIR_Sparsifier<"KeepAll", "keep_all", ["buildKeep"]> {
  let summary = "Keep every nonzero (streaming)";
  let description = [{
    Keeps every value; only exact zeros are dropped by a sparse encoding
    (e.g. the zeros a ReLU produces).

    ```mlir
    %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all
        as #smlir.csr -> tensor<8x8xf32, #CSR>
    ```
  }];
}

def SparseMLIR_ThresholdAttr
    : SparseMLIR_Sparsifier<"Threshold", "threshold", ["buildKeep"]> {
  let summary = "Keep |x| >= value (streaming)";
  let description = [{
    Keeps the values whose magnitude is at least `value` (a non-negative,
    non-NaN number); NaN inputs are dropped. Needs a floating-point tensor.

    ```mlir
    #smlir.threshold<0.05>
    ```
  }];
  let parameters = (ins SparseMLIR_F64Parameter<"threshold">:$value);
  let assemblyFormat = "`<` $value `>`";
  let builders = [AttrBuilder<(ins "double":$value), [{
    return $_get($_ctxt, ::llvm::APFloat(value));
  }]>];
  let genVerifyDecl = 1;
}

def SparseMLIR_RandomFractionAttr
    : SparseMLIR_Sparsifier<"RandomFraction", "random_fraction",
                            ["buildKeep"]> {
  let summary = "Drop a random fraction of the values (streaming)";
  let description = [{
    Drops each value independently with probability `fraction`, using a
    counter-based random number generator keyed by `seed` and the element's
    linear index, so the mask does not depend on thread order.

    ```mlir
    #smlir.random_fraction<fraction = 0.1, seed = 0>
    ```
  }];
  let parameters = (ins SparseMLIR_F64Parameter<"fraction dropped">:$fraction,
                        DefaultValuedParameter<"uint64_t", "0", "seed">:$seed);
  let assemblyFormat = "`<` struct(params) `>`";
  let builders = [AttrBuilder<(ins "double":$fraction, "uint64_t":$seed), [{
    return $_get($_ctxt, ::llvm::APFloat(fraction), seed);
  }]>];
  let genVerifyDecl = 1;
}

def SparseMLIR_ScalarFractionAttr
    : SparseMLIR_Sparsifier<"ScalarFraction", "scalar_fraction"> {
  let summary = "Magnitude pruning: drop the fraction of smallest |x| (materializing)";
  let description = [{
    Drops the `fraction` of values with the smallest magnitude, i.e. keeps the
    `numel - floor(fraction * numel)` largest; of equal magnitudes the lower
    row-major index is kept first, and NaN ranks below every number (dropped
    first). Needs the whole tensor to find the cut-off.

    ```mlir
    #smlir.scalar_fraction<0.9>
    ```
  }];
  let parameters = (ins SparseMLIR_F64Parameter<"fraction dropped">:$fraction);
  let assemblyFormat = "`<` $fraction `>`";
  let builders = [AttrBuilder<(ins "double":$fraction), [{
    return $_get($_ctxt, ::llvm::APFloat(fraction));
  }]>];
  let genVerifyDecl = 1;
}

def SparseMLIR_BlockFractionAttr
    : SparseMLIR_Sparsifier<"BlockFraction", "block_fraction", ["verifyShape"]> {
  let summary = "Drop the fraction of blocks with the smallest L1 norm (materializing)";
  let description = [{
    Tiles the trailing dimensions into blocks and drops the `fraction` of
    blocks with the smallest L1 norm, whole. Norms are summed in f64, row by
    row within the block; equal norms keep the lower row-major block index
    first, and a NaN norm ranks lowest. The block must divide the static
    trailing dimensions. Pairs with `#smlir.bsr` of the same block.

    ```mlir
    #smlir.block_fraction<fraction = 0.75, block = [4, 4]>
    ```
  }];
  let parameters = (ins SparseMLIR_F64Parameter<"fraction dropped">:$fraction,
                        SparseMLIR_BlockParameter:$block);
  let assemblyFormat = "`<` struct(params) `>`";
  let builders = [AttrBuilder<(ins "double":$fraction,
                                   "::llvm::ArrayRef<int64_t>":$block), [{
    return $_get($_ctxt, ::llvm::APFloat(fraction), block);
  }]>];
  let genVerifyDecl = 1;
}

def SparseMLIR_NMMagnitudeAttr
    : SparseMLIR_Sparsifier<"NMMagnitude", "nm_magnitude", ["verifyShape"]> {
  let summary = "Keep the n largest |x| of every m along a dimension (blocking)";
  let description = [{
    Along dimension `dim` (negative counts from the end), every group of `m`
    consecutive values keeps its `n` largest magnitudes (ties broken by lower
    index). With `transposable = true` the tensor must be a matrix and each
    `m x m` tile keeps at most `n` values in every row *and* every column
    (greedy: the tile's values by magnitude descending, ties to the lower
    row-major index in the tile, each kept while its row and column hold
    fewer than `n`), so the transpose is n:m too; `dim` is then unused. NaN
    ranks below every number.

    With `rows = r > 1` (`dim` the last dimension), every `r` consecutive
    indices of the second-to-last dimension share one pattern (STen's
    grouped n:m): a group keeps the `n` positions with the largest sum of
    |x| over its `r` rows, in all of them (a last group of fewer rows, where
    `r` does not divide the dimension, sums the rows it has).

    ```mlir
    #smlir.nm_magnitude<n = 2, m = 4>
    #smlir.nm_magnitude<n = 2, m = 4, dim = 0, transposable = true>
    #smlir.nm_magnitude<n = 2, m = 4, rows = 4>
    ```
  }];
  let parameters = (ins "int64_t":$n, "int64_t":$m,
                        DefaultValuedParameter<"int64_t", "-1", "dimension">:$dim,
                        SparseMLIR_BoolParameter<"false">:$transposable,
                        DefaultValuedParameter<"int64_t", "1",
                                               "rows sharing one pattern">:$rows);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Decisions passes record for later passes and for Python
//===----------------------------------------------------------------------===//

def SparseMLIR_StorageKind : I32EnumAttr<"StorageKind",
    "how an encoded weight argument is stored", [
      I32EnumAttrCase<"Sparse", 0, "sparse">,
      I32EnumAttrCase<"Dense", 1, "dense">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

def SparseMLIR_StorageAttr : AttrDef<SparseMLIR_Dialect, "Storage"> {
  let mnemonic = "storage";
  let summary = "How an encoded weight argument is stored, and why";
  let description = [{
    Left on each sparse weight argument by `smlir-sparse-fallback`: `sparse`
    when every reader has a sparse lowering, else `dense` with the reason
    (the readers that have none); the caller then passes the dense weight.

    ```mlir
    func.func @main(%w: tensor<8x8xf32> {smlir.storage = #smlir.storage<dense, reason = "read by 'linalg.generic' (no sparse lowering for csr)">})
    ```
  }];
  let parameters = (ins EnumParameter<SparseMLIR_StorageKind>:$kind,
                        StringRefParameter<"why it is stored so", "\"\"">:$reason);
  let assemblyFormat = "`<` $kind (`,` `reason` `=` $reason^)? `>`";
}

def SparseMLIR_FusionKind : I32EnumAttr<"FusionKind",
    "whether a streaming sparsifier was fused into its producer", [
      I32EnumAttrCase<"Fused", 0, "fused">,
      I32EnumAttrCase<"NotFused", 1, "not_fused">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

def SparseMLIR_FusionAttr : AttrDef<SparseMLIR_Dialect, "Fusion"> {
  let mnemonic = "fusion";
  let summary = "Where a streaming sparsifier runs, and why";
  let description = [{
    Left by `smlir-fuse-streaming-sparsifiers`: on the producer that now
    writes the sparse result, `fused` with the tensor's name; on an
    `smlir.sparsify` it kept, `not_fused` with the reason.

    ```mlir
    #smlir.fusion<kind = fused, tensor = "relu">
    #smlir.fusion<kind = not_fused, reason = "its producer has other readers">
    ```
  }];
  let parameters = (ins EnumParameter<SparseMLIR_FusionKind>:$kind,
                        StringRefParameter<"the fused tensor's name", "\"\"">:$tensor,
                        StringRefParameter<"why it was not fused", "\"\"">:$reason);
  let assemblyFormat = "`<` struct(params) `>`";
}

//===----------------------------------------------------------------------===//
// Device arguments of convert-smlir-to-nvgpu
//===----------------------------------------------------------------------===//

def SparseMLIR_DeviceBuffer : I32EnumAttr<"DeviceBuffer",
    "what a device-resident argument of a 2:4 linear holds", [
      I32EnumAttrCase<"NM24Values", 0, "nm24_values">,
      I32EnumAttrCase<"NM24Metadata", 1, "nm24_metadata">,
      I32EnumAttrCase<"Scratch", 2, "scratch">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

def SparseMLIR_DeviceBufferAttr
    : EnumAttr<SparseMLIR_Dialect, SparseMLIR_DeviceBuffer, "device_buffer"> {
  let summary = "What a device-resident argument of a 2:4 linear holds";
  let description = [{
    The value of `smlir.device` on each argument `convert-smlir-to-nvgpu`
    adds in place of a 2:4 weight; the caller (the CUDA runtime) allocates
    one device buffer per argument and treats it by its case:

    - `nm24_values`: the weight's kept values in the kernel's fragment
      order. The runtime compresses the pruned weight on the host, uploads
      it once when the model is loaded and keeps it resident across calls.
    - `nm24_metadata`: the sparsity metadata (i32) of those values, laid out
      for the MMA k in `smlir.mma_k`. Uploaded once and kept resident, like
      the values.
    - `scratch`: a per-call buffer of one kernel operand (which one:
      `smlir.kernel_operand`). The runtime only allocates it; its contents
      are written by the host code's copies (x, bias) or by the kernel (y)
      at every call, never uploaded from the model's weights.

    ```mlir
    func.func @main(%v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>},
                    %m: memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 16 : i64},
                    %dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>})
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def SparseMLIR_KernelOperand : I32EnumAttr<"KernelOperand",
    "which operand of a 2:4 kernel a device scratch buffer is", [
      I32EnumAttrCase<"X", 0, "x">,
      I32EnumAttrCase<"Y", 1, "y">,
      I32EnumAttrCase<"Bias", 2, "bias">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::smlir";
}

def SparseMLIR_KernelOperandAttr
    : EnumAttr<SparseMLIR_Dialect, SparseMLIR_KernelOperand, "kernel_operand"> {
  let summary = "Which operand of a 2:4 kernel a device scratch buffer is";
  let description = [{
    The value of `smlir.kernel_operand` on each `scratch` device argument
    `convert-smlir-to-nvgpu` adds (one set per linear reading the weight):

    - `x`: the activations `[tokens, K]` (f16/bf16); the host code copies
      the linear's input into it before the launch.
    - `y`: the result `[tokens, R]` (f32, or the weight's element type when
      the kernel truncates); the kernel writes it and the host code copies
      it back after the launch.
    - `bias`: the f32 bias `[R]` the kernel's epilogue adds; copied in
      before the launch (only for a linear with a bias).

    The runtime passes the buffers to the kernel in its launch order and
    reports them in the artifact's manifest by this name (`x`, `y`, `bias`).

    ```mlir
    %dy: memref<64x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>}
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // SPARSE_MLIR_ATTRS_TD
