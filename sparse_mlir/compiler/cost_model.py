"""Dense or sparse storage for a weight: the break-even points measured here.

Measured with `benchmarks/linear_suite.py` (AMD EPYC Zen 3, AVX2, 1 thread,
M = 1024, K = 768, N = 3072): smlir-lower-sparse-linear's dense micro-kernel
runs at torch's (MKL's) speed, its CSR kernel takes about 110-126 ms x
density against 52 ms dense: CSR breaks even at a density of ~0.5 there and
~0.45 at K = 3072 (1024 x 3072 x 768), so 0.41 keeps a margin; its n:m
kernel wins at 2:4 (density 0.5) and below. Formats left to upstream
sparsification (CSC, COO, BSR) won only from ~80% sparsity. Re-measured on
a Zen 4 (AVX-512, 16-lane kernels): CSR ~80 ms x density + 1.5 ms against
48-50 ms dense (45 ms for our dense kernel), breaking even near 0.53; the
0.41 kept here is right for both hosts, with a margin on the newer one.

With fewer than `DECODE_TOKENS` rows of activations the decode kernel runs
(dot products along k, M = 1, 768 -> 3072, 1 thread): sparse rows read 8
entries at a time and gather x (vector.gather), ~1.0 ms x density for CSR
and ~1.3 ms x density for n:m against 0.21 ms for vectorized dense rows, so
sparse storage wins below a density of ~0.2 (CSR) and ~0.16 (n:m) there.
On AVX-512 hosts an n:m weight with m = 2n (2:4, 4:8) takes the permuted
decode kernel instead (x picked in registers, no gather; up to 8 tokens):
768 -> 3072 at 2:4, 1 token, 1 thread (Zen 4, fastest of 60 runs): 0.094 ms
against torch's 0.119 ms with the weight in cache, 0.34 against 0.58 ms
from memory, so it breaks even near a density of 0.6.
Below `MIN_ELEMENTS` weight elements the difference is below timing noise
and the user's format is kept (small test models keep exercising it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparse_mlir.encodings import BSR, CSR, NM, Dense, Encoding

MIN_ELEMENTS = 65536
# bsr: the BSR micro-kernel costs less per stored value than CSR's
# (STORED_VALUE_COST below); CSR's break-even is kept (blocks part-full
# store zeros, which the density here does not count). Decode (1 token,
# 768 -> 3072, 1 thread, thread CPU time): 0.041 ms for 236k values in full
# 4 x 4 blocks against 0.139 ms dense (CSR 0.091 ms): break-even ~0.34 with
# full blocks, 0.3 kept.
BREAK_EVEN_DENSITY = {"csr": 0.41, "nm": 0.5, "bsr": 0.41, "other": 0.2}
DECODE_TOKENS = 4
DECODE_BREAK_EVEN_DENSITY = {"csr": 0.2, "nm": 0.16, "bsr": 0.3}
PERMUTED_DECODE_BREAK_EVEN_DENSITY = 0.6


def permuted_decode(encoding: Encoding) -> bool:
    """Whether this host's n:m decode kernel for `encoding` permutes x in
    registers (smlir-lower-sparse-linear's AVX-512 path, m = 2n)."""
    from sparse_mlir.runtime.cpu import host_isa_flags, vector_lanes
    return (isinstance(encoding, NM) and encoding.m == 2 * encoding.n and 16 % encoding.n == 0
            and vector_lanes() == 16 and "avx512f" in host_isa_flags())


@dataclass(frozen=True)
class StorageChoice:
    dense: bool
    reason: str   # empty when the user's format is kept


def choose_storage(encoding: Encoding, density: float, numel: int, tokens: int | None = None) -> StorageChoice:
    """Keep `encoding`, or store the (already sparsified) weight densely.
    `tokens`: the fewest activation rows an F.linear multiplies it with, if
    known. Only F.linear reads (x @ W^T) run on the CSR and BSR micro-kernels: a
    CSR or BSR weight read otherwise (HF's Conv1D x @ W) gets upstream's loops, whose
    break-even is the other formats'."""
    if isinstance(encoding, Dense) or numel < MIN_ELEMENTS:
        return StorageChoice(False, "")
    key = ("csr" if isinstance(encoding, CSR) else "nm" if isinstance(encoding, NM)
           else "bsr" if isinstance(encoding, BSR) else "other")
    if key in ("csr", "bsr") and tokens is None:
        key = "other"
    limit = BREAK_EVEN_DENSITY[key]
    where = ""
    if tokens is not None and tokens < DECODE_TOKENS and key != "other":
        limit, where = DECODE_BREAK_EVEN_DENSITY[key], f" for {tokens} token{'s' if tokens > 1 else ''} (decode)"
        if permuted_decode(encoding):
            limit = PERMUTED_DECODE_BREAK_EVEN_DENSITY
    if density <= limit:
        return StorageChoice(False, "")
    return StorageChoice(True, f"cost model: density {density:.2f} is above the {encoding.format_name} "
                               f"break-even {limit:.2f}{where}, dense is faster")


# sm.Auto(): what one stored value costs a linear at prefill token counts
# (>= DECODE_TOKENS), relative to one weight element of torch's dense
# F.linear. csr and nm follow the break-even points above (0.41 with a
# margin -> ~2.2; n:m wins at 2:4 -> < 2). bsr: the BSR micro-kernel
# (lib/Codegen/BSRWeight.cpp: a register tile inside a block row, no
# per-value index load) costs 0.34-0.43x CSR per stored value
# (benchmarks/formats.py's weights, 768 -> 3072, 128 tokens, 1 thread,
# thread CPU time: BSR 4x4 0.48 ms and CSR 1.44 ms for the same 236k values
# in full blocks; 8x8 0.44 ms vs 1.01 ms): 2.2 x 0.43 -> 0.95, rounded up
# to dense's 1.0 so that a weight whose every block is stored stays dense
# (ties go to the simpler format). A block then pays in BSR from a fill of
# ~1.0 / 2.2 = 0.45 on (encodings.HYBRID_THRESHOLD).
STORED_VALUE_COST = {"dense": 1.0, "csr": 2.2, "nm": 1.8, "bsr": 1.0}
# Hybrid runs a second kernel: x is packed again and y written twice (plus
# one add), independent of the values stored: ~0.16 ms at 128 x (768 +
# 3072) (Hybrid with 5% of the nonzeros in CSR against its BSR part alone
# and the CSR part's values at CSR's cost, thread CPU time at load ~9: a
# rough figure), ~14 dense weight elements per (in + out) feature.
SECOND_KERNEL_COST_PER_FEATURE = 14.0


def stored_cost(kind: str, stored_values: int) -> float:
    """The modelled cost of a linear reading `stored_values` values stored as `kind`."""
    return STORED_VALUE_COST[kind] * stored_values


def second_kernel_cost(in_features: int, out_features: int) -> float:
    """The modelled fixed cost of a second kernel over the same x and y (Hybrid)."""
    return SECOND_KERNEL_COST_PER_FEATURE * (in_features + out_features)


# sm.Auto() prices CSR (and the CSR kernel running ELL + COO's remainder) by
# the slots its kernel visits, not by its nonzeros: at prefill token counts
# the register-tiled kernel interleaves each block of CSR_TILE_ROWS rows
# padded to the block's longest row (smlir-lower-sparse-linear's `rows`
# tile, 4 on AVX2 and AVX-512; lib/Codegen/Interleave.cpp), so a block
# holding one long row costs 4x that row. Measured on
# benchmarks/results/formats_ell.json's weights (90% sparse, 1 thread, best
# of 30, load 0.03): the CSR kernel's time per padded slot and token is
# 0.024-0.029 ns at 3072 x 768 whether the rows are uniform, power-law (1.77x
# as many padded slots as nonzeros) or of one dominant width (1.47x), where
# its time per nonzero varies 0.026-0.044 ns; 768 x 3072: 0.026-0.040 per
# slot, 0.032-0.062 per nonzero. STORED_VALUE_COST's csr (2.2) was set on
# uniform random weights, whose 4-row blocks pad ~1.05x: 2.1 per slot.
# The ELL kernel (no positions, fixed trip count) took 0.93-1.0x CSR's time
# per slot on the same weights (uniform rows: 0.0241 vs 0.0259, 0.0263 vs
# 0.0270, 0.0304 vs 0.0322, 0.0357 vs 0.0358 ns): 2.0.
CSR_TILE_ROWS = 4
PADDED_SLOT_COST = {"csr": 2.1, "ell": 2.0}
# ELL + COO replaces CSR only when modelled this much cheaper: its gain is
# the slots its split saves, and where that is under ~10% the measured
# difference was within noise (power-law rows, formats_ell: 0.92-1.02x CSR's
# time), so the simpler format is kept.
ELL_COO_MARGIN = 0.9


def padded_row_slots(counts: np.ndarray, rows: int = CSR_TILE_ROWS) -> int:
    """Slots the CSR kernel visits for rows of `counts` nonzeros: each block
    of `rows` consecutive rows padded to its longest."""
    counts = np.asarray(counts, dtype=np.int64)
    if not counts.size:
        return 0
    blocks = np.concatenate([counts, np.zeros(-counts.size % rows, dtype=np.int64)]).reshape(-1, rows)
    return int(blocks.max(axis=1).sum()) * rows


def slot_cost(kind: str, slots: int) -> float:
    """The modelled cost of a kernel visiting `slots` padded slots (kind: csr, ell)."""
    return PADDED_SLOT_COST[kind] * slots
