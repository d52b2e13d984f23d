"""smlir.sampled_matmul's other forms, compiled and run from Python as the
weight gradient is: A read as stored [M, T] or transposed, B as stored
[T, N] or transposed (attention's q k^T), `scaled` ((A B) .* S, issue 26's
masked scores), against torch on the same pattern."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions import sampled
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.reprune import prune_and_pack
from sparse_mlir.compiler.weights import stored_coordinates

# 45 and 60 rows / columns, 19 or 140 contraction elements: partial 8 x 8
# blocks and partial vectors everywhere.
M, N = 45, 60


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("rhs", ["identity", "transposed"])
@pytest.mark.parametrize("lhs", ["identity", "transposed"])
@pytest.mark.parametrize("encoding", [sm.CSR(sparsifier=sm.ScalarFraction(0.7)), sm.NM(2, 4, rows=3)],
                         ids=["csr", "nm_rows"])
@pytest.mark.parametrize("tokens", [19, 140])
def test_forms_match_torch(encoding, lhs, rhs, scaled, tokens):
    torch.manual_seed(tokens)
    packed, pruned = prune_and_pack(encoding, torch.randn(M, N), "pattern")
    rows, cols = (torch.from_numpy(c) for c in stored_coordinates(encoding, packed, (M, N)))
    signature = sampled.SampledSignature(M, N, encoding.attr_text(), lhs, rhs, scaled)
    kernel = sampled.bind(sampled.SAMPLED_KERNELS.get(signature, encoding, KernelOptions()), packed)
    a, b = torch.randn(M, tokens), torch.randn(tokens, N)   # A and B as the product reads them
    ours = sampled.run(kernel, a.t() if lhs == "transposed" else a, b.t() if rhs == "transposed" else b)
    expected = (a @ b)[rows, cols]
    if scaled:
        expected = expected * pruned[rows, cols]
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5 * tokens ** 0.5)
