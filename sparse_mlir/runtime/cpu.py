"""The host CPU, as compiled code sees it: its ISA extensions and vector width.

MLIR's ExecutionEngine compiles for the host CPU, so what it may emit is
what /proc/cpuinfo lists; the micro-kernels are emitted for the widest f32
vectors the host has (`vector_lanes`). No MLIR needed: deployed artifacts
check their ISA against the loading host with this too.
"""

from __future__ import annotations

import platform
from functools import cache
from pathlib import Path

# ISA extensions (as /proc/cpuinfo names them) that LLVM may use when it
# compiles for the host: an artifact needs every one its compiling host had.
# AMD's sse4a is not among them: LLVM emits its instructions only for
# intrinsics and nontemporal scalar stores, which no sparse_mlir pipeline
# produces, and requiring it refused AMD-built artifacts on Intel hosts.
ISA_FLAGS = frozenset("""
    sse sse2 sse3 pni ssse3 sse4_1 sse4_2 popcnt avx avx2 fma fma4 f16c bmi1 bmi2 abm lzcnt movbe
    adx aes pclmulqdq sha_ni xsave avx_vnni avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma
    avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg avx512_vpopcntdq avx512_bf16 avx512_fp16
    amx_tile amx_bf16 amx_int8
    fp asimd asimdhp asimddp asimdfhm sve sve2 bf16 i8mm sme
""".split())


def _cpuinfo_field(names: tuple[str, ...]) -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in names:
            return value.strip()
    return None


def host_isa_flags() -> list[str]:
    """The ISA extensions of this machine's CPU that compiled code may use."""
    flags = _cpuinfo_field(("flags", "Features"))
    return sorted(set(flags.split()) & ISA_FLAGS) if flags else []


def cpu_model() -> str:
    return _cpuinfo_field(("model name",)) or platform.processor() or "unknown"


@cache
def vector_lanes() -> int:
    """f32 lanes of the micro-kernels' vectors on this host: 16 with AVX-512F
    (32 registers of 16 lanes: wider n:m and dense tiles, measured ~20%
    faster on a Zen 4), else 8 (AVX2; elsewhere LLVM splits them)."""
    return 16 if "avx512f" in host_isa_flags() else 8
