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

def SparseMLIR_LinearOp : SparseMLIR_Op<"linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "A linear layer, y = x * W^T (+ bias), whose weight may be sparse";
  let description = [{
    `y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n])` for a weight stored as
    nn.Linear holds it (`orientation` `out_in`, W[N, K], the default), or
    `sum_k x[m, k] * W[k, n]` for one read as `x @ W` (`in_out`, W[K, N]:
    HF's Conv1D). `x` and `y` are dense; `W` may carry any
    `#sparse_tensor.encoding`. The token dimension M may be dynamic.

    `x` and `W` have one floating-point element type; `y`'s is that type or
    a wider float that holds it exactly, the type the products are
    accumulated in (f16 x f16 -> f32: torch's `F.linear` in f16/bf16, which
    extends both operands to f32). `bias` has `y`'s element type.

    `smlir-raise-linear` raises torch-mlir's forms of a linear
    (linalg.matmul / batch_matmul / generic, 2-d and 3-d, `x @ W` and
    `x @ W^T`) to this op; `smlir-lower-sparse-linear` turns the ones with a
    micro-kernel into loops and `smlir-decompose-linear` the rest into the
    `W * x^T` generic upstream sparsification lowers.

    ```mlir
    %y = smlir.linear %x, %w bias %b
        : tensor<?x768xf32>, tensor<3072x768xf32, #CSR>, tensor<3072xf32> -> tensor<?x3072xf32>
    %y = smlir.linear %x, %w orientation <in_out>
        : tensor<4x768xf32>, tensor<768x2304xf32, #CSR> -> tensor<4x2304xf32>
    %y = smlir.linear %x, %w
        : tensor<64x768xf16>, tensor<3072x768xf16, #NM24> -> tensor<64x3072xf32>
    ```

    Accumulate-into (`into`): `y = into + x * W^T`, the product added to a
    y that a previous kernel wrote (a composable format's second part,
    `Hybrid(BSR, CSR)` or ELL + COO, adding into the first part's y). The
    micro-kernel's output stage then loads y's tile and adds the product
    instead of storing it, writing `into`'s buffer in place: no temporary
    and no separate add. With `columns` (a 1-d integer tensor, one entry
    per row of W, all distinct and less than y's columns) row n of W adds
    into column `columns[n]` of y: a weight holding only some rows of a
    larger one (ELL + COO's remainder, compacted to its non-empty rows).
    `into` has the result's type; a bias is refused with it (the part that
    writes y first adds the bias), as is `in_out`.

    ```mlir
    %y2 = smlir.linear %x, %rest into(%y1 : tensor<128x3072xf32>)
        columns(%rows : tensor<200xi64>)
        : tensor<128x768xf32>, tensor<200x768xf32, #CSR> -> tensor<128x3072xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       Optional<AnyRankedTensor>:$bias,
                       Optional<AnyRankedTensor>:$into,
                       Optional<AnyRankedTensor>:$columns,
                       DefaultValuedAttr<SparseMLIR_WeightOrientationAttr,
                           "::mlir::smlir::WeightOrientation::OutIn">:$orientation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)?
    (`into` `(` $into^ `:` type($into) `)`)?
    (`columns` `(` $columns^ `:` type($columns) `)`)?
    (`orientation` $orientation^)? attr-dict
    `:` type($input) `,` type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// W's dimension that is K (the reduction) and the one that is N.
    int64_t getWeightReductionDim() {
      return getOrientation() == ::mlir::smlir::WeightOrientation::OutIn ? 1 : 0;
    }
    int64_t getWeightOutputDim() { return 1 - getWeightReductionDim(); }
    ::mlir::RankedTensorType getInputType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getInput().getType());
    }
    ::mlir::RankedTensorType getWeightType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getWeight().getType());
    }
    ::mlir::RankedTensorType getResultType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getResult().getType());
    }
    /// Whether `wide` is a float of more bits than `narrow` holding all its
    /// values (f16 -> f32, bf16 -> f32; not f16 -> bf16): a result element
    /// type wider than the operands'.
    static bool isWiderFloat(::mlir::Type wide, ::mlir::Type narrow);
    /// The verifier's part for `into` / `columns` (W with `n` rows).
    ::llvm::LogicalResult verifyAccumulateInto(int64_t n);
  }];
  let hasVerifier = 1;
}

def SparseMLIR_SampledMatmulOp : SparseMLIR_Op<"sampled_matmul", [Pure]> {
  let summary = "The product A * B sampled at a sparse pattern's stored positions (SDDMM)";
  let description = [{
    `result(i, j) = sum_t A'(i, t) * B'(t, j)` for every position (i, j)
    that `pattern` stores, and nothing else: the result has `pattern`'s
    type, so its positions / coordinates are the pattern's and only its
    values are new. With `scaled` each is multiplied by the pattern's
    stored value (`(A * B) .* S`, masked attention scores).

    `A' = A` or `A^T` and `B' = B` or `B^T` as `lhs` / `rhs` say
    (`#smlir.operand_layout<identity>`, the default, or `<transposed>`):
    A' is [M, T], B' is [T, N], `pattern` [M, N]. The contraction
    dimension T may be dynamic (one kernel serves every token count); A
    and B are dense, `pattern` carries a `#sparse_tensor.encoding`, all of
    one floating-point element type.

    The gradient of a sparse weight's stored values, y = x W^T with W [N, K]:
    dW = dy^T x at W's positions, A = dy [T, N] read transposed, B = x [T, K].
    `smlir-lower-sampled-matmul` lowers CSR and n:m patterns to a CPU
    micro-kernel.

    ```mlir
    %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed>
        : tensor<?x3072xf32>, tensor<?x768xf32>, tensor<3072x768xf32, #CSR>
          -> tensor<3072x768xf32, #CSR>
    %s = smlir.sampled_matmul %q, %k, %mask rhs <transposed> scaled
        : tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x128xf32, #CSR>
          -> tensor<128x128xf32, #CSR>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       AnyRankedTensor:$pattern,
                       DefaultValuedAttr<SparseMLIR_OperandLayoutAttr,
                           "::mlir::smlir::OperandLayout::Identity">:$lhs_layout,
                       DefaultValuedAttr<SparseMLIR_OperandLayoutAttr,
                           "::mlir::smlir::OperandLayout::Identity">:$rhs_layout,
                       UnitAttr:$scaled);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $pattern (`lhs` $lhs_layout^)? (`rhs` $rhs_layout^)?
    (`scaled` $scaled^)? attr-dict
    `:` type($lhs) `,` type($rhs) `,` type($pattern) `->` type($result)
  }];
  let extraClassDeclaration = [{
    bool isLhsTransposed() {
      return getLhsLayout() == ::mlir::smlir::OperandLayout::Transposed;
    }
    bool isRhsTransposed() {
      return getRhsLayout() == ::mlir::smlir::OperandLayout::Transposed;
    }
    /// The dimension of A (B) that is the contraction T.
    int64_t getLhsContractionDim() { return isLhsTransposed() ? 0 : 1; }
    int64_t getRhsContractionDim() { return isRhsTransposed() ? 1 : 0; }
    ::mlir::RankedTensorType getLhsType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getLhs().getType());
    }
    ::mlir::RankedTensorType getRhsType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getRhs().getType());
    }
    ::mlir::RankedTensorType getPatternType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getPattern().getType());
    }
  }];
  let hasVerifier = 1;
}

def SparseMLIR_SpMMOp : SparseMLIR_Op<"spmm", [Pure]> {
  let summary = "y = A * h for a CSR matrix A (SpMM with a sparse input)";
  let description = [{
    `y[i, :] = sum_p values[p] * h[coordinates[p], :]` over the stored
    entries `p` in `[positions[i], positions[i + 1])` of each row `i` of the
    CSR matrix A [M, K]: a graph's adjacency times node features (GCN's
    `adj @ h`).

    A is given one of two ways:
    - its three buffers (torch's `crow_indices`, `col_indices`, `values`),
      the regions-mode kernel: its shape is dynamic (a new graph per call,
      any node count, any nnz) and `sparse_tensor.assemble`, which the
      sparse assembler would put at the function boundary, needs a static
      shape. M is `dim(positions) - 1`; positions and coordinates are
      integers of any width (read unsigned).
    - one CSR tensor (`#sparse_tensor.encoding`, dense then compressed
      levels, identity map), a whole graph's input of static [M, K] and
      dynamic nnz (`smlir-raise-sparse-matmuls` makes this form from a
      `linalg.matmul` reading it); the lowering reads its buffers in place.

    K (h's rows) is dynamic; the feature count F, h's and y's last
    dimension, is static. Values, h and y are one floating-point type.

    `smlir-lower-spmm` lowers f32 to a row-parallel vector kernel. The
    caller checks positions and coordinates (monotone, in range) before
    the kernel reads them.

    ```mlir
    %y = smlir.spmm %pos, %crd, %values, %h
        : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x64xf32>
          -> tensor<?x64xf32>
    %z = smlir.spmm %adj, %h
        : tensor<100x100xf32, #CSR>, tensor<100x64xf32> -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$matrix, AnyRankedTensor:$h);
  let results = (outs AnyRankedTensor:$result);
  // (A custom form: a variadic list before h would take h too.)
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// A given as one CSR tensor rather than its three buffers.
    bool hasSparseMatrix() { return getMatrix().size() == 1; }
    /// True for the type A may have as one tensor: 2-d CSR (dense then
    /// compressed levels, identity map).
    static bool isCSRMatrix(::mlir::RankedTensorType type);
  }];
  let hasVerifier = 1;
}

def SparseMLIR_SDDMMRowsOp : SparseMLIR_Op<"sddmm_rows", [Pure]> {
  let summary = "The SDDMM (a b^T) sampled at a CSR mask's stored entries, b read by rows";
  let description = [{
    `result[h, p] = sum_d a[h, i, d] * b[h, coordinates[p], d]` (times
    `values[p]` with `scaled`) for every stored entry `p` in
    `[positions[i], positions[i + 1])` of each row `i` of a CSR mask
    [M, N] given by its buffers, for each batch entry `h` (attention's
    heads): the masked scores `(q k^T) .* mask`, with k read by rows at
    the stored columns only (O(nnz D) work and traffic, nothing packed).
    a is [B, M, D], b [B, N, D], the result [B, nnz]; D is static (the
    kernel keeps a row of a in registers); positions and coordinates are
    integers of any width (read unsigned), values, a, b and the result
    f32.

    The attributes are the row kernel's decisions, which
    `smlir-lower-sddmm-rows` follows:
    - `group` (G): stored entries whose dot products are reduced together
      by a transpose tree into one vector<G> (no horizontal reduction per
      entry); 1: one entry at a time;
    - `lanes` (W): the accumulators' f32 lanes (16 with AVX-512, else 8);
    - `tile_rows`: rows that share column blocks of b;
    - `l1_budget`: bytes of b one column block may take (the block is
      `max(16, l1_budget / (4 D))` columns);
    - `min_reuse`: a tile blocks b's columns where it reads each column of
      its span this often on average (local / banded masks); else b is
      read as stored;
    - `prefetch`: groups ahead whose b rows are prefetched where b is not
      blocked (0: none).

    A result whose only use is a `bufferization.materialize_in_destination`
    into a buffer (the caller's) is written there directly.

    An op of its own rather than a strategy of `smlir.sampled_matmul`: that
    op's pattern is a `#sparse_tensor.encoding` tensor of static shape whose
    result shares its positions, any operand layout and a dynamic
    contraction; this one takes the mask's buffers (any nnz, no
    `sparse_tensor.assemble`), batch entries, b read by rows and a static D
    that the register-resident row of a needs.

    ```mlir
    %s = smlir.sddmm_rows %pos, %crd, %values, %q, %k scaled
        {group = 8 : i64, lanes = 16 : i64}
        : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4096x64xf32>,
          tensor<?x4096x64xf32> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$positions, AnyRankedTensor:$coordinates,
                       AnyRankedTensor:$values, AnyRankedTensor:$a,
                       AnyRankedTensor:$b, UnitAttr:$scaled,
                       DefaultValuedAttr<I64Attr, "8">:$group,
                       DefaultValuedAttr<I64Attr, "8">:$lanes,
                       DefaultValuedAttr<I64Attr, "32">:$tile_rows,
                       DefaultValuedAttr<I64Attr, "32768">:$l1_budget,
                       DefaultValuedAttr<I64Attr, "8">:$min_reuse,
                       DefaultValuedAttr<I64Attr, "2">:$prefetch);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $positions `,` $coordinates `,` $values `,` $a `,` $b (`scaled` $scaled^)?
    attr-dict `:` type($positions) `,` type($coordinates) `,` type($values)
    `,` type($a) `,` type($b) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Columns of b per column block (kept in L1 while a tile reads them).
    int64_t getBlockColumns();
  }];
  let hasVerifier = 1;
}

def SparseMLIR_SparseAttentionOp : SparseMLIR_Op<"sparse_attention", [Pure]> {
  let summary = "softmax(q k^T * scale) v over a CSR mask's stored entries, fused per row";
  let description = [{
    For each batch entry `h` and row `i` of a CSR mask [M, N] given by its
    positions and coordinates: the scores `s_p = (q[h, i, :] . k[h, c_p, :])
    * scale` at the row's stored columns `c_p`, their softmax over the
    stored entries only, and `result[h, i, :] = sum_p softmax(s)_p
    v[h, c_p, :]`; a row with no stored entry gives zeros. q is [B, M, D],
    k [B, N, D], v [B, N, F], the result [B, M, F], all f32; D, F and N are
    static (a row's scores sit in an N-float scratch on the stack).

    `smlir-lower-sparse-attention` lowers it to one pass per row (no score
    matrix written: FlashAttention's idea on a CSR pattern): the scores
    `group` (G) entries at a time reduced together as `smlir.sddmm_rows`
    does (`lanes` W-lane accumulators; 1: one entry at a time) with the
    row's max, exp as 16-lane vectors and their sum, then the weighted sum
    of v's rows.

    ```mlir
    %o = smlir.sparse_attention %pos, %crd, %q, %k, %v
        {scale = 1.250000e-01 : f32, group = 8 : i64, lanes = 16 : i64}
        : tensor<?xi32>, tensor<?xi32>, tensor<?x1024x64xf32>,
          tensor<?x1024x64xf32>, tensor<?x1024x64xf32> -> tensor<?x1024x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$positions, AnyRankedTensor:$coordinates,
                       AnyRankedTensor:$q, AnyRankedTensor:$k, AnyRankedTensor:$v,
                       F32Attr:$scale,
                       DefaultValuedAttr<I64Attr, "8">:$group,
                       DefaultValuedAttr<I64Attr, "8">:$lanes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $positions `,` $coordinates `,` $q `,` $k `,` $v attr-dict `:`
    type($positions) `,` type($coordinates) `,` type($q) `,` type($k) `,`
    type($v) `->` type($result)
  }];
  let hasVerifier = 1;
}

def SparseMLIR_GatherRowsOp : SparseMLIR_Op<"gather_rows", [Pure]> {
  let summary = "Rows of a sparse 2-d table picked by integer indices, dense (an embedding lookup)";
  let description = [{
    `result[i..., :] = table[indices[i...], :]`: for each index (any rank
    of indices), the table's row as a dense row of D values, zeros where
    the row stores nothing. The table [V, D] is sparse: an embedding
    weight tied to an LM head stored CSR or n:m, whose lookup torch-mlir
    writes as a `linalg.generic` of `tensor.extract`s that sparsification
    cannot lower (`smlir-raise-row-gathers` raises that form to this op).
    An index outside `[0, V)` fails the same assertion torch-mlir's form
    has; the compiled function's caller checks input indices first.

    `smlir-lower-row-gathers` lowers CSR and n:m tables (row-major, rows
    stored whole) to a loop that zero-fills each result row and scatters
    the row's stored entries into it: O(D + stored entries) per index, with
    no dense copy of the table.

    ```mlir
    %rows = smlir.gather_rows %table[%ids]
        : tensor<64x16xf32, #csr>, tensor<8xi64> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$table, AnyRankedTensor:$indices);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $table `[` $indices `]` attr-dict `:` type($table) `,` type($indices)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def SparseMLIR_Permute2Op : SparseMLIR_Op<"permute2", [Pure,
    AllTypesMatch<["low", "high", "result"]>]> {
  let summary = "Lanes of two vectors picked by an index vector (a two-source permute)";
  let description = [{
    `result[i] = concat(low, high)[index[i]]`: lane `i` takes lane
    `index[i]` of the 2N lanes of `low` followed by `high` (N lanes each).
    Indices must be in `[0, 2N)`. The n:m decode kernel picks each stored
    entry's x from a window of two vectors with it (the entries'
    coordinates plus constant group offsets), where `vector.gather` would
    read memory lane by lane.

    Only AVX-512 has a lowering (`smlir-lower-x86-permutes`: 16 x f32 to
    `vpermi2ps`, 8 x f32 to its 256-bit form); it is emitted only for
    targets that have it. It is an op of its own, not the LLVM intrinsic
    call, so that it is `Pure` for the passes between (buffer deallocation
    refuses calls of unknown memory effects).

    ```mlir
    %x = smlir.permute2 %low, %index, %high : vector<16xf32>, vector<16xi32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$low,
                       VectorOfRankAndType<[1], [I32]>:$index,
                       VectorOfRankAndType<[1], [F32]>:$high);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $low `,` $index `,` $high attr-dict `:` type($low) `,` type($index)
  }];
  let hasVerifier = 1;
}

def SparseMLIR_DotBF16PairsOp : SparseMLIR_Op<"dot_bf16_pairs", [Pure,
    AllTypesMatch<["acc", "result"]>, AllTypesMatch<["a", "b"]>]> {
  let summary = "f32 lanes plus dot products of bf16 pairs (AVX-512 BF16's vdpbf16ps)";
  let description = [{
    `result[i] = acc[i] + a[2i] * b[2i] + a[2i+1] * b[2i+1]`: each f32
    lane adds the dot product of the two bf16 pairs at its position (the
    products are exact in f32; bf16 inputs and f32 results flush denormals
    to zero). `a` and `b` have twice the lanes of `acc`. The bf16 n:m
    kernel feeds it a stored row's two values of an n:m group as one pair
    and x's two columns there, per token, as the other.

    Only AVX-512 BF16 has a lowering (`smlir-lower-x86-dot-products`: 16
    f32 lanes to the 512-bit `vdpbf16ps`, 8 and 4 lanes to AVX-512VL's
    forms); it is emitted only for targets that have it. It is an op of its
    own, not the LLVM intrinsic call, so that it is `Pure` for the passes
    between (buffer deallocation refuses calls of unknown memory effects).

    ```mlir
    %y = smlir.dot_bf16_pairs %acc, %a, %b : vector<16xf32>, vector<32xbf16>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [F32]>:$acc,
                       VectorOfRankAndType<[1], [BF16]>:$a,
                       VectorOfRankAndType<[1], [BF16]>:$b);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $acc `,` $a `,` $b attr-dict `:` type($acc) `,` type($a)
  }];
  let hasVerifier = 1;
}

def SparseMLIR_KernelOp : SparseMLIR_Op<"kernel",
    [SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "The loops of one micro-kernel, named by what they compute";
  let description = [{
    Runs its region once. The region holds the loops a lowering pass wrote
    for one kernel (on buffers); `name` says what it computes and at which
    shape (`linear_csr_1024x768x3072`). `smlir-outline-kernels` makes one
    private function per distinct body, so identical kernels (BERT's q / k /
    v / o projections) share their code; `convert-smlir-to-sparse-tensor`
    inlines any left in place.

    ```mlir
    smlir.kernel "rows_gelu_512x3072" {
      scf.parallel ... { ... }
    }
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name attr-dict-with-keyword $body";
}

#endif // SPARSE_MLIR_OPS_TD
