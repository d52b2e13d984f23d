"""compile() with index widths and BSR blocks at and past what storage holds.

At the limit (8-bit indices up to 255: MLIR's sparse_tensor and our kernels
read them unsigned) the result matches eager; past it compile raises a
SpecError naming the tensor and encoding, where it used to run with wrong
answers or crash.
"""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm


def _linear(out_features: int, in_features: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(in_features, out_features).eval()


def _x(in_features: int) -> torch.Tensor:
    return torch.randn(9, in_features, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("shape,encoding", [
    ((1, 255), sm.CSR(pos_width=8, crd_width=8)),   # 255 entries, columns up to 254
    ((2, 256), sm.CSR(pos_width=16, crd_width=8)),  # column 255 (micro-kernel)
    ((256, 4), sm.CSC(crd_width=8)),                # row 255 (upstream sparsification)
    ((255, 1), sm.COO(pos_width=8, crd_width=8)),   # 255 entries, row 254
    ((30, 34), sm.BSR(block=(2, 2), pos_width=8)),  # 15 x 17 = 255 blocks
    ((4, 512), sm.BSR(block=(2, 2), crd_width=8)),  # block column 255
    ((4, 1020), sm.NM(2, 255, crd_width=8)),        # in-group positions up to 254
], ids=["csr", "csr-crd", "csc", "coo", "bsr-pos", "bsr-crd", "nm"])
def test_largest_8_bit_indices_compute_what_eager_does(shape: tuple[int, int], encoding: sm.Encoding) -> None:
    model = _linear(*shape)
    x = _x(shape[1])
    fn = sm.compile(model, {"weight": encoding}, example_args=(x,), cost_model=False, mode="graph")
    assert fn.stats()["weight"].format != "dense"
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,encoding,message", [
    ((4, 80), sm.CSR(pos_width=8), "weight: CSR(pos_width=8) cannot hold 320 stored entries "
                                   "(positions up to 255 with 8-bit positions); use pos_width=16 or wider"),
    ((20, 512), sm.CSR(crd_width=8), "weight: CSR(crd_width=8) cannot hold column coordinate 511"),
    ((512, 4), sm.CSC(crd_width=8), "weight: CSC(crd_width=8) cannot hold row coordinate 511"),
    ((4, 80), sm.COO(pos_width=8), "weight: COO(pos_width=8) cannot hold 320 stored entries"),
    ((64, 64), sm.BSR(block=(2, 2), pos_width=8), "weight: BSR(block=(2, 2), pos_width=8) cannot hold 1024 "
                                                  "stored blocks"),
], ids=["csr-pos8", "csr-crd8", "csc-crd8", "coo-pos8", "bsr-pos8"])
def test_index_past_its_width_fails_compile(shape: tuple[int, int], encoding: sm.Encoding, message: str) -> None:
    with pytest.raises(sm.SpecError) as info:
        sm.compile(_linear(*shape), {"weight": encoding}, example_args=(_x(shape[1]),), cost_model=False, mode="graph")
    assert message in str(info.value)


@pytest.mark.parametrize("block", [(20, 4), (4, 32), (20, 32)], ids=["rows", "cols", "whole"])
def test_bsr_block_spanning_a_dimension_fails_before_lowering(block: tuple[int, int]) -> None:
    """These reached the lowering: a non-invertible indexing map, or (whole) a
    segfault. The smlir.sparsify verifier now refuses them up front."""
    with pytest.raises(sm.SpecError) as info:
        sm.compile(_linear(20, 32), {"weight": sm.BSR(block=block, sparsifier=sm.ScalarFraction(0.5))},
                   example_args=(_x(32),), cost_model=False, mode="graph")
    assert (f"tensor 'weight': encoding #smlir.bsr<block = [{block[0]}, {block[1]}]> needs at least 2 blocks "
            "along each dimension of shape [20, 32]") in str(info.value)
