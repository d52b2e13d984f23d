//===- Passes.td - smlir conversion passes -----------------*- tablegen -*-===//

#ifndef SPARSE_MLIR_CONVERSION_PASSES_TD
#define SPARSE_MLIR_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertSparseMLIRToSparseTensor
    : Pass<"convert-smlir-to-sparse-tensor"> {
  let summary = "Lower smlir.sparsify to linalg, scf, tensor and sparse_tensor ops";
  let description = [{
    Rewrites every `smlir.sparsify` into upstream ops that the `sparsifier`
    pipeline understands: each sparsifier builds a dense masked tensor (zeros
    where dropped), which `sparse_tensor.convert` stores in the encoding (no
    convert for `#smlir.dense`). An `smlir.kernel` still in place (one
    smlir-outline-kernels does not outline) is inlined.

    Streaming sparsifiers, element-wise:

    - `#smlir.keep_all` into `sparse_tensor.convert` (which drops exact zeros),
      or into nothing for `#smlir.dense`;
    - `#smlir.threshold<t>` into an element-wise `linalg.generic` over a
      zero-filled output that selects `|x| >= t ? x : out`;
    - `#smlir.random_fraction<f, seed>` the same way, keeping an element when
      a Philox4x32-10 word keyed by the seed and the element's linear index,
      as a 24-bit uniform number, is `>= f` (any thread order gives the same
      mask; `sparse_mlir/philox.py` is the reference).

    Blocking and materializing sparsifiers (static shapes; f16, bf16, f32,
    f64; `sparse_mlir/weights.py` is the reference, NaN ranks below every
    number and ties go to the lower row-major index):

    - `#smlir.nm_magnitude<n, m, dim>`: per element, a `linalg.generic` counts
      the elements of its group that rank above it (m unrolled extracts).
    - `#smlir.nm_magnitude<..., transposable = true>` (matrices): an `scf.for`
      over the m x m tiles; per tile, the rank of every element by pairwise
      comparison gives the visiting order, then a greedy pass keeps an
      element while its row and its column of the tile hold fewer than n.
      O(m^2) scratch memory.
    - `#smlir.scalar_fraction<f>`: keeps the `size - floor(f * size)` largest
      |x| by radix select on an order-keeping i64 key (NaN -> 0, else the bits
      of |x| plus one) over the collapsed 1-d tensor: per 16-bit digit, one
      histogram pass (`tensor<65536xi64>`, `scf.for` with a tensor
      iter_arg) and one scan of it for the digit of the cut; a final pass in
      index order keeps keys above the cut and the first ties equal to it.
      O(size) per pass, no sort.
    - `#smlir.block_fraction<f, block = [r, c]>` (matrices): f64 L1 norms per
      tile (summed in row-major order within the tile), the same selection on
      their 64-bit keys, then an element-wise `linalg.generic` that reads its
      tile's decision.

    What is left (a `block_fraction` with another block rank, dynamic shapes,
    other element types) is reported with the tensor's name, the sparsifier
    and the reason; on function arguments `smlir-hoist-argument-sparsifiers`
    hands such sparsifiers to the caller. So is an n:m target (`#smlir.nm`):
    `sparse_tensor.convert` drops zeros and would leave groups with fewer
    than n stored entries.

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
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::sparse_tensor::SparseTensorDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def ConvertSparseMLIRToNVGPU
    : Pass<"convert-smlir-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Run x * W^T with a 2:4 f16/bf16 weight on sparse tensor cores";
  let description = [{
    For every 2:4 weight argument of a public function (hoisted by
    `smlir-hoist-argument-sparsifiers`: `smlir.encoding = #smlir.nm<n = 2,
    m = 4>`, f16 or bf16, static `R x K`) read by `smlir.linear` ops
    (out_in, a static f16/bf16 `x`, an f32 result: what
    `smlir-raise-linear{mixed-precision=true}` makes of torch-mlir's
    `F.linear`, which `smlir-nm-cuda-pipeline` runs first), each linear
    becomes a launch of a generated kernel that runs
    `nvgpu.mma.sp.sync` (f16) or `nvvm.mma.sp.sync` (bf16: upstream's nvgpu
    lowering has no bf16 sparse MMA in MLIR 22) with f32 accumulators.

    The sparse MMA operand is A (16 rows x k), so the kernel computes
    `y^T = W * x^T`: W's rows are the MMA's M, tokens its N. The weight
    argument becomes, at its position,

    - `memref<R/16 x 8K x T>`
      `{smlir.device = #smlir.device_buffer<nm24_values>}`: the two kept
      values of every group of four in *fragment order*: per 16-row tile and
      k-step, lane by lane, the A registers that lane holds, so a lane loads
      its fragment with one 16-byte (m16n8k32) or 8-byte (m16n8k16) load;
    - `memref<R/16 x (K/k)*Q x i32>`
      `{smlir.device = #smlir.device_buffer<nm24_metadata>}`: per
      16-row tile and k-step, the metadata register of each thread that
      supplies it (sparsity selector 0), Q = 8 for m16n8k16, 16 for
      m16n8k32 (both layouts: `sparse_mlir/cuda/nm24.py`);

    both device pointers the caller uploads once, followed by device
    scratch buffers per linear
    (`{smlir.device = #smlir.device_buffer<scratch>}`, with
    `smlir.kernel_operand = #smlir.kernel_operand<x>`, `<y>` and, with a
    bias, `<bias>`). The host copies x (and the bias) in, launches, and
    copies y into a new host buffer that replaces what the kernel
    computed. Its epilogue takes over torch-mlir's
    `F.linear` tail: the linear's f32 bias operand or else its single reader
    `y + bias[j]` (an f32 1-d bias), and the single reader `truncf` to the
    weight's element type, so y comes back in f16/bf16 (half the bytes, no
    host-side rounding loop). Any other reader of a 2:4 weight, and any
    `smlir.linear` not reading one, is an error: the GPU path has no sparse
    fallback.

    ```mlir
    %y = smlir.linear %x, %W : tensor<64x768xf16>, tensor<3072x768xf16, #NM24> -> tensor<64x3072xf32>
    ```

    Kernel: each warp computes 64 weight rows x `warp-tokens` tokens (4 x 4
    or 4 x 8 fragments of 16 x 8, f32 accumulators in registers); a block
    the largest tile within `tile-rows` x `tile-tokens` that divides the
    linear (at most 8 warps); blocks adjacent in launch order walk the
    weight and share an x tile. Along K, x moves through `pipeline-stages`
    shared-memory stages of 64 columns filled by 16-byte
    `nvgpu.device_async_copy` (cp.async), the next stages' copies in flight
    while the current one is multiplied; B fragments come from shared memory by `nvgpu.ldmatrix`; A
    fragments and metadata from global memory, loaded one stage ahead into
    registers. Measured on an H100 (benchmarks/gpu_nm.py, m16n8k32):
    ~490 TF/s at 4096^3, against 49 TF/s for the first (32 x 32 warps,
    scalar loads) version; staging A through shared memory as well, a
    third x stage (`pipeline-stages=3`: 466 TF/s) or capping registers for
    more blocks per SM ran slower.

    ```mlir
    %t = linalg.transpose ins(%w : tensor<64x64xf16, #NM24>) ... [1, 0]
    %y = linalg.matmul ins(%x, %t : tensor<64x64xf16>, tensor<64x64xf16>)
                       outs(%zero : tensor<64x64xf32>) -> tensor<64x64xf32>
    // becomes
    gpu.memcpy %dx, %xb : memref<64x64xf16>, memref<64x64xf16>
    gpu.launch_func @smlir_nm24_kernels::@nm24_linear_f16_k16_64x64x64
        blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1)
        args(%values : memref<4x512xf16>, %meta : memref<4x32xi32>,
             %dx : memref<64x64xf16>, %dy : memref<64x64xf32>)
    gpu.memcpy %hy, %dy : memref<64x64xf32>, memref<64x64xf32>
    ```

    A 2:4 weight that cannot be lowered (other readers, element type, rows
    not a multiple of 64, K not a multiple of 64, tokens not a multiple of
    32) is an error naming the tensor: there is no sparse fallback on the
    GPU.
  }];
  let options = [
    Option<"mmaK", "mma-k", "int64_t", /*default=*/"16",
           "K of the sparse MMA: 16 (m16n8k16) or 32 (m16n8k32)">,
    Option<"tileRows", "tile-rows", "int64_t", /*default=*/"128",
           "Most weight rows per thread block (64, 128, 256 or 512); each "
           "linear gets the largest of these that divides its rows">,
    Option<"tileTokens", "tile-tokens", "int64_t", /*default=*/"64",
           "Most tokens per thread block (a multiple of 32 up to 128); each "
           "linear gets the largest such multiple that divides its tokens "
           "with at most 8 warps a block">,
    Option<"warpTokens", "warp-tokens", "int64_t", /*default=*/"64",
           "Tokens per warp, 32 or 64 (linears whose tokens are not a "
           "multiple of it take 32): each warp computes 64 weight rows x "
           "this many tokens">,
    Option<"pipelineStages", "pipeline-stages", "int64_t", /*default=*/"2",
           "Shared-memory stages of x (2 or 3): copies run this many minus "
           "one stages ahead of the multiplication">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // SPARSE_MLIR_CONVERSION_PASSES_TD
