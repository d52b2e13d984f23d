"""sm.Auto(): the format of each weight, picked from its nonzero pattern.

For the weight as its sparsifier leaves it, every candidate's stored values
are counted (dense: all; CSR: the nonzeros; BSR: the nonempty blocks' entries;
n:m: n of every m where every group fits; Hybrid(BSR, CSR): the blocks at
least `HYBRID_THRESHOLD` full plus the nonzeros left; ELL + COO: N x the
median row plus the rest of the longer rows) and priced by the cost model's
measured cost per stored value (cost_model.STORED_VALUE_COST; Hybrid also
pays for its second kernel). CSR, and ELL + COO's remainder on the CSR
kernel, are priced by the slots that kernel visits instead: blocks of 4
rows padded to their longest (cost_model.padded_row_slots), what makes
CSR slow on rows of uneven length. The cheapest wins; ties go to the
simpler format (the order of the candidates), and ELL + COO must beat CSR by
cost_model.ELL_COO_MARGIN. Counting is a few vectorised passes over the
weight: cheap at compile time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch

from sparse_mlir.compiler.cost_model import (ELL_COO_MARGIN, PADDED_SLOT_COST, STORED_VALUE_COST,
                                             padded_row_slots, second_kernel_cost, slot_cost, stored_cost)
from sparse_mlir.compiler.weights import apply_sparsifier
from sparse_mlir.encodings import BSR, COO, CSR, ELL, NM, Auto, Dense, Encoding, Hybrid, HYBRID_THRESHOLD
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
    counted: str = ""  # (CSR, ELL + COO) the slots their kernels visit, for the reason


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
    counts = np.count_nonzero(nonzero, axis=1)
    csr_slots = padded_row_slots(counts)
    csr = _Candidate("CSR", CSR(**keep), nnz, slot_cost("csr", csr_slots),
                     counted=f"{csr_slots} slots in 4-row blocks padded to their longest row, "
                             f"{csr_slots / max(1, nnz):.2f}x its nonzeros")
    candidates.append(csr)
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
            # The CSR part: the nonzeros outside full blocks, on the CSR kernel (padded 4-row blocks).
            outside = nonzero & ~np.repeat(np.repeat(full, r, axis=0), c, axis=1)
            rest_slots = padded_row_slots(np.count_nonzero(outside, axis=1))
            cost = stored_cost("bsr", in_blocks) + slot_cost("csr", rest_slots) + second_kernel_cost(cols, rows)
            candidates.append(_Candidate(f"Hybrid(BSR {r}x{c}, CSR)",
                                         Hybrid(BSR(block=(r, c)), CSR(), **keep), in_blocks + rest, cost, note))
    if hybrid:
        ell_coo = _ell_coo(counts, weight.shape[1], keep)
        if ell_coo is not None and ell_coo.cost < ELL_COO_MARGIN * csr.cost:
            candidates.append(ell_coo)
        elif ell_coo is not None:   # (in the reason, not a candidate)
            csr = _Candidate(csr.name, csr.encoding, csr.stored, csr.cost, csr.note,
                             f"{csr.counted}; ELL + COO would model {ell_coo.cost / max(1e-9, csr.cost):.2f}x "
                             f"its cost ({ell_coo.counted}), less than the {1 - ELL_COO_MARGIN:.0%} it must save")
            candidates[candidates.index(next(c for c in candidates if c.name == "CSR"))] = csr
    best = min(candidates, key=lambda c: c.cost)   # first of equals: the simpler format
    return AutoChoice(best.encoding, _reason(best, candidates, numel, nnz))


def _ell_coo(counts: np.ndarray, in_features: int, keep: dict) -> _Candidate | None:
    """Hybrid(ELL(), COO()) priced as it runs: the ELL kernel over N rows of
    the median width k (weights.ell_width), the CSR kernel over the rows
    longer than k (their rest, compacted to those rows, in padded 4-row
    blocks), and a second kernel. None where no row is longer than k (ELL
    alone, not a candidate) or every row is empty."""
    if not counts.size or not counts.max():
        return None
    width = max(1, int(np.sort(counts)[counts.size // 2]))
    rest = np.clip(counts - width, 0, None)
    longer = rest[rest > 0]
    if not longer.size:
        return None
    ell_slots, coo_slots = counts.size * width, padded_row_slots(longer)
    cost = (slot_cost("ell", ell_slots) + slot_cost("csr", coo_slots)
            + second_kernel_cost(in_features, int(longer.size)))
    counted = (f"ELL width {width}: {ell_slots} slots, {int(np.clip(width - counts, 0, None).sum())} of them padding; "
               f"COO: {int(longer.sum())} nonzeros in {longer.size} longer rows, {coo_slots} padded slots")
    return _Candidate(f"ELL({width}) + COO", Hybrid(ELL(), COO(), **keep), ell_slots + int(longer.sum()), cost,
                      counted=counted)


def _reason(best: _Candidate, candidates: list[_Candidate], numel: int, nnz: int) -> str:
    zeros = 100.0 * (1 - nnz / max(1, numel))
    others = "; ".join(f"{c.name} would store {c.stored / max(1, best.stored):.1f}x the values "
                       f"(modelled cost {c.cost / max(1e-9, best.cost):.2f}x"
                       f"{': ' + c.counted if c.counted else ''})" for c in candidates if c is not best)
    counted = f"; counted: {best.counted}, modelled cost {best.cost:.4g}" if best.counted else ""
    return f"{best.name}: {zeros:.0f}% zeros, {_structure(best, candidates)}{counted}; {others}"


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
    if isinstance(encoding, Hybrid) and isinstance(encoding.first, ELL):
        return (f"rows of one dominant width plus a tail of longer rows (a slot costs "
                f"{PADDED_SLOT_COST['ell']:g} in the ELL kernel, {PADDED_SLOT_COST['csr']:g} in the CSR kernel, "
                f"whose 4-row blocks pad to their longest row; the second kernel "
                f"{second_kernel_cost(1, 0):g} per in/out feature)")
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
