"""mode="graph" (and what export() ships): an embedding tied to an LM head
and stored CSR or n:m gathers its rows from the stored entries
(smlir-raise-row-gathers / smlir-lower-row-gathers) instead of reading a
dense copy of the table; against eager on the same pruned weights."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.errors import SpecError

FORMATS = {"csr": sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": sm.NM(2, 4), "1:4": sm.NM(1, 4)}
VOCAB, WIDTH = 1000, 64


class TiedLM(torch.nn.Module):
    """Embedding -> tanh -> LM head sharing the embedding's weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(ids)))


class LookupOnly(torch.nn.Module):
    """The embedding alone: its output is the gathered rows themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids)


def _ids(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


def _compiled(model: torch.nn.Module, fmt: str, ids: torch.Tensor):
    # on_fallback="error": a reader of the table read densely fails the compile.
    fn = sm.compile(model, {"embed.weight": FORMATS[fmt]}, example_args=(ids,), mode="graph", cost_model=False,
                    on_fallback="error")
    model.load_state_dict(fn.effective_state_dict(), strict=False)   # eager on the same pruned table
    return fn


@pytest.mark.parametrize("shape", [(16,), (2, 16)], ids=["1-d", "2-d"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_tied_lookup_reads_the_stored_table(fmt: str, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    model = TiedLM().eval()
    fn = _compiled(model, fmt, _ids(shape, 1))
    assert "smlir.gather_rows" not in fn.ir("llvm")   # lowered
    for seed in (2, 3):
        ids = _ids(shape, seed)
        with torch.no_grad():
            torch.testing.assert_close(torch.as_tensor(fn(ids)), model(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_gathered_rows_are_exactly_the_pruned_rows(fmt: str) -> None:
    torch.manual_seed(1)
    model = LookupOnly().eval()
    ids = _ids((24,), 4)
    ids[:3] = torch.tensor([0, VOCAB - 1, 0])   # the first and last rows, one twice
    fn = _compiled(model, fmt, ids)
    pruned = model.embed.weight.detach()
    assert torch.equal(torch.as_tensor(fn(ids)), pruned[ids])   # a copy of stored values: bit-exact


def test_a_csr_row_with_no_stored_entry_gathers_zeros() -> None:
    torch.manual_seed(3)
    model = LookupOnly().eval()
    with torch.no_grad():
        model.embed.weight[5] = 1e-6   # below every other magnitude: pruned whole
    ids = torch.tensor([5, 7, 5, 1])
    fn = _compiled(model, "csr", ids)
    pruned = model.embed.weight.detach()
    assert not pruned[5].any() and pruned[7].any()
    assert torch.equal(torch.as_tensor(fn(ids)), pruned[ids])


def test_out_of_range_index_is_a_clear_error() -> None:
    model = TiedLM().eval()
    ids = _ids((8,), 5)
    fn = _compiled(model, "csr", ids)
    for bad in (VOCAB, -1):
        wrong = ids.clone()
        wrong[3] = bad
        with pytest.raises(SpecError, match=r"index the embedding of 'embed\.weight' .*expected values in \[0, 1000\)"):
            fn(wrong)
