"""Helpers for tests and benchmarks that build real models."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable


def import_torchvision() -> Any:
    """torchvision, imported beside torch's CPU build.

    PyPI's torchvision wheel is built against CUDA torch: importing it
    registers fake kernels for its C ops (`torchvision::nms`, ...), which do
    not exist here, and fails. Its models are plain Python and need none of
    them, so the registrations are skipped (timm imports torchvision too:
    call this first)."""
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision
    return torchvision


def import_transformers() -> Any:
    """transformers (which imports torchvision where it is installed: see
    `import_torchvision`), its logging quiet."""
    try:
        import_torchvision()
    except ImportError:   # not installed: transformers does without it
        pass
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


def write_results(out: str | Path, rows: list[dict], load_average_start: tuple[float, ...],
                  markdown: Callable[[dict], str], **extra: Any) -> dict:
    """A benchmark run as `<out>.json` and `<out>.md` (`markdown(result)`):
    its rows with the machine, its CPUs, the load average at the start and
    at the end (now), torch's version and `extra`. Returns the result."""
    import torch   # (this module is imported where torch may not be yet)
    result = dict(machine=platform.processor() or platform.machine(), cpus=os.cpu_count(),
                  load_average_start=load_average_start, load_average_end=os.getloadavg(), torch=torch.__version__,
                  **extra, rows=rows)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".md").write_text(markdown(result))
    return result


def median_ms(call: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median wall time of `call()` in milliseconds over `repeats` runs,
    after `warmup` untimed ones (CPU: no device synchronisation)."""
    return statistics.median(_times_s(call, repeats, warmup)) * 1e3


def best_ms(call: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """The fastest of `repeats` timed runs of `call()` in milliseconds: on a
    loaded shared machine the median mostly measures who else ran."""
    return min(_times_s(call, repeats, warmup)) * 1e3


def _times_s(call: Callable[[], Any], repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def paired_medians_ms(first: Callable[[], Any], second: Callable[[], Any], repeats: int,
                      warmup: int = 2) -> tuple[float, float]:
    """Median ms of `first()` and of `second()`, timed alternately (drift
    and the other side's spinning threads hit both alike), after `warmup`
    untimed pairs."""
    for _ in range(warmup):
        first()
        second()
    a, b = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        first()
        middle = time.perf_counter()
        second()
        a.append(middle - start)
        b.append(time.perf_counter() - middle)
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


def at_thread_counts(call: Callable[[], Any], counts: tuple[int, ...] = (1, 2)) -> list[Any]:
    """`call()`'s result with our kernels on each of `counts` threads (the
    count set before is restored)."""
    import sparse_mlir as sm
    before = sm.get_num_threads()
    try:
        results = []
        for count in counts:
            sm.set_num_threads(count)
            results.append(call())
        return results
    finally:
        sm.set_num_threads(before)


def held_tensors(root: Any) -> dict[int, tuple[tuple[int, ...], int]]:
    """The tensors and numpy arrays reachable from `root` (a compiled
    module: its model, regions, packed buffers, dense copies), by the
    address of their memory: (shape, bytes), the largest view of each
    address. Modules, classes and functions are not followed (they reach
    the whole interpreter)."""
    import gc
    import numpy as np
    import torch
    seen, found = {id(root)}, {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            if obj.layout == torch.strided and obj.device.type != "meta":
                size = obj.untyped_storage().nbytes()
                key = obj.untyped_storage().data_ptr()
                if size and found.get(key, ((), 0))[1] < size:
                    found[key] = (tuple(obj.shape), size)
        elif isinstance(obj, np.ndarray):
            base = obj if obj.base is None or not isinstance(obj.base, np.ndarray) else obj.base
            if base.nbytes and found.get(base.ctypes.data, ((), 0))[1] < base.nbytes:
                found[base.ctypes.data] = (tuple(base.shape), base.nbytes)
        for child in gc.get_referents(obj):
            if id(child) in seen or isinstance(child, (types.ModuleType, type, types.FunctionType,
                                                        types.BuiltinFunctionType)):
                continue
            seen.add(id(child))
            stack.append(child)
    return found
