"""sm.Auto(): the format of each weight, picked from its nonzero pattern.

For the weight as its sparsifier leaves it, every candidate's stored values
are counted (dense: all; CSR: the nonzeros; BSR: the nonempty blocks' entries;
n:m: n of every m where every group fits; Hybrid(BSR, CSR): the blocks at
least `HYBRID_THRESHOLD` full plus the nonzeros left) and priced by the cost
model's measured cost per stored value (cost_model.STORED_VALUE_COST; Hybrid
also pays for its second kernel). The
cheapest wins; ties go to the simpler format (the order of the candidates).
Counting is a few vectorised passes over the weight: cheap at compile time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch

from sparse_mlir.compiler.cost_model import STORED_VALUE_COST, second_kernel_cost, stored_cost
from sparse_mlir.compiler.weights import apply_sparsifier
from sparse_mlir.encodings import BSR, CSR, NM, Auto, Dense, Encoding, Hybrid, HYBRID_THRESHOLD
from sparse_mlir.errors import SpecError

# Blocks and n:m patterns Auto considers (formats with kernels here).
BLOCKS = ((4, 4), (8, 8))
NM_PATTERNS = ((1, 4), (2, 4))


@dataclass(frozen=True)
class AutoChoice:
    """The format Auto picked for one weight, and why."""

    encoding: Encoding
    reason: str


@dataclass(frozen=True)
class _Candidate:
    name: str
    encoding: Encoding
    stored: int     # values the format stores
    cost: float
    note: str = ""  # (BSR, Hybrid) the share of the nonzeros in full blocks


def choose(weight: np.ndarray, auto: Auto, name: str, hybrid: bool = True) -> AutoChoice:
    """The cheapest format for `weight` [N, K] after `auto`'s sparsifier
    (`hybrid=False`: no Hybrid candidates, for the whole-graph compile)."""
    if weight.ndim != 2:
        raise SpecError(f"{name} (shape {tuple(weight.shape)}): Auto() chooses formats of matrices (linear "
                        "weights) for now; give this weight's format explicitly")
    sparsifier = auto.effective_sparsifier
    pruned = apply_sparsifier(sparsifier, weight, name)
    nonzero = pruned != 0
    numel, nnz = nonzero.size, int(np.count_nonzero(nonzero))
    keep = dict(sparsifier=sparsifier)
    candidates = [_Candidate("dense", Dense(**keep), numel, stored_cost("dense", numel))]
    for n, m in NM_PATTERNS:
        if weight.shape[1] % m == 0 and int(nonzero.reshape(weight.shape[0], -1, m).sum(-1).max(initial=0)) <= n:
            stored = numel // m * n
            candidates.append(_Candidate(f"{n}:{m}", NM(n, m, **keep), stored, stored_cost("nm", stored)))
            break   # the sparsest pattern that fits
    candidates.append(_Candidate("CSR", CSR(**keep), nnz, stored_cost("csr", nnz)))
    for r, c in BLOCKS:
        rows, cols = weight.shape
        if rows % r or cols % c or rows == r or cols == c:
            continue
        fill = nonzero.reshape(rows // r, r, cols // c, c).sum(axis=(1, 3))
        stored = int(np.count_nonzero(fill)) * r * c
        candidates.append(_Candidate(f"BSR {r}x{c}", BSR(block=(r, c), **keep), stored, stored_cost("bsr", stored)))
        full = fill >= HYBRID_THRESHOLD * r * c
        in_blocks, rest = int(full.sum()) * r * c, nnz - int(fill[full].sum())
        note = (f"{100 * (nnz - rest) / max(1, nnz):.0f}% of the nonzeros in {r}x{c} blocks at least "
                f"{100 * HYBRID_THRESHOLD:.0f}% full" if in_blocks else "")
        candidates[-1] = _Candidate(f"BSR {r}x{c}", BSR(block=(r, c), **keep), stored, stored_cost("bsr", stored),
                                    note)
        if hybrid and in_blocks and rest:
            cost = stored_cost("bsr", in_blocks) + stored_cost("csr", rest) + second_kernel_cost(cols, rows)
            candidates.append(_Candidate(f"Hybrid(BSR {r}x{c}, CSR)",
                                         Hybrid(BSR(block=(r, c)), CSR(), **keep), in_blocks + rest, cost, note))
    best = min(candidates, key=lambda c: c.cost)   # first of equals: the simpler format
    return AutoChoice(best.encoding, _reason(best, candidates, numel, nnz))


def _reason(best: _Candidate, candidates: list[_Candidate], numel: int, nnz: int) -> str:
    zeros = 100.0 * (1 - nnz / max(1, numel))
    others = "; ".join(f"{c.name} would store {c.stored / max(1, best.stored):.1f}x the values "
                       f"(modelled cost {c.cost / max(1e-9, best.cost):.2f}x)" for c in candidates if c is not best)
    return f"{best.name}: {zeros:.0f}% zeros, {_structure(best, candidates)}; {others}"


def _structure(best: _Candidate, candidates: list[_Candidate]) -> str:
    encoding = best.encoding
    blocky = next((c.note for c in candidates if c.note), "")   # the smallest block's
    if isinstance(encoding, CSR) and blocky:
        if STORED_VALUE_COST["bsr"] >= STORED_VALUE_COST["csr"]:
            return (f"{blocky}, but a value stored in BSR costs more than one in CSR "
                    f"({STORED_VALUE_COST['bsr']:g} vs {STORED_VALUE_COST['csr']:g} per value)")
        return (f"{blocky}, but the blocks would store too many zeros (a value stored in BSR costs "
                f"{STORED_VALUE_COST['bsr']:g}, one in CSR {STORED_VALUE_COST['csr']:g})")
    if isinstance(encoding, Dense):
        return "too dense for sparse storage to pay"
    if isinstance(encoding, NM):
        return f"every group of {encoding.m} holds at most {encoding.n} nonzeros"
    cheaper = (f"a value stored in BSR costs {STORED_VALUE_COST['bsr']:g}, one in CSR "
               f"{STORED_VALUE_COST['csr']:g}")
    if isinstance(encoding, BSR):
        return f"nonzeros in blocks ({best.note or 'none full'}; {cheaper})"
    if isinstance(encoding, Hybrid):
        return (f"dense blocks plus scattered entries ({best.note}; {cheaper}, the second kernel "
                f"{second_kernel_cost(1, 0):g} per in/out feature)")
    return "unstructured"


def resolve(model: torch.nn.Module, encodings: Mapping[str, Any],
            hybrid: bool = True) -> tuple[dict[str, Any], dict[str, AutoChoice]]:
    """`encodings` with every Auto() replaced by its choice, and the choices
    by name (`hybrid=False`: never Hybrid, which only regions run)."""
    autos = {name: e for name, e in encodings.items() if isinstance(e, Auto)}
    if not autos:
        return dict(encodings), {}
    named = dict(model.named_parameters())
    choices = {}
    for name, auto in autos.items():
        if name not in named:
            raise SpecError(f"{name}: Auto() picks the format of a weight (a parameter of "
                            f"{type(model).__name__}); give inputs and intermediates a format explicitly")
        weight = named[name].detach()
        if weight.dtype != torch.float32:
            raise SpecError(f"{name}: Auto() measures float32 weights, got {weight.dtype}")
        choices[name] = choose(weight.numpy(), auto, name, hybrid)
    return {name: choices[name].encoding if name in choices else e for name, e in encodings.items()}, choices


def annotate_plan(module: Any, choices: Mapping[str, AutoChoice]) -> None:
    """The plan of a compiled module says what Auto picked and why."""
    from dataclasses import replace
    plan = getattr(module, "_plan", None)
    if not choices or plan is None:
        return
    module._plan = [replace(entry, format=f"auto -> {entry.format}",
                            applied=f"{entry.applied}; sm.Auto() chose {choices[entry.name].reason}")
                    if entry.name in choices else entry for entry in plan]
