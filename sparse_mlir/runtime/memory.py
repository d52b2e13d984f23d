"""The allocation cache compiled code allocates its buffers from.

A model's large temporaries (64 KiB and more) are kept when freed and reused
by the next call instead of being mapped, zero-filled and unmapped by the
kernel every time (lib/Runtime/AllocationCache.c). The cache holds at most
`SPARSE_MLIR_ALLOC_CACHE_MB` MiB (default 1024; 0 turns it off).
"""

from __future__ import annotations

from sparse_mlir.runtime.memref import allocator

__all__ = ["cached_bytes", "release_cached_memory"]


def cached_bytes() -> int:
    """Bytes of freed buffers the cache holds for the next calls."""
    return int(allocator().smlir_alloc_cache_bytes())


def release_cached_memory() -> int:
    """Returns every cached buffer to the system allocator; the bytes released."""
    return int(allocator().smlir_alloc_cache_release())
