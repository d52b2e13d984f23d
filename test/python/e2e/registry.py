"""End-to-end cases: a model factory x the encodings to compile it with.

Each case is checked against eager PyTorch loaded with the compiled module's
`effective_state_dict()` (the same pruned weights). Expected failures are
declared beside the case, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP, BertLayer


@dataclass(frozen=True)
class Case:
    name: str
    make_model: Callable[[], torch.nn.Module]
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    make_encodings: Callable[[torch.nn.Module], dict[str, sm.Encoding]]
    expected_formats: dict[str, str] = field(default_factory=dict)  # name -> stats().format
    xfail: str | None = None
    rtol: float = 1e-4
    atol: float = 1e-5


CASES: dict[str, Case] = {}


def register_case(case: Case) -> Case:
    assert case.name not in CASES, case.name
    CASES[case.name] = case
    return case


def _seeded(factory: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return factory().eval()
    return make


def _inputs(*shape: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    def make() -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(1)
        return (torch.randn(*shape, generator=generator),)
    return make


FORMATS: dict[str, Callable[[], sm.Encoding]] = {
    "dense": lambda: sm.Dense(sparsifier=sm.ScalarFraction(0.5)),
    "csr": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
    "csr16": lambda: sm.CSR(pos_width=32, crd_width=16, sparsifier=sm.Threshold(0.05)),
    "csc": lambda: sm.CSC(sparsifier=sm.ScalarFraction(0.7)),
    "coo": lambda: sm.COO(sparsifier=sm.ScalarFraction(0.6)),
    "bsr": lambda: sm.BSR(block=(4, 4), sparsifier=sm.BlockFraction(0.75, block=(4, 4))),
    "nm24": lambda: sm.NM(2, 4),
    "nm18": lambda: sm.NM(1, 8),
}
EXPECTED_FORMAT = {"dense": "dense", "csr": "csr", "csr16": "csr", "csc": "csc", "coo": "coo", "bsr": "bsr",
                   "nm24": "2:4", "nm18": "1:8"}

for fmt, make_encoding in FORMATS.items():
    for bias in (True, False):
        for shape in ((6, 32), (2, 3, 32)):
            register_case(Case(
                name=f"linear_{fmt}_{'bias' if bias else 'nobias'}_{len(shape)}d",
                make_model=_seeded(lambda bias=bias: torch.nn.Linear(32, 24, bias=bias)),
                make_inputs=_inputs(*shape),
                make_encodings=lambda m, make_encoding=make_encoding: {"weight": make_encoding()},
                expected_formats={"weight": EXPECTED_FORMAT[fmt]},
            ))

register_case(Case(
    name="mlp_csr80",
    make_model=_seeded(lambda: MLP([50, 40, 30, 20, 30, 10])),
    make_inputs=_inputs(16, 50),
    make_encodings=lambda m: {f"layers.{i}.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)) for i in range(5)},
    expected_formats={f"layers.{i}.weight": "csr" for i in range(5)},
))

register_case(Case(
    name="mlp_mixed_formats",
    make_model=_seeded(lambda: MLP([64, 48, 32, 16])),
    make_inputs=_inputs(5, 64),
    make_encodings=lambda m: {"layers.0.weight": sm.NM(2, 4), "layers.1.weight": sm.COO(),
                              "layers.2.weight": sm.BSR(block=(4, 8))},
    expected_formats={"layers.0.weight": "2:4", "layers.1.weight": "coo", "layers.2.weight": "bsr"},
))

register_case(Case(
    name="bert_small_csr90",
    make_model=_seeded(lambda: BertLayer(hidden=64, heads=4, ffn=128)),
    make_inputs=_inputs(2, 8, 64),
    make_encodings=lambda m: {n: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) for n in m.linear_names()},
    expected_formats={n: "csr" for n in BertLayer(hidden=64, heads=4, ffn=128).linear_names()},
))

register_case(Case(
    name="bert_small_24",
    make_model=_seeded(lambda: BertLayer(hidden=64, heads=4, ffn=128)),
    make_inputs=_inputs(2, 8, 64),
    make_encodings=lambda m: {n: sm.NM(2, 4) for n in m.linear_names()},
    expected_formats={n: "2:4" for n in BertLayer(hidden=64, heads=4, ffn=128).linear_names()},
))
