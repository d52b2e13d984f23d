"""A weight that falls back to dense (one reader has no sparse lowering) while
another reader keeps its sparse kernel: smlir-sparse-fallback stores the dense
argument back in the sparse type for that reader. For n:m it used
sparse_tensor.convert, which stages through a COO buffer with the encoding's
8-bit coordinates (row indices >= 256 wrapped: a GPT-2 tied embedding / LM head
with NM(2, 4) was wrong from 257 rows on) and drops zeros (groups with fewer
than n nonzeros corrupted the structured level)."""

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import sparse_mlir as sm


class TiedEmbeddingHead(nn.Module):
    """GPT-2's wte read as an embedding (smlir.gather_rows) and as the LM head
    (F.linear: the n:m micro-kernel), plus a reader with no sparse lowering
    (exp: exp(0) != 0), which makes the weight fall back to dense and be
    stored back in its sparse type for the other two."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)

    def forward(self, ids):
        return F.linear(self.wte(ids), self.wte.weight) + self.wte.weight.exp().mean(1)


def _compile_and_compare(model, encoding, ids, fallback_from):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"wte.weight": encoding}, (ids,), cost_model=False, mode="graph")
    assert fn.stats()["wte.weight"].format == f"dense (fallback from {fallback_from})"
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    with torch.no_grad():
        expected = model(ids)
    for _ in range(2):  # the stored-back weight is rebuilt every call
        torch.testing.assert_close(fn(ids), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vocab", [257, 512])
@pytest.mark.parametrize("encoding, fallback_from", [
    (sm.NM(2, 4), "2:4"),
    (sm.NM(1, 4), "1:4"),
    (sm.NM(2, 8), "2:8"),
], ids=["2of4", "1of4", "2of8"])
def test_tied_embedding_nm_more_than_256_rows(vocab, encoding, fallback_from):
    torch.manual_seed(0)
    model = TiedEmbeddingHead(vocab, 16).eval()
    ids = torch.randint(0, vocab, (2, 5))
    ids[0, 0], ids[0, 1] = vocab - 1, 256  # rows an 8-bit row index wraps
    _compile_and_compare(model, encoding, ids, fallback_from)


@pytest.mark.parametrize("vocab", [260, 257, 512])  # 257: a last row group of 1 row
def test_tied_embedding_nm_shared_rows_more_than_256_rows(vocab):
    torch.manual_seed(0)
    model = TiedEmbeddingHead(vocab, 16).eval()
    ids = torch.randint(0, vocab, (2, 5))
    ids[0, 0] = vocab - 1
    _compile_and_compare(model, sm.NM(2, 4, rows=4), ids, "2:4 (4 rows)")


@pytest.mark.parametrize("vocab", [8, 257])
def test_tied_embedding_nm_groups_with_zeros(vocab):
    """Groups with fewer than n nonzeros store zeros (convert dropped them)."""
    torch.manual_seed(0)
    model = TiedEmbeddingHead(vocab, 16).eval()
    with torch.no_grad():
        model.wte.weight[:, 1:4] = 0     # group 0: one nonzero
        model.wte.weight[::3, 4:8] = 0   # group 1 of every third row: none
        model.wte.weight[1::3, 13] = 0   # group 3: one of two kept is zero
    ids = torch.arange(min(vocab, 10)).reshape(2, -1)
    _compile_and_compare(model, sm.NM(2, 4), ids, "2:4")


def test_tied_embedding_bsr_narrow_coordinates_more_than_256_block_rows():
    """BSR stages through COO too: its 8-bit coordinates held the block rows."""
    torch.manual_seed(0)
    vocab = 1028  # 257 block rows of 4
    model = TiedEmbeddingHead(vocab, 8).eval()
    ids = torch.tensor([[vocab - 1, 1024, 3, 600]])
    encoding = sm.BSR(block=(4, 4), crd_width=8, sparsifier=sm.BlockFraction(0.5, block=(4, 4)))
    _compile_and_compare(model, encoding, ids, "bsr")


def test_index_widths_are_checked_for_a_weight_read_densely_too():
    """The fallback's compiled code converts the dense weight to its encoding
    for the sparse readers: positions past 16 bits wrapped there, unchecked
    (only hoisted weights were packed, and checked, in Python)."""
    model = TiedEmbeddingHead(300, 256).eval()   # 76800 stored entries
    ids = torch.tensor([[0, 299]])
    with pytest.raises(sm.SpecError, match="wte.weight: CSR.*pos_width=16.* cannot hold 76800 stored entries"):
        sm.compile(model, {"wte.weight": sm.CSR(pos_width=16)}, (ids,), cost_model=False, mode="graph")
