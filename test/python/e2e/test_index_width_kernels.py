"""Every index width against the kernels that read it.

Weights (packed by Python, read by our micro-kernels or upstream loops) and
intermediates (packed by compiled code every call), CSR / CSC / COO / BSR,
widths 0 (index), 8, 16, 32 and 64, at the largest index a width holds.
Found by fuzzing: `CSR(crd_width=0)` aborted in smlir-lower-sparse-linear
(it asked index for a bit width), and an intermediate stored with 8-bit
positions gave intermittent wrong rows past 127 entries (MLIR 22's
insertion code sign-extended them: smlir-unsigned-insertion-indices). The
intermediates are called many times, since that failure was intermittent.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm

WIDTHS = [0, 8, 16, 32, 64]


def _weight_case(fmt: str, width: int) -> tuple[tuple[int, int], sm.Encoding]:
    """(weight shape, encoding) whose largest position / coordinate is the
    largest 8 bits hold where `width` is 8 (other widths: the same shapes)."""
    widths = {"pos_width": width, "crd_width": width}
    if fmt == "csr":
        return (1, 255), sm.CSR(sparsifier=sm.KeepAll(), **widths)       # 255 entries, column 254
    if fmt == "csc":
        return (255, 1), sm.CSC(sparsifier=sm.KeepAll(), **widths)       # row 254
    if fmt == "coo":
        return (255, 1), sm.COO(sparsifier=sm.KeepAll(), **widths)       # 255 entries, row 254
    # Block row 1 is zeroed by the test: 255 stored blocks, block column 254.
    return (4, 510), sm.BSR(block=(2, 2), sparsifier=sm.KeepAll(), **widths)


@pytest.mark.parametrize("tokens", [2, 16], ids=["decode", "blocks"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr"])
def test_weight_index_widths_match_eager(fmt: str, width: int, tokens: int) -> None:
    (rows, cols), encoding = _weight_case(fmt, width)
    torch.manual_seed(0)
    model = torch.nn.Linear(cols, rows).eval()
    if fmt == "bsr":
        with torch.no_grad():
            model.weight[2:] = 0
    x = torch.randn(tokens, cols)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"weight": encoding}, example_args=(x,), cost_model=False, mode="graph")
    assert not fn.stats()["weight"].format.startswith("dense")
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)


def test_crd_width_0_issue_reproducer() -> None:
    model = torch.nn.Linear(16, 16).eval()
    x = torch.randn(2, 16)
    fn = sm.compile(model, {"weight": sm.CSR(crd_width=0)}, example_args=(x,), mode="graph")
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)


# (tokens, hidden): entries of a dense call of the [tokens, hidden]
# intermediate around 2^7 and 2^8 (8 bits), and past 2^15 (16 bits).
_INTERMEDIATE_SIZES = [(8, 15), (8, 16), (8, 20), (8, 24), (5, 51), (2, 4100), (8, 8000)]


@pytest.mark.parametrize("tokens,hidden", _INTERMEDIATE_SIZES,
                         ids=[f"{t}x{h}" for t, h in _INTERMEDIATE_SIZES])
@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_intermediate_narrow_positions_are_unsigned(fmt: str, tokens: int, hidden: int) -> None:
    entries = tokens * hidden
    width = 8 if entries <= 255 else 16
    encoding = (sm.CSR if fmt == "csr" else sm.COO)(pos_width=width, sparsifier=sm.KeepAll())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 5)).eval()
    x = torch.randn(tokens, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"linear": encoding}, example_args=(x,), mode="graph")
    expected = model(x).detach()
    calls = 200 if width == 8 else 20
    wrong = sum(not torch.allclose(fn(x), expected, rtol=1e-4, atol=1e-5) for _ in range(calls))
    assert wrong == 0, f"{wrong} of {calls} calls wrong ({entries} entries, {width}-bit positions)"


@pytest.mark.parametrize("width", [8, 16])
def test_inferred_sparse_result_with_narrow_positions(width: int) -> None:
    """A zero-preserving op on an encoded intermediate builds its sparse
    result in compiled code (insertion) with the same narrow positions."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 24), torch.nn.ReLU(), torch.nn.Linear(24, 5)).eval()
    x = torch.randn(10, 3)   # 240 entries: past 127
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"linear": sm.CSR(pos_width=width, crd_width=width, sparsifier=sm.KeepAll())},
                        example_args=(x,), mode="graph")
    expected = model(x).detach()
    wrong = sum(not torch.allclose(fn(x), expected, rtol=1e-4, atol=1e-5) for _ in range(200))
    assert wrong == 0, f"{wrong} of 200 calls wrong"
