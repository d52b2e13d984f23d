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

def RewriteSparseMatmul
    : Pass<"smlir-rewrite-sparse-matmul", "::mlir::func::FuncOp"> {
  let summary = "Compute x * W^T with a sparse W as (W * x^T)^T";
  let description = [{
    torch-mlir imports `F.linear(x, W)` as `linalg.matmul(x, transpose(W))`.
    With a sparse `W` that form makes the sparsifier gather along the
    reduction for every output (xWt), which measured 3-7x slower than
    iterating W's stored rows and doing a contiguous axpy over the
    activations (WxT). This pass rewrites

    ```mlir
    %t = linalg.transpose ins(%W : tensor<NxK, #CSR>) ... permutation = [1, 0]
    %y = linalg.matmul ins(%x, %t : tensor<MxK>, tensor<KxN, #CSR>) outs(%zero : tensor<MxN>)
    ```

    into a transpose of `x` (dense, O(MK)), a `linalg.generic` computing
    `yT[n, m] += W[n, k] * xT[k, m]` with W's rows outermost, and a transpose
    of the result. A non-zero `outs` is added back. Matmuls with a
    user-defined indexing map or a dense right-hand side are left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def SparseFallback : Pass<"smlir-sparse-fallback", "::mlir::func::FuncOp"> {
  let summary = "Read sparse weights densely where no sparse lowering exists";
  let description = [{
    MXNet's storage fallback. A sparse weight argument is kept sparse only if
    every reader has a sparse lowering that is known to work: a kernel built
    by `smlir-rewrite-sparse-matmul` (tagged `smlir.sparse_kernel`), a
    `linalg.matmul` with the sparse operand on the left, a `sparse_tensor`
    op, or `func.return`. Otherwise the argument goes back to its dense type
    (marked `smlir.fallback`, so the caller passes the dense-equivalent
    weight) and one warning per (op, format, tensor), at the first such
    reader, names them. Readers that did have a sparse lowering read one
    `sparse_tensor.convert` of the dense argument. With `fail=true` the
    warning is an error.

    ```mlir
    // warning: no sparse lowering for 'linalg.generic' reading tensor
    //          'proj.weight' stored as csr; computing it densely
    ```
  }];
  let options = [Option<"fail", "fail", "bool", /*default=*/"false",
                        "Report a fallback as an error">];
}

def FuseDenseElementwise
    : Pass<"smlir-fuse-dense-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuse element-wise linalg ops, keeping sparse kernels and contractions intact";
  let description = [{
    Upstream's `linalg-fuse-elementwise-ops` also fuses producers into
    contractions (recomputing them once per output column), propagates
    reshapes onto sparse weights and fuses dense producers into sparse
    kernels, which sparsification then rejects. This pass applies the same
    producer-consumer fusion only when the consumer has no reduction loop and
    neither op reads or writes a sparse tensor: bias add + activation chains
    fuse, matmul-like ops and sparse kernels stay as they are.

    ```mlir
    %b = linalg.generic ... ins(%y, %bias) { addf }    // fused with
    %r = linalg.generic ... ins(%b) { maximumf }       // this one
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
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

#endif // SPARSE_MLIR_TRANSFORMS_PASSES_TD
