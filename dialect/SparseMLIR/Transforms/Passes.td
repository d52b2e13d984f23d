//===- Passes.td - smlir transformation passes -------------*- tablegen -*-===//

#ifndef SPARSE_MLIR_TRANSFORMS_PASSES_TD
#define SPARSE_MLIR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def HoistArgumentSparsifiers
    : Pass<"smlir-hoist-argument-sparsifiers", "::mlir::ModuleOp"> {
  let summary = "Move sparsifiers of function arguments to the caller";
  let description = [{
    A weight is sparsified once, at compile time, not at every call. For each
    `smlir.sparsify` whose source is a weight argument (marked with the unit
    attribute `smlir.weight`) of a public function, and the argument's only
    sparsifier, the argument takes the sparse result type and records what
    the caller must apply before passing it:

    - `smlir.sparsifier`: the sparsifier attribute,
    - `smlir.encoding`: the storage encoding,
    - `smlir.tensor_name`: the tensor's name, when the op had one.

    Other (dense) uses of the argument read the sparsified weight through a
    `sparse_tensor.convert` back to dense, as if the model had been given the
    pruned weight. Functions called from inside the module are left alone
    (their callers would pass dense tensors).

    ```mlir
    func.func @main(%w: tensor<8x8xf32> {smlir.weight}) -> ... {
      %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9>
          as #smlir.csr -> tensor<8x8xf32, #CSR>
    // becomes
    func.func @main(%w: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr,
                     smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.weight}) -> ...
    ```
  }];
  let dependentDialects = ["::mlir::sparse_tensor::SparseTensorDialect"];
}

def RaiseLinear
    : Pass<"smlir-raise-linear", "::mlir::func::FuncOp"> {
  let summary = "Raise torch-mlir's forms of a linear with a sparse W to smlir.linear";
  let description = [{
    torch-mlir imports `F.linear(x, W)` as `linalg.matmul(x, transpose(W))`
    (2-d), as a 4-loop `linalg.generic` (3-d x), or as a `batch_matmul` on
    a broadcast of `transpose(W)` (an input torch had to copy: LLaMA's
    o_proj after SDPA, MLP-Mixer's token mixing). With a sparse `W` each
    becomes one `smlir.linear` (3-d inputs collapsed to 2-d and expanded
    back), which `smlir-lower-sparse-linear` or `smlir-decompose-linear`
    lowers. A non-zero `outs` is added back. Matmuls with a user-defined
    indexing map are left alone, and so are those with a dense right-hand
    side unless `dense-weights` is set.

    ```mlir
    %t = linalg.transpose ins(%W : tensor<NxK, #CSR>) ... permutation = [1, 0]
    %y = linalg.matmul ins(%x, %t : tensor<MxK>, tensor<KxN, #CSR>) outs(%zero : tensor<MxN>)
    // becomes
    %y = smlir.linear %x, %W : tensor<MxK>, tensor<NxK, #CSR> -> tensor<MxN>
    ```

    `x * W` with a sparse `W[K, N]` itself on the right (HF GPT-2's Conv1D
    `torch.addmm(b, x, W)`, `x @ W`, `F.linear(x, W.t())`): a CSC `W[K, N]`,
    whose storage is CSR `W^T[N, K]`, is reinterpreted as that
    (`sparse_tensor.reinterpret_map`, no copy) and read out_in; CSR, COO and
    BSR become an `in_out` linear. An n:m `W[K, N]` is left alone (upstream's
    sparse-reinterpret-map crashes on a structured level in that access), so
    it keeps its dense fallback.

    With `mixed-precision` (the CUDA pipeline's, for the sparse tensor-core
    kernels of `convert-smlir-to-nvgpu`), a 2-d `x * W^T` whose `x` and `W`
    share a float type narrower than a zero-filled accumulator becomes an
    `smlir.linear` with that wider result, looking through the element-wise
    `arith.extf` generics torch-mlir puts on `x` and `W^T` for `F.linear` in
    f16/bf16:

    ```mlir
    %x32 = linalg.generic ... ins(%x : tensor<MxKxf16>) { arith.extf }
    %t = linalg.transpose ins(%W : tensor<NxKxf16, #NM24>) ... permutation = [1, 0]
    %t32 = linalg.generic ... ins(%t : tensor<KxNxf16>) { arith.extf }
    %y = linalg.matmul ins(%x32, %t32 : ...) outs(%zero : tensor<MxNxf32>)
    // becomes
    %y = smlir.linear %x, %W : tensor<MxKxf16>, tensor<NxKxf16, #NM24> -> tensor<MxNxf32>
    ```
  }];
  let options = [
    Option<"denseWeights", "dense-weights", "bool", /*default=*/"false",
           "Also raise x * W^T with a dense f32 W of static shape, for "
           "smlir-lower-sparse-linear's dense micro-kernel">,
    Option<"mixedPrecision", "mixed-precision", "bool", /*default=*/"false",
           "Also raise 2-d x * W^T with x and W of a float type narrower "
           "than their zero-filled accumulator (through arith.extf "
           "generics) to an smlir.linear with a wider result">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def DecomposeLinear
    : Pass<"smlir-decompose-linear", "::mlir::func::FuncOp"> {
  let summary = "Lower smlir.linear to the W * x^T linalg.generic upstream sparsification lowers";
  let description = [{
    Every `smlir.linear` left (those no micro-kernel took) becomes a
    transpose of `x`, a `linalg.generic` computing
    `yT[n, m] += W[n, k] * xT[k, m]` (W's rows outermost: for a sparse W,
    3-7x faster in upstream sparsification than gathering along the
    reduction for every output), a transpose of the result and, with a bias,
    `y[m, n] += bias[n]`. An in_out weight is read through the map `(k, n)`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def PropagateEncodings
    : Pass<"smlir-propagate-encodings", "::mlir::func::FuncOp"> {
  let summary = "Infer sparse encodings of element-wise results (storage type inference)";
  let description = [{
    MXNet's storage-type inference and SparTA's propagation, for
    element-wise ops. One rule table classifies the ops of a kernel body by
    how zeros flow through them:

    | rule         | ops                                              | zero if        |
    |--------------|--------------------------------------------------|----------------|
    | unary        | negf, absf, sqrt, cbrt, tanh, sin, tan, atan, sinh, asinh, atanh, erf, expm1, log1p, truncf, extf | its operand is |
    | intersection | mulf, muli, andi (multiply by dense)             | any operand is |
    | union        | addf, subf, addi, subi, maximumf, minimumf, maxnumf, minnumf, select (branches) | all operands are |
    | numerator    | divf                                             | the dividend is |
    | dense        | everything else (exp, cos, add of a bias, ...)   | never: f(0) != 0 |

    A `linalg.generic` that is element-wise (all loops parallel, identity
    output map), reads its sparse operands element-wise (one sparse value,
    possibly several times, or two of one encoding), and whose yielded value
    is zero wherever those operands are all zero by the table (ReLU
    `select(x > 0, x, 0)`, GELU `x * 0.5 * (1 + erf(x / sqrt 2))`, scaling,
    `x * x + 2 * x`, a dense row scale `x * s[:, None]`; not `x + bias`),
    keeps their encoding; dense operands are read inside the sparse_tensor
    region, at the stored entries only. With one sparse value
    its body becomes a `sparse_tensor.unary` with an empty absent region, so
    only stored entries are computed; with two, a `sparse_tensor.binary`
    whose left / right regions are the body with the absent operand zero, or
    empty where the table says that is zero (an intersection: `a * b`). The
    result is marked `smlir.inferred_encoding = "<source tensor name>"`.

    This is done only where it makes the code faster, decided for whole
    chains by a greatest fixpoint: every element-wise op is first assumed to
    keep its encoding, then ops are dropped, until nothing changes, whose
    operands turn out dense, whose body the table says is dense, or that
    have a reader which neither runs faster on a sparse operand (the left
    operand of a `linalg.matmul` with a dense right one) nor is itself kept.
    So `relu(w * 3) @ x` computes both links on w's stored entries, and a
    chain whose end is returned stays dense. A result the user sparsified
    explicitly is left alone: the user's choice wins.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SparseFallback : Pass<"smlir-sparse-fallback", "::mlir::func::FuncOp"> {
  let summary = "Read sparse weights densely where no sparse lowering exists";
  let description = [{
    MXNet's storage fallback. A sparse weight argument is kept sparse only if
    every reader has a sparse lowering that is known to work: an
    `smlir.linear` (raised by `smlir-raise-linear`), the pattern of an
    `smlir.sampled_matmul`, a
    `linalg.matmul` with the sparse operand on the left, a `sparse_tensor`
    op, or `func.return`. Otherwise the argument goes back to its dense type
    (marked `smlir.fallback`, so the caller passes the dense-equivalent
    weight) and one warning per (op, format, tensor) and named location (a
    NameLoc is the torch.fx node: two torch ops lowered to one MLIR op are
    two warnings), at the first such reader, names them. Readers that did have a sparse lowering read the
    dense argument stored back in its sparse type, once: an n:m weight is
    packed directly (exactly n entries per group, the nonzeros padded with
    the lowest-index zeros, as the caller packs it) and assembled, since
    `sparse_tensor.convert` drops zeros (corrupting the groups) and stages
    through a COO buffer whose coordinates have the destination's crdWidth
    (8 bits would truncate row indices >= 256); other formats convert, through
    the index-width encoding first where the convert stages and the widths
    are narrow. With `fail=true` the warning is an error.

    ```mlir
    // warning: no sparse lowering for 'linalg.generic' reading tensor
    //          'proj.weight' stored as csr; computing it densely
    ```
  }];
  let options = [Option<"fail", "fail", "bool", /*default=*/"false",
                        "Report a fallback as an error">];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect"];
}

def FuseDenseElementwise
    : Pass<"smlir-fuse-dense-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuse element-wise linalg ops, keeping sparse kernels and contractions intact";
  let description = [{
    Upstream's `linalg-fuse-elementwise-ops` also fuses producers into
    contractions (recomputing them once per output column), propagates
    reshapes onto sparse weights and fuses dense producers into sparse
    kernels, which sparsification then rejects. This pass applies the same
    producer-consumer fusion only when neither op reads or writes a sparse
    tensor and the fusion computes nothing twice that is worth keeping:

    - into an element-wise consumer: bias add + activation chains fuse;
    - into a reduction only when the consumer reads each element of the
      operand once (its map is a permutation of the loops) and the producer
      has no other reader: layer norm's squared deviations go straight into
      their row sum; matmul-like ops and sparse kernels stay as they are;
    - a producer with several readers whose body calls a math function or
      divides (softmax's exp) is not fused at all: computed once, stored.

    ```mlir
    %b = linalg.generic ... ins(%y, %bias) { addf }    // fused with
    %r = linalg.generic ... ins(%b) { maximumf }       // this one
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def VectorizeRows : Pass<"smlir-vectorize-rows", "::mlir::func::FuncOp"> {
  let summary = "Explicit vector loops for dense f32 linalg ops along their innermost dimension";
  let description = [{
    A dense f32 `linalg.generic` with static shapes whose body is
    element-wise arithmetic and whose operands are contiguous along its
    innermost loop (or constant along it) is written as explicit vector
    loops over its rows (the outer loops):

    - `scf.parallel` over the rows: threads with `convert-scf-to-openmp`
      (the scalar loops convert-linalg-to-loops would write run on one);
    - element-wise ops: `lanes` elements at a time, stored as vectors, the
      last vector masked;
    - a reduction of the innermost loop (a row sum, max or sum of squares:
      layer norm's statistics, softmax's max and sum), whose result is
      `combine(value, out)` with `combine` one of addf, mulf, maximumf,
      minimumf, maxnumf, minnumf: `vectors` vector accumulators per result
      (independent chains) over whole groups of vectors, then one vector at
      a time, the last one masked (masked-off lanes add the combiner's
      neutral element); the accumulators are combined, reduced across lanes
      and combined with the init value. Scalar loops for these would be an
      ordered chain through memory that LLVM cannot vectorize: a BERT
      layer's layer norms ran at a tenth of PyTorch's speed.

    Operands constant along the row are read once per row and broadcast;
    `x^n` with a constant integer n is unrolled into multiplications. The
    summation order differs from the scalar loop (as PyTorch's vectorized
    kernels' does). Ops whose result a streaming sparsifier reads are left
    for `smlir-fuse-streaming-sparsifiers`.

    A static f32 `linalg.transpose` that keeps the innermost dimension
    (attention's head split and merge) is generalized and copied by rows as
    above; one that moves it (attention's k^T) reads 8 x 8 tiles of the two
    dimensions that trade places as 8 contiguous vectors, transposes them in
    registers and stores 8 contiguous vectors, the other dimensions under
    `scf.parallel`, partial tiles element by element. The transposes around
    a tagged linear kernel are left for `smlir-lower-sparse-linear`.

    ```mlir
    %s = linalg.generic {iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<128x768xf32>) outs(%zero : tensor<128xf32>) {
      ^bb0(%in: f32, %out: f32):
        %0 = arith.addf %in, %out : f32
        linalg.yield %0 : f32 }
    // becomes scf.parallel over 128 rows of 4 x vector<8xf32> accumulators
    ```
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector (8: AVX2, 16: AVX-512)">,
    Option<"vectors", "vectors", "int64_t", /*default=*/"4",
           "Vector accumulators per row of a reduction (independent chains)">,
    Option<"elementwise", "elementwise", "bool", /*default=*/"true",
           "Also element-wise ops (false: reductions only)">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def ApproximateMath
    : Pass<"smlir-approximate-math", "::mlir::func::FuncOp"> {
  let summary = "Replace f32 transcendental math ops by polynomial approximations";
  let description = [{
    `math.exp`, `math.erf`, `math.tanh`, `math.log` and friends otherwise
    become libm calls, one scalar call per element, which keeps LLVM from
    vectorizing their loops: GELU (erf) and softmax (exp) of a BERT layer
    ran 10x slower than PyTorch's vectorized kernels. Upstream's polynomial
    approximations (the ones MLIR's own CPU pipelines use; accurate to a few
    ulp for f32) are plain arithmetic that LLVM vectorizes. Other element
    types keep their libm calls.

    ```mlir
    %y = math.erf %x : f32
    // becomes a clamp + rational polynomial in arith ops (no call)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def FuseStreamingSparsifiers
    : Pass<"smlir-fuse-streaming-sparsifiers", "::mlir::ModuleOp"> {
  let summary = "Run streaming sparsifiers inside their producer's loop";
  let description = [{
    A streaming sparsifier (keep-all, threshold, random fraction) decides
    each element alone, so it can run where the element is computed. For an
    `smlir.sparsify` into a sparse encoding whose source is an element-wise
    `linalg.generic` (all loops parallel, dense operands, identity output
    map, not reading its output) read only by the sparsifier, the producer
    is cloned to write the sparse result directly: the yielded value goes
    through the sparsifier's keep condition and a `sparse_tensor.select`, so
    the sparsifier inserts kept values only and no dense intermediate is
    ever written. The fused op is marked `smlir.fused_sparsifier = "<tensor
    name>"`.

    With a matmul/linear producer, the epilogue (bias add and activation,
    which `smlir-fuse-dense-elementwise` fused into one generic) is the
    producer: the dense accumulator of the contraction remains, the
    activated value is never stored densely.

    An op that cannot be fused is left for `convert-smlir-to-sparse-tensor`
    and marked `smlir.not_fused = "<reason>"`.

    ```mlir
    %y = linalg.generic ... ins(%a, %bias) outs(%init : tensor<8x16xf32>) {
      ... %g = math.erf ... linalg.yield %g : f32 }
    %s = smlir.sparsify %y : tensor<8x16xf32> with #smlir.threshold<0.05>
        as #smlir.csr -> tensor<8x16xf32, #CSR>
    // becomes
    %e = tensor.empty() : tensor<8x16xf32, #CSR>
    %s = linalg.generic ... ins(%a, %bias) outs(%e : tensor<8x16xf32, #CSR>) {
      ... %g = math.erf ...
      %keep = arith.cmpf oge, |%g|, %cut ; %k = bit-and of %g with %keep
      %r = sparse_tensor.select %k : f32 { ^bb0(%v: f32): %nz = arith.cmpf une, %v, %zero ... }
      linalg.yield %r : f32 } {smlir.fused_sparsifier = "gelu"}
    ```
  }];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LowerSparseLinear
    : Pass<"smlir-lower-sparse-linear", "::mlir::func::FuncOp"> {
  let summary = "Register-tiled vector loops for x * W^T with a CSR or n:m W";
  let description = [{
    Replaces an `smlir.linear` (out_in, no bias) whose `W` is f32 CSR, n:m
    or dense and whose shapes are static by explicit loops over W's buffers
    (`sparse_tensor.positions/coordinates/values`) instead of upstream
    sparsification:

    - `scf.parallel` over blocks of `MB = vectors * lanes` tokens (and, for
      few tokens, chunks of weight rows): threads with `convert-scf-to-openmp`;
    - per token block, `x[m-block, :]` is packed feature-major into a
      K x MB slab (8 x 8 tiles transposed in registers) by the iteration
      that reads it, while it is in cache (all blocks first when several
      chunks of rows share a block): neither `x^T` nor `y^T` is ever
      materialized;
    - per block of `rows` weight rows, `rows * vectors` vector accumulators
      (independent FMA chains) run over the stored entries the rows have in
      common in lockstep (all of them for n:m), then over each CSR row's
      remaining entries: `acc += broadcast(w) * slab[k, :]`, a contiguous
      load per entry; with 4 or more token blocks a CSR or n:m weight is
      first interleaved once per call by row block, each entry one i64 (its
      pre-scaled slab offset above its value's bits: one load per entry
      besides the slab's), CSR rows padded with zeros to the block's
      longest row, so the rows run in lockstep to the end;
    - an n:m weight argument whose `smlir.encoding` says `rows = r` (rows
      share one pattern) takes a tile inside one row group and loads each
      stored k's slab vectors once for all its rows;
    - the rows x MB tile is transposed into a per-iteration output stage
      of ~64 columns (4-row shuffle networks within 128-bit lanes), which
      is copied to `y` a token row at a time (masked only where it sticks
      out): rows of `y` at a 4 KB-multiple stride no longer evict each
      other's cache lines between R-float pieces.

    Tile options left at 0 take the tile measured for `lanes`: 8 (AVX2,
    16 registers): CSR 4 x 2, n:m 3 x 4, dense 6 x 2; 16 (AVX-512, 32
    registers): CSR 4 x 1, n:m 6 x 2, dense 8 x 2; decode gathers 8
    entries at a time with either (16-lane gathers ran ~10% slower).

    Every stored entry reads its own slab row, so an n:m weight, whose rows
    are all as long, reads the slab in k-slices of whole groups (16 KB, in
    L1) with every row block of the thread per slice, partial sums kept
    between slices; its tile is `nm-rows x nm-vectors` (more token vectors
    per entry amortize its coordinate and value loads). A dense weight's
    tile is `dense-rows x dense-vectors` (6 x 2: 12 accumulators, the shape
    of BLIS's Zen kernels; 6-7% faster than 4 x 2 here).

    Fewer than 4 tokens (decode) take dot products along k instead: dense
    rows with vectors along k sharing the x vector; sparse rows read `lanes`
    stored entries at a time (coordinates and values as vectors, x with
    `vector.gather`), `rows` rows in lockstep, scalar at each row's end;
    threads split the rows.
    With `avx512` and 16 lanes, an n:m weight with m = 2n (2:4, 4:8) takes
    dot products along k up to 8 tokens: 16 stored entries are 16 / n whole
    groups, whose x lies in a window of 32 floats (two loads per token,
    shared by the tile's rows), and `smlir.permute2` (vpermi2ps) picks each
    entry's x by its coordinate plus a constant (LLVM scalarizes
    `vector.gather` on Zen 4: ~4x slower than torch's dense GEMV at 1 token).
    With `avx512bf16` and 16 lanes, a bf16 2:4 weight takes
    `smlir.dot_bf16_pairs` (vdpbf16ps) in its token blocks:
    a row stores two entries per group of 4 columns, one of the group's 6
    column pairs, so x is packed per token block as those 6 pairs per
    group (bf16 pairs of the two columns, token-major after the f32 slab);
    each row and group is one 32-bit broadcast of its value pair and U dot
    products of 2 x 16 MACs on the pair's slab vectors (half the
    instructions of two f32 FMAs per token vector); rows sharing a pattern
    load a group's pair vectors once for the tile's rows.

    A BSR weight (dense `bh x bw` blocks) takes a tile of `bsr-rows` rows
    inside one block row (a divisor of bh; 0: the most FMAs per slab load
    up to 2 token vectors, 4 x 2 for 4 x 4 and 8 x 8 blocks with 8
    lanes) and `bsr-vectors` token vectors: per stored block one
    coordinate load, then for each of its bw columns the slab vectors are
    loaded once for the tile's rows, weights broadcast from the block's
    values (no per-value index load); decode reads x's bw columns once per
    block for the tile's rows.

    A CSR weight argument whose `smlir.encoding` is `#smlir.ell<width = k>`
    (k <= K: every row stores exactly k entries, padded with zeros) takes
    the ELL kernel: no position is read, row n's entries are n * k ...
    (n + 1) * k - 1, the tile's rows run in lockstep over all k with a
    trip count fixed when the kernel is built (unrolled by 4; never
    interleaved per call: its rows need no padding), and decode
    gathers x `lanes` entries at a time with no per-row tails. Without a
    width, or a width past K, the weight is read as the CSR it also is.

    Other sparse linears (CSC, COO, f64, dynamic shapes) are left to
    upstream sparsification.

    Dense batch matmuls are smlir-lower-batch-matmul's.
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Weight rows per register tile (0: the default for the lanes)">,
    Option<"vectors", "vectors", "int64_t", /*default=*/"0",
           "Vectors of tokens per register tile (0: by lanes)">,
    Option<"nmRows", "nm-rows", "int64_t", /*default=*/"0",
           "Weight rows per register tile of an n:m weight (0: by lanes)">,
    Option<"nmVectors", "nm-vectors", "int64_t", /*default=*/"0",
           "Vectors of tokens per register tile of an n:m weight (0: by lanes)">,
    Option<"denseRows", "dense-rows", "int64_t", /*default=*/"0",
           "Weight rows per register tile of a dense weight, 4 or more tokens "
           "(0: by lanes)">,
    Option<"denseVectors", "dense-vectors", "int64_t", /*default=*/"0",
           "Vectors of tokens per register tile of a dense weight (0: by lanes)">,
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector (8: AVX2, 16: AVX-512)">,
    Option<"avx512", "avx512", "bool", /*default=*/"false",
           "The target has AVX-512F: with 16 lanes, n:m decode (m = 2n, up "
           "to 8 tokens) picks x's entries with a two-source permute "
           "(vpermi2ps) instead of a gather">,
    Option<"avx512bf16", "avx512bf16", "bool", /*default=*/"false",
           "The target has AVX-512 BF16: with 16 lanes, bf16 2:4 weights "
           "take bf16 dot products of pairs (vdpbf16ps) from 4 tokens on, "
           "x packed as the 6 column pairs of each group of 4">,
    Option<"bsrRows", "bsr-rows", "int64_t", /*default=*/"0",
           "Weight rows per register tile of a BSR weight, a divisor of its "
           "block's rows (0: the most FMAs per slab load)">,
    Option<"bsrVectors", "bsr-vectors", "int64_t", /*default=*/"0",
           "Vectors of tokens per register tile of a BSR weight (0: by lanes)">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerSampledMatmul
    : Pass<"smlir-lower-sampled-matmul", "::mlir::func::FuncOp"> {
  let summary = "A CPU micro-kernel for smlir.sampled_matmul with a CSR or n:m pattern";
  let description = [{
    Replaces an `smlir.sampled_matmul` whose pattern is f32 CSR or n:m with
    static rows and columns (T, the contraction, may be dynamic) by loops
    over the pattern's buffers (`sparse_tensor.positions / coordinates /
    values`):

    - an `scf.parallel` over 1, 2 or 4 chunks of the pattern's rows
      (threads with `convert-scf-to-openmp`; one parallel region per call:
      threads meet once, and a thread the OS preempts stalls no barrier
      per tile) runs, for each tile of `tile-tokens` of T (0: as many as
      keep the packed B tile, N rows, within 512 KB of L2):
    - a pack of B' [N, tile] and of the chunk's rows of A' feature-major
      into the chunk's own buffers (8 x 8 tiles transposed in registers
      where an operand is stored T-major, zeros past T);
    - per row, `entries` stored entries at a time: that many vector
      accumulators of `lanes` f32 (independent FMA chains) over the tile,
      `acc[e] += A'[i, t:] * B'[j_e, t:]`, their sums reduced into one
      vector (shuffles) and added to the entries' values (written on the
      first tile; scaled by the pattern's values with `scaled`); the row's
      last entries one at a time;
    - an n:m pattern argument whose `smlir.encoding` says `rows = r`
      (rows share one pattern) takes tiles of up to 4 rows of a group:
      each B' vector loaded serves the tile's rows.

    No dense product is formed. The result values are a new buffer; the
    positions and coordinates are the pattern's: `sparse_tensor.values` of
    the result reads the new buffer directly, other uses get a
    `sparse_tensor.assemble`. Patterns of other formats, element types or
    dynamic rows / columns get an error naming the format: there is no
    generic lowering of the op.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector (8: AVX2, 16: AVX-512)">,
    Option<"entries", "entries", "int64_t", /*default=*/"8",
           "Stored entries of a row per iteration (accumulators)">,
    Option<"tileTokens", "tile-tokens", "int64_t", /*default=*/"0",
           "Contraction elements per packed tile, a multiple of 8 and of the "
           "lanes (0: by the L2 budget)">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerX86DotProducts : Pass<"smlir-lower-x86-dot-products"> {
  let summary = "smlir.dot_bf16_pairs to AVX-512 BF16's vdpbf16ps intrinsic";
  let description = [{
    Rewrites each `smlir.dot_bf16_pairs` to `llvm.call_intrinsic
    "llvm.x86.avx512bf16.dpbf16ps.512"` (16 f32 lanes) or its `.256` /
    `.128` forms (8 / 4 lanes, AVX-512VL): LLVM 22's signature takes the
    f32 accumulator and two bf16 vectors of twice its lanes, builtin
    vectors legal in the LLVM dialect as they are. Runs after buffer
    deallocation, which refuses the intrinsic call's unknown memory
    effects.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LowerX86Permutes : Pass<"smlir-lower-x86-permutes"> {
  let summary = "smlir.permute2 to AVX-512's vpermi2ps intrinsic";
  let description = [{
    Rewrites each `smlir.permute2` to `llvm.call_intrinsic
    "llvm.x86.avx512.vpermi2var.ps.512"` (16 lanes) or its `.256` form (8
    lanes, AVX-512VL). Runs after buffer deallocation, which refuses the
    intrinsic call's unknown memory effects; the operands are builtin
    vectors, legal in the LLVM dialect as they are.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RaiseRowGathers : Pass<"smlir-raise-row-gathers", "::mlir::func::FuncOp"> {
  let summary = "Raise torch-mlir's embedding lookup of a CSR or n:m table to smlir.gather_rows";
  let description = [{
    torch-mlir writes `aten.embedding` as a `linalg.generic` over (indices,
    D) whose body casts the index, checks its range and yields
    `tensor.extract %table[%index, linalg.index D]`. Sparsification cannot
    lower a random-access extract of a sparse tensor, so such a table (an
    embedding tied to an LM head) was read densely. Where the table is CSR
    or n:m and the body is exactly that lookup, the generic becomes
    `smlir.gather_rows`; anything else is left alone.
  }];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect"];
}

def RaiseSparseMatmuls : Pass<"smlir-raise-sparse-matmuls", "::mlir::func::FuncOp"> {
  let summary = "Raise a linalg.matmul reading a CSR matrix on the left to smlir.spmm";
  let description = [{
    `adj @ h` with `adj` a CSR tensor (a graph-mode sparse input, or any
    CSR value a matmul reads on the left) becomes `smlir.spmm` on the tensor
    itself, so smlir-lower-spmm's vector kernel reads its buffers in place
    instead of upstream sparsification's scalar loops. Only f32, a static
    feature count, and a zero-filled init (torch-mlir's `aten.mm`) are
    raised; anything else is left alone.
  }];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LowerRowGathers : Pass<"smlir-lower-row-gathers", "::mlir::func::FuncOp"> {
  let summary = "Loops for smlir.gather_rows that read a CSR or n:m table's buffers";
  let description = [{
    Each index's result row is zero-filled, then the table row's stored
    entries are written at their columns: O(D + stored entries) per index,
    the table's buffers read in place (no dense copy). The index's range is
    asserted as torch-mlir's form did. Tables of other storage, and rank-0
    indices, get an error: there is no generic lowering of the op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::sparse_tensor::SparseTensorDialect"];
}

def LowerSpMM : Pass<"smlir-lower-spmm", "::mlir::func::FuncOp"> {
  let summary = "A row-parallel vector kernel for smlir.spmm (CSR A times dense h)";
  let description = [{
    Replaces an f32 `smlir.spmm` (y[M, F] = A[M, K] h[K, F], A in CSR
    buffers, M, K and nnz dynamic, F static) by loops that read rows of h
    and write rows of y directly (no transpose, no packing):

    - an `scf.parallel` over `chunks` row ranges of equal nnz (each found
      by a binary search in the positions), so threads
      (`convert-scf-to-openmp`, static schedule) get balanced work on
      power-law graphs whose rows differ by orders of magnitude;
    - per row and per tile of `vectors` x `lanes` features, that many
      vector accumulators stay in registers across the row's stored
      entries: `acc[u] += broadcast(values[p]) * h[coordinates[p], f:]`,
      one contiguous load of h's row per vector, `entries` stored entries
      per iteration in separate accumulators (independent FMA chains),
      summed at the row's end; a tail of F past the lanes is masked;
    - with tiles of 256 features or more, h's row for the entry
      `prefetch` entries ahead is prefetched (rows are read in the graph's
      order, which no hardware prefetcher follows; narrower tiles of local
      graphs find their rows in cache and ran up to 41% slower with it);
    - the tile is stored into y's row once.

    One kernel serves every graph of its feature count and index widths.
    Element types other than f32 get an error: there is no generic
    lowering of the op.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector (8: AVX2, 16: AVX-512)">,
    Option<"vectors", "vectors", "int64_t", /*default=*/"0",
           "Vectors of features per register tile (0: F's, up to 16 at "
           "16 lanes, 8 at 8)">,
    Option<"entries", "entries", "int64_t", /*default=*/"0",
           "Stored entries per iteration, each its own accumulators (0: 2 "
           "where the tile leaves room in the register file, else 1)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"64",
           "Row ranges of equal nnz the parallel loop splits the rows into">,
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"16",
           "Stored entries ahead whose row of h is prefetched (0: none)">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerSDDMMRows : Pass<"smlir-lower-sddmm-rows", "::mlir::func::FuncOp"> {
  let summary = "The grouped row kernel of smlir.sddmm_rows (b read by rows, column-blocked in L1)";
  let description = [{
    Replaces an `smlir.sddmm_rows` by the loops its attributes describe, in
    an `smlir.kernel`:

    - an `scf.parallel` over batch entries and tiles of `tile_rows` rows;
      the tile's column span (its rows' first and last columns); where the
      tile reads each column of the span `min_reuse`+ times, column blocks
      of b that fit `l1_budget`, each read by every row of the tile before
      the next (a cursor per row); else one block;
    - per block and row, a's row in ceil(D / W) vectors of `lanes` (W),
      the last masked past D; `group` (G) entries at a time while the G-th
      is in the block: W-lane FMA accumulators (two chains per entry)
      summed lane-wise by a transpose tree (log2 G levels of two shuffles
      and one add per pair) into one vector<G> of dot products, times the
      mask values with `scaled`, one store; then one entry at a time (a
      W-lane reduction);
    - tiles that do not block b prefetch b's rows `prefetch` groups ahead
      (they come from L2 / L3 in the mask's order).

    The result is a new [B, nnz] buffer, or the caller's where its only
    use is a `bufferization.materialize_in_destination` into a buffer.
    The caller checks the mask's buffers (monotone positions, coordinates
    in range) before the kernel reads them.
  }];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerSparseAttention
    : Pass<"smlir-lower-sparse-attention", "::mlir::func::FuncOp"> {
  let summary = "The fused row kernel of smlir.sparse_attention (no score matrix)";
  let description = [{
    Replaces an `smlir.sparse_attention` by one pass per row, in an
    `smlir.kernel`: an `scf.parallel` over batch entries and rows; the
    row's scores `group` entries at a time as `smlir-lower-sddmm-rows`
    computes them (a transpose tree of `lanes`-lane accumulators; the last
    n mod G entries one at a time) times `scale`, with their max, into an
    N-float stack scratch; `exp(s - max)` 16 lanes at a time (`math.exp`,
    a polynomial after `smlir-approximate-math`) and their sum l; the sum
    of `p_j v[c_j, :]` in one F-lane FMA vector; `out[i, :] = acc / l` (a
    row with no stored entry: zeros). The result is a new [B, M, F] buffer.
  }];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerBatchMatmul
    : Pass<"smlir-lower-batch-matmul", "::mlir::func::FuncOp"> {
  let summary = "Register-tiled vector loops for a dense f32 batch_matmul";
  let description = [{
    Replaces a dense f32 `linalg.batch_matmul` with static shapes, default
    maps and a zero init (attention's `q * k^T` and `p * v`) by explicit
    loops: B's rows are contiguous along n, so no packing is needed. A tile
    of `rows` rows of y x `vectors` vectors of `lanes` along n accumulates
    `broadcast(A[b, m, k]) * B[b, k, n:]` in `rows * vectors` independent
    FMA chains and is stored as it is (masked past N); an `scf.parallel`
    over (batch, block of rows) splits the threads. The loops go into an
    `smlir.kernel` for smlir-outline-kernels.

    Tile options left at 0 take the tile measured for `lanes` (those of
    smlir-lower-sparse-linear's CSR kernel): 8 lanes 4 x 2, 16 lanes 4 x 1.
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Rows of y per register tile (0: the default for the lanes)">,
    Option<"vectors", "vectors", "int64_t", /*default=*/"0",
           "Vectors along n per register tile (0: by lanes)">,
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector (8: AVX2, 16: AVX-512)">,
  ];
  let dependentDialects = ["::mlir::smlir::SparseMLIRDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def OutlineKernels : Pass<"smlir-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "One private function per distinct micro-kernel";
  let description = [{
    `smlir-lower-sparse-linear` and `smlir-vectorize-rows` emit
    each kernel's loops in an `scf.execute_region` tagged `smlir.kernel`
    with what it computes and its shape. Each such region becomes a call of
    a private function taking the buffers the loops use (constants are
    cloned in). Regions whose functions would be identical (same type, same
    body up to locations) share one: a BERT layer's q, k, v and output
    projections are one 768x768 kernel, its two layer norms one reduction,
    so LLVM optimizes and generates their code once. A function called once
    is inlined back by LLVM.

    ```mlir
    scf.execute_region {
      scf.parallel ... { ... %x, %values ... }
      scf.yield
    } {smlir.kernel = "linear_csr_1024x768x768"}
    // becomes
    func.call @smlir_linear_csr_1024x768x768(%x, %positions, ...) : (...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def BufferDeallocation
    : Pass<"smlir-buffer-deallocation", "::mlir::ModuleOp"> {
  let summary = "Free temporary buffers where upstream deallocation lowers safely";
  let description = [{
    MLIR 22's sparsifier pipeline frees no temporaries: every call of a
    compiled model leaked its intermediate buffers (34 KB per call of a
    two-layer MLP). This pass runs upstream's `buffer-deallocation-pipeline`
    on bufferized IR, except when the module builds sparse tensors inside
    (`memref.realloc` from sparse insertion): there the lowered deallocation
    helper stores `i1` values, which MLIR 22's memref-to-LLVM conversion
    aborts on. That case is reported with a warning (temporaries of such
    kernels are not freed).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def WidenBoolBuffers
    : Pass<"smlir-widen-bool-buffers", "::mlir::ModuleOp"> {
  let summary = "Give i1 (bool) buffers i8 elements before lowering to LLVM";
  let description = [{
    MLIR 22's memref-to-LLVM conversion aborts the process (an assertion,
    not a diagnostic) on a `memref.load` or `memref.store` of a sub-byte
    element type. Bool tensors that live in memory bufferize to such
    buffers: attention masks (`nn.MultiheadAttention`,
    `F.scaled_dot_product_attention`), `masked_fill`'s condition, the
    accumulator of `.all()` / `.any()`, which no fusion can keep in
    registers.

    This pass, run on bufferized IR just before the memref lowering, gives
    every buffer of signless integers narrower than 8 bits one byte per
    element (torch's own bool layout, and what LLVM stores an `i1` as):

    - `memref.load`, `vector.load`, `vector.maskedload`,
      `vector.transfer_read` load i8 and truncate (`arith.trunci`); stores
      (and pass-through / padding values) are zero-extended (`arith.extui`),
      so every byte holds 0 or 1;
    - ops that only pass buffers along (alloc, dealloc, views, reshapes,
      copies, `memref.global` + `get_global`, function signatures and calls,
      `scf` loops and branches) just change type; an i1 global's values are
      kept.

    Upstream's narrow-type emulation would instead pack 8 bools per byte,
    with atomic read-modify-write stores (racy otherwise under `scf.parallel`)
    and a bit-packed ABI that torch's bool tensors do not have.

    An op it cannot rewrite, or a sub-byte buffer it does not widen (narrow
    floats), is an error of this pass, so the compile fails with a diagnostic
    instead of aborting in the LLVM lowering.

    ```mlir
    %m = memref.alloc() : memref<7x7xi1>
    memref.store %b, %m[%i, %j] : memref<7x7xi1>
    %v = memref.load %m[%i, %j] : memref<7x7xi1>
    // becomes
    %m = memref.alloc() : memref<7x7xi8>
    %w = arith.extui %b : i1 to i8
    memref.store %w, %m[%i, %j] : memref<7x7xi8>
    %l = memref.load %m[%i, %j] : memref<7x7xi8>
    %v = arith.trunci %l : i8 to i1
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def UnsignedInsertionIndices
    : Pass<"smlir-unsigned-insertion-indices", "::mlir::ModuleOp"> {
  let summary = "Read narrow positions as unsigned in upstream's sparse insertion functions";
  let description = [{
    Narrow positions and coordinates (`posWidth` / `crdWidth` below 64) are
    unsigned in MLIR's sparse_tensor storage: its runtime keeps them as
    `uint8_t` ... `uint32_t` and its generated loops zero-extend every load.
    MLIR 22's insertion codegen (the private `_insert_<levels>_...`
    functions that building a sparse tensor in compiled code calls: a dense
    -> sparse convert, a sparsifier on an intermediate, a sparse result)
    casts the next position it loads with a sign-extending
    `arith.index_cast` instead. With 8-bit positions, a row ending past 127
    entries then reads (and writes a value) before the coordinates buffer:
    intermittent wrong answers, or a corrupted heap.

    Run right after sparsification, this pass turns every `arith.index_cast`
    from a signless integer narrower than 64 bits to `index` inside those
    functions into `arith.index_castui`. Casts in other functions, and
    casts from `index` (truncations: the same bits either way), are left
    alone.

    ```mlir
    func.func private @_insert_dense_compressed_8_24_f32_32_8(%pos: memref<?xi8>, ...) {
      %hi = memref.load %pos[%next] : memref<?xi8>
      %i = arith.index_cast %hi : i8 to index
    // becomes
      %i = arith.index_castui %hi : i8 to index
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def DropDeviceAnnotations
    : Pass<"smlir-drop-device-annotations", "::mlir::func::FuncOp"> {
  let summary = "Remove the device-argument annotations of convert-smlir-to-nvgpu";
  let description = [{
    `convert-smlir-to-nvgpu` marks the arguments it adds with
    `smlir.device = #smlir.device_buffer<...>`, `smlir.kernel_operand =
    #smlir.kernel_operand<...>` and `smlir.mma_k`: what the caller (Python
    reads them from the "gpu" stage) allocates and uploads. Once the
    launches are built no pass reads them, and their typed values would
    make the host code unreadable by upstream tools that do not load the
    smlir dialect (`mlir-translate --mlir-to-llvmir` of the "llvm" stage).
    `smlir-nm-cuda-pipeline` runs this right after the conversion;
    `smlir.tensor_name` (a plain string) stays.

    ```mlir
    func.func @main(%v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.tensor_name = "fc.weight"})
    // becomes
    func.func @main(%v: memref<4x512xf16> {smlir.tensor_name = "fc.weight"})
    ```
  }];
}

def CheckBlockSparseReads
    : Pass<"smlir-check-block-sparse-reads", "::mlir::func::FuncOp"> {
  let summary = "Refuse linalg reads of n:m tensors that upstream sparsification crashes on";
  let description = [{
    Upstream `sparse-reinterpret-map` rewrites a linalg op reading a tensor
    whose dim-to-level map is not a permutation into level coordinates;
    given an n:m operand (`d1 floordiv 4`, `d1 mod 4 : structured[2, 4]`)
    read through a map that reorders its dimensions (a transpose, a
    matmul's right operand) it crashes (LLVM 22, `genReplaceDimToLvlMap`;
    BSR's block maps it takes).
    `smlir-sparse-cpu-frontend` never leaves such reads (our micro-kernels
    take n:m linears; `smlir-sparse-fallback` stores the other readers
    densely), so this only fires when `smlir-sparse-cpu-lowering` runs on IR
    that skipped it: an error naming the op and the operand, not a crash.

    ```mlir
    %t = linalg.transpose ins(%w : tensor<64x32xf32, #NM24>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
    // error: 'linalg.transpose' reads operand 0 (an n:m tensor, ...) through an indexing map that reorders its dimensions ...
    ```
  }];
}

#endif // SPARSE_MLIR_TRANSFORMS_PASSES_TD
