//===- Passes.td - smlir conversion passes -----------------*- tablegen -*-===//

#ifndef SPARSE_MLIR_CONVERSION_PASSES_TD
#define SPARSE_MLIR_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertSparseMLIRToSparseTensor
    : Pass<"convert-smlir-to-sparse-tensor"> {
  let summary = "Lower smlir.sparsify with streaming sparsifiers to upstream ops";
  let description = [{
    Rewrites every `smlir.sparsify` with a streaming sparsifier (keep-all,
    threshold, random fraction) into upstream ops that the `sparsifier`
    pipeline understands:

    - `#smlir.keep_all` into `sparse_tensor.convert` (which drops exact zeros),
      or into nothing for `#smlir.dense`;
    - `#smlir.threshold<t>` into an element-wise `linalg.generic` over a
      zero-filled output that selects `|x| >= t ? x : out`, followed by
      `sparse_tensor.convert` into the encoding;
    - `#smlir.random_fraction<f, seed>` the same way, keeping an element when
      a Philox4x32-10 word keyed by the seed and the element's linear index,
      as a 24-bit uniform number, is `>= f` (any thread order gives the same
      mask; `sparse_mlir/philox.py` is the reference).

    Other sparsifiers (blocking and materializing ones) have
    no lowering here yet: on function arguments,
    `smlir-hoist-argument-sparsifiers` hands them to the caller; anywhere
    else each one is reported with the tensor's name and the sparsifier. So is
    an n:m target (`#smlir.nm`): `sparse_tensor.convert` drops zeros and
    would leave groups with fewer than n stored entries.

    ```mlir
    %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.5>
        as #smlir.csr -> tensor<8x8xf32, #CSR>
    // becomes
    %e = tensor.empty() : tensor<8x8xf32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
    %m = linalg.generic {...} ins(%x : tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) {
      ^bb0(%in: f32, %out: f32):
        %a = math.absf %in : f32
        %k = arith.cmpf oge, %a, %cst : f32
        %s = arith.select %k, %in, %out : f32
        linalg.yield %s : f32
    } -> tensor<8x8xf32>
    %r = sparse_tensor.convert %m : tensor<8x8xf32> to tensor<8x8xf32, #CSR>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::sparse_tensor::SparseTensorDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // SPARSE_MLIR_CONVERSION_PASSES_TD
