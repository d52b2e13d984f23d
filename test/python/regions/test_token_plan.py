"""Any token count without a compile on the call path: the example's counts
get kernels of their own, others run on bucket-sized pieces (padded where
that wastes little); results match eager at every count."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.kernels import KERNELS
from sparse_mlir.compiler.regions.token_plan import BUCKETS, EXACT_MAX, PAD_WASTE, plan


@pytest.mark.parametrize("tokens", [*range(1, 300), 468, 511, 513, 1000, 2047, 3000, 4096, 12544])
def test_pieces_cover_the_tokens_with_bounded_sizes(tokens: int) -> None:
    pieces = plan(tokens)
    assert [p.start for p in pieces] == [sum(q.rows for q in pieces[:i]) for i in range(len(pieces))]
    assert sum(p.rows for p in pieces) == tokens
    for index, piece in enumerate(pieces):
        assert piece.size in BUCKETS or (piece.size == piece.rows <= EXACT_MAX)
        if piece.rows < piece.size:   # padded: the last piece only, little waste or no smaller bucket
            assert index == len(pieces) - 1
            smaller = [b for b in BUCKETS if b <= piece.rows]
            assert piece.size - piece.rows <= PAD_WASTE * piece.size or not smaller


def test_compiled_counts_are_exact() -> None:
    assert plan(468, frozenset({468}))[0].size == 468
    assert plan(468)[0].size == 512


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(40, 72)
        self.down = torch.nn.Linear(72, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


@pytest.mark.parametrize("encoding", [sm.CSR(sparsifier=sm.ScalarFraction(0.8)), sm.NM(2, 4)], ids=["csr", "2:4"])
def test_new_token_counts_use_bucket_kernels_and_match_eager(encoding: sm.Encoding) -> None:
    torch.manual_seed(0)
    model = _MLP().eval()
    example = torch.randn(3, 10, 40)    # 30 tokens: its own kernel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"up.weight": encoding, "down.weight": encoding}, example_args=(example,),
                        mode="regions", cost_model=False)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    up = next(r for r in fn.regions() if r.name == "up.weight")
    counts = [1, 5, 9, 13, 30, 47, 100, 131, 300, 777]
    with torch.no_grad():
        for tokens in counts:
            x = torch.randn(1, tokens, 40)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)
    built = KERNELS.token_counts(up.signature)
    allowed = {30, *range(1, EXACT_MAX + 1), *BUCKETS}
    assert built <= allowed, built - allowed
    for tokens in counts:
        choice = next(c for key, c in up.choices.items() if key[0] == (1, tokens, 40))
        assert sum(p.rows for p in choice.kernel.pieces) == tokens
        assert tokens != 30 or choice.kernel.pieces[0].size == 30   # the example's count stays exact
    assert len(next(c for key, c in up.choices.items() if key[0] == (1, 777, 40)).kernel.pieces) == 2
