"""smlir-lower-sparse-linear: the register-tiled CPU kernels for x @ W^T.

Every format the micro-kernels handle (dense, CSR, n:m), at shapes whose
token count, row count and K leave partial register tiles, checked against
eager PyTorch on the same pruned weights; threads change nothing; the cost
model stores a weight densely above its break-even density and says so.
"""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import at_thread_counts
from sparse_mlir.runtime.cpu import host_isa_flags, vector_lanes

from .reference import compile_and_check

# (tokens M, in-features K, out-features N): full tiles, partial token and
# row tiles (M, N not multiples of 16 and 4), the decode kernel (M < 4; K
# not a multiple of the 8 lanes; rows of 0 to 60 stored entries: vectors of
# 8 gathered entries, in lockstep and per row, and scalar tails; K = 520:
# n:m read in k-slices of whole groups, the last one partial; 4+ token
# blocks: CSR row blocks interleaved, here with a partial last token block,
# a partial last row block and K not a multiple of 8: x packed by 8 x 8
# register transposes and a scalar tail; n:m with 4+ token blocks of 32:
# interleaved groups, unsliced with whole tiles, and sliced with a partial
# last row block, whose rows past N are zero; K = 1100: n:m in k-slices of
# 16 KB of slab, the interleaved CSR slab 70 KB).
SHAPES = [(64, 128, 96), (37, 72, 19), (5, 64, 30), (3, 64, 32), (1, 44, 3), (2, 240, 37), (40, 520, 22),
          (70, 204, 37), (100, 96, 36), (130, 520, 22), (70, 1100, 37)]
# f32 lanes per vector: AVX2's 8 and AVX-512's 16 (each with its own tiles),
# whatever this host has (LLVM splits vectors wider than the host's).
LANES = [8, 16]

FORMATS = {
    "dense": None,
    "csr": sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
    "csr-empty-rows": sm.CSR(sparsifier=sm.ScalarFraction(0.995)),
    "2:4": sm.NM(2, 4),
    "1:4": sm.NM(1, 4),
    "2:8": sm.NM(2, 8),
    "3:8": sm.NM(3, 8),  # 8 lanes hold no whole number of groups: scalar decode
    "csr-16-bit": sm.CSR(crd_width=16, sparsifier=sm.ScalarFraction(0.75)),
}


def permuted_decode(tokens: int, n: int, m: int, lanes: int | None = None) -> bool:
    """Whether smlir-lower-sparse-linear takes the n:m decode kernel that
    permutes x in registers (AVX-512 hosts, 16 lanes, m = 2n, <= 8 tokens)."""
    lanes = lanes or vector_lanes()
    return "avx512f" in host_isa_flags() and lanes == 16 and m == 2 * n and 16 % n == 0 and tokens <= 8


def _linear(k: int, n: int, bias: bool = True) -> torch.nn.Linear:
    torch.manual_seed(k * 1000 + n)
    return torch.nn.Linear(k, n, bias=bias)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_matches_eager(shape: tuple[int, int, int], fmt: str, lanes: int) -> None:
    m, k, n = shape
    encoding = FORMATS[fmt]
    if isinstance(encoding, sm.NM) and k % encoding.m:
        pytest.skip(f"K={k} is not a multiple of m={encoding.m} (n:m needs whole groups)")
    model = _linear(k, n)
    x = torch.randn(m, k)
    fn = compile_and_check(model, x, {"weight": encoding} if encoding else {}, vector_lanes=lanes)
    assert f"lanes={lanes}" in fn.pipeline
    assert "call @smlir_linear_" in fn.ir("sparse"), "the linear did not take the micro-kernel"
    assert "linalg.transpose" not in fn.ir("sparse")


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("shape", [(130, 520, 22), (40, 520, 22), (2, 240, 37)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("n,m", [(2, 5), (1, 10)])
def test_benchmarked_wide_groups_match_eager(shape: tuple[int, int, int], n: int, m: int, lanes: int) -> None:
    """The suite's 2:5 and 1:10 (m dividing K): interleaved and k-sliced,
    one token block, and decode."""
    tokens, k, out = shape
    model = _linear(k, out)
    x = torch.randn(tokens, k)
    fn = compile_and_check(model, x, {"weight": sm.NM(n, m)}, vector_lanes=lanes, cost_model=False)
    assert f"linear_{n}of{m}_" in fn.ir("sparse")


@pytest.mark.parametrize("fmt", ["dense", "csr", "2:4", "csr-empty-rows", "2:4-rows4"])
def test_weights_past_the_l2_budget_run_in_row_chunks(fmt: str) -> None:
    """Weights of more than 512 KB as the token loops read them (2052 x 256,
    32 token blocks: dense and 2:4 in 5 chunks rounded up to 8, CSR in 2
    rounded up to 4, rows sharing patterns in 3 rounded up to 4; row blocks
    spread evenly, chunks differing by one) run in row chunks, the outer
    loop of the token-block loop; any thread count."""
    encoding = sm.NM(2, 4, rows=4) if fmt == "2:4-rows4" else FORMATS[fmt]
    model = _linear(256, 2052)
    x = torch.randn(250, 256)
    fn = compile_and_check(model, x, {"weight": encoding} if encoding else {}, vector_lanes=8, cost_model=False)
    two, one = at_thread_counts(lambda: fn(x), (2, 1))
    assert torch.equal(one, two)


def test_vector_lanes_default_to_the_host_and_are_checked() -> None:
    from sparse_mlir.runtime.cpu import host_isa_flags, vector_lanes
    assert vector_lanes() == (16 if "avx512f" in host_isa_flags() else 8)
    model = _linear(32, 8)
    x = torch.randn(4, 32)
    assert f"lanes={vector_lanes()}" in sm.compile(model, {}, example_args=(x,), mode="graph").pipeline
    with pytest.raises(sm.SpecError, match="vector_lanes must be one of"):
        sm.compile(model, {}, example_args=(x,), vector_lanes=12, mode="graph")


def test_batched_input_and_two_layers() -> None:
    """3-d activations (collapsed to tokens) and a second linear reading the
    first's output through a ReLU."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 20))
    x = torch.randn(3, 7, 64)
    fn = compile_and_check(model, x, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7)),
                                      "2.weight": sm.NM(2, 4)})
    assert fn.ir("sparse").count("call @smlir_linear_") == 2


@pytest.mark.parametrize("fmt", ["dense", "csr", "2:4"])
def test_thread_count_does_not_change_results(fmt: str) -> None:
    """Each output element is summed by one thread in one order: bit-identical
    for any thread count."""
    encoding = FORMATS[fmt]
    model = _linear(96, 40)
    x = torch.randn(70, 96)
    fn = sm.compile(model, {"weight": encoding} if encoding else {}, example_args=(x,), mode="graph")
    one, two = at_thread_counts(lambda: fn(x))
    assert torch.equal(one, two)


def test_identical_linears_share_one_kernel() -> None:
    """smlir-outline-kernels: same-shape linears in one format call one
    function (one copy of code for LLVM); each still reads its own weight."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(48, 48), torch.nn.ReLU(), torch.nn.Linear(48, 48),
                                torch.nn.ReLU(), torch.nn.Linear(48, 16))
    x = torch.randn(20, 48)
    csr = {name: sm.CSR(sparsifier=sm.ScalarFraction(0.6)) for name in ("0.weight", "2.weight", "4.weight")}
    fn = compile_and_check(model, x, csr)
    sparse = fn.ir("sparse")
    assert sparse.count("call @smlir_linear_csr_20x48x48(") == 2
    assert sparse.count("func.func private @smlir_linear_csr_20x48x48(") == 1
    assert sparse.count("func.func private @smlir_linear_csr_20x48x16(") == 1


def test_row_kernels_are_threaded_and_thread_count_does_not_change_them() -> None:
    """Layer norm (row reductions) and GELU (element-wise) run under
    scf.parallel; each row is computed by one thread in one order."""
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.LayerNorm(72), torch.nn.GELU()).eval()
    x = torch.randn(4, 33, 72)
    fn = sm.compile(model, {}, example_args=(x,), mode="graph")
    assert "call @smlir_row_reduction_" in fn.ir("sparse") and "call @smlir_rows_" in fn.ir("sparse")
    one, two = at_thread_counts(lambda: fn(x))
    assert torch.equal(one, two)
    with torch.no_grad():
        torch.testing.assert_close(one, model(x), rtol=1e-5, atol=1e-5)


def test_openmp_is_used_when_available() -> None:
    from sparse_mlir.runtime.threads import openmp_available

    if not openmp_available():
        pytest.skip("no libomp on this machine (bash dev.sh installs Debian's libomp5)")
    model = _linear(64, 32)
    x = torch.randn(32, 64)
    fn = sm.compile(model, {}, example_args=(x,), mode="graph")
    assert "openmp=true" in fn.pipeline
    assert "omp.parallel" in fn.ir("llvm")


def test_cost_model_stores_dense_above_break_even() -> None:
    """70% kept in CSR is slower than dense: stored densely (still pruned),
    and the plan says why; cost_model=False keeps CSR. Same numbers."""
    model = _linear(512, 256, bias=False)
    x = torch.randn(16, 512)
    encodings = {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.3))}
    chosen = compile_and_check(model, x, encodings)
    (entry,) = chosen.sparsity_plan()
    assert entry.stored_as.startswith("dense (cost model: density 0.70 is above the csr break-even")
    assert "sparse_tensor" not in chosen.ir("sparse")
    forced = sm.compile(model, encodings, example_args=(x,), cost_model=False, mode="graph")
    (entry,) = forced.sparsity_plan()
    assert entry.stored_as == "csr"
    torch.testing.assert_close(forced(x), chosen(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("encoding", [sm.CSR(sparsifier=sm.ScalarFraction(0.9)), sm.NM(2, 4)],
                         ids=["csr-90", "2:4"])
def test_cost_model_keeps_sparse_below_break_even(encoding: sm.Encoding) -> None:
    model = _linear(512, 256, bias=False)
    x = torch.randn(4, 512)
    fn = sm.compile(model, {"weight": encoding}, example_args=(x,), mode="graph")
    (entry,) = fn.sparsity_plan()
    assert entry.stored_as == entry.format


class _RightOperand(torch.nn.Module):
    """HF's Conv1D: y = x @ W + b with W stored [in, out]."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(512, 256))
        self.bias = torch.nn.Parameter(torch.randn(256))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight)


def test_cost_model_uses_upstreams_break_even_for_csr_not_read_by_a_linear() -> None:
    """x @ W runs upstream's loops, not the CSR micro-kernel: 70% sparse
    (density 0.30, below the micro-kernel's 0.41) is stored densely there,
    kept as CSR for an F.linear."""
    encodings = {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7))}
    x = torch.randn(16, 512)
    (right,) = compile_and_check(_RightOperand().eval(), x, encodings).sparsity_plan()
    assert right.stored_as.startswith("dense (cost model: density 0.30 is above the csr break-even 0.20")
    (linear,) = sm.compile(_linear(512, 256, bias=False), encodings, example_args=(x,), mode="graph").sparsity_plan()
    assert linear.stored_as == "csr"


def test_cost_model_knows_decode_shapes() -> None:
    """One token: the decode kernel's break-even is far lower (0.20), so 75%
    CSR is stored densely there but kept at 16 tokens; 95% stays sparse."""
    model = _linear(512, 256, bias=False)
    encodings = {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.75))}
    (decode,) = compile_and_check(model, torch.randn(1, 512), encodings).sparsity_plan()
    assert decode.stored_as.startswith("dense (cost model: density 0.25 is above the csr break-even 0.20 "
                                       "for 1 token (decode)")
    (batch,) = sm.compile(model, encodings, example_args=(torch.randn(16, 512),), mode="graph").sparsity_plan()
    assert batch.stored_as == "csr"
    very_sparse = {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.95))}
    (kept,) = sm.compile(model, very_sparse, example_args=(torch.randn(1, 512),), mode="graph").sparsity_plan()
    assert kept.stored_as == "csr"


# Rows sharing one n:m pattern (NM(rows=r)): full and partial token tiles,
# k-slices (K = 2752: 256 KB slab slices hold 512 groups of 4 at 32 tokens,
# 682 at 24), decode (M < 4: the per-row kernel reads the same
# storage), groups of 2, 4 and 8 rows (tiles 2 x 4, 4 x 3, 4 x 3); with 27
# and 18 output rows the last group is partial (all but rows = 2 at 18):
# the last row block repeats its last row and its outputs are masked off.
@pytest.mark.parametrize("shape", [(64, 128, 96), (37, 72, 24), (40, 520, 16), (3, 64, 32),
                                   (37, 72, 27), (40, 520, 18), (3, 64, 27), (21, 2752, 18)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("n,m,rows", [(2, 4, 4), (1, 4, 2), (2, 8, 8)])
def test_shared_row_nm_matches_eager(shape: tuple[int, int, int], n: int, m: int, rows: int) -> None:
    tokens, k, out = shape
    model = _linear(k, out)
    x = torch.randn(tokens, k)
    fn = compile_and_check(model, x, {"weight": sm.NM(n, m, rows=rows)})
    kept = fn.effective_state_dict()["weight"] != 0
    for r0 in range(0, out, rows):
        group = kept[r0:r0 + rows]
        assert (group == group.any(dim=0, keepdim=True)).all(), f"rows {r0}.. keep different patterns"
    assert kept.reshape(out, k // m, m).sum(dim=-1).max() <= n
    if permuted_decode(tokens, n, m):   # decode reads each row on its own
        kernel = f"linear_{n}of{m}p_"
    else:
        kernel = f"linear_{n}of{m}r{rows}_" if tokens >= 4 else f"linear_{n}of{m}_"
    assert f"call @smlir_{kernel}" in fn.ir("sparse")


def test_shared_row_nm_on_activations_matches_numpy() -> None:
    """NMMagnitude(rows=2) inside the graph (the MLIR lowering) picks what
    the numpy sparsifier picks for weights: one pattern per row pair."""
    torch.manual_seed(8)
    model = torch.nn.Sequential(torch.nn.Linear(32, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8))
    x = torch.randn(6, 32)
    compile_and_check(model, x, {"relu": sm.Dense(sparsifier=sm.NMMagnitude(2, 4, rows=2))})


def test_shared_row_nm_partial_group_on_activations_matches_numpy() -> None:
    """NMMagnitude(rows=4) on a 6-row activation: the MLIR lowering's last
    group (rows 4, 5) sums its own rows, as the numpy sparsifier does."""
    torch.manual_seed(9)
    model = torch.nn.Sequential(torch.nn.Linear(32, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8))
    x = torch.randn(6, 32)
    compile_and_check(model, x, {"relu": sm.Dense(sparsifier=sm.NMMagnitude(2, 4, rows=4))})


@pytest.mark.parametrize("shape,perm", [((8, 16, 3, 24), (0, 2, 3, 1)), ((5, 12, 3, 20), (0, 2, 3, 1)),
                                        ((13, 7), (1, 0)), ((4, 9, 16), (2, 1, 0)), ((3, 8, 5, 8), (0, 3, 1, 2))],
                         ids=lambda v: "x".join(map(str, v)))
def test_transposes_that_move_the_innermost_dimension_match_torch(shape: tuple[int, ...],
                                                                  perm: tuple[int, ...]) -> None:
    """k^T-style permutes: 8 x 8 register tiles plus element-wise edges,
    threaded over the other dimensions (whole and partial tiles)."""

    class Permute(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.permute(*perm).contiguous() * 2.0

    x = torch.randn(*shape)
    fn = sm.compile(Permute(), {}, example_args=(x,), mode="graph")
    assert "call @smlir_transpose_" in fn.ir("sparse") and "linalg.transpose" not in fn.ir("sparse")
    torch.testing.assert_close(fn(x), Permute()(x), rtol=0, atol=0)


# n:m decode on AVX-512 (m = 2n, 1 to 8 tokens): 16 stored entries per step
# with x picked from a 32-float window by vpermi2ps. Rows of 8 / 20 / 130
# entries (K = 16, 40, 260: all scalar, one vector and a tail, several
# vectors and a tail), N not a multiple of the tile's rows (4 at 1 token,
# 3 at 8), 2:4 / 4:8 / 1:2 and 16-bit coordinates.
@pytest.mark.parametrize("tokens", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("k,out", [(16, 5), (40, 7), (260, 37)], ids=lambda v: str(v))
@pytest.mark.parametrize("encoding", [sm.NM(2, 4), sm.NM(4, 8), sm.NM(1, 2), sm.NM(2, 4, crd_width=16)],
                         ids=["2:4", "4:8", "1:2", "2:4-crd16"])
def test_permuted_nm_decode_matches_eager(tokens: int, k: int, out: int, encoding: sm.NM) -> None:
    if k % encoding.m:
        pytest.skip(f"K={k} is not a multiple of m={encoding.m}")
    model = _linear(k, out)
    x = torch.randn(tokens, k)
    fn = compile_and_check(model, x, {"weight": encoding}, vector_lanes=16, cost_model=False)
    permuted = f"call @smlir_linear_{encoding.n}of{encoding.m}p_" in fn.ir("sparse")
    assert permuted == permuted_decode(tokens, encoding.n, encoding.m, 16)
