"""Serve the sparse classifier through Ray Serve: one deployment, three engines.

- `artifact`: `sparse_mlir.load()` of the exported artifacts (one per request
  bucket; no compiler in the replica's code path);
- `compiled`: `sparse_mlir.compile()` of the model (mode="regions": torch runs
  the graph, our kernels the sparse linears; any shape);
- `eager`: the same pruned weights on torch.

Replicas, concurrency and threads are Ray Serve's own settings
(`num_replicas`, `max_ongoing_requests`, `ray_actor_options.num_cpus`);
nothing here schedules or batches by hand.

    python examples/serve/serve_app.py --workdir /tmp/serve --engine artifact   # prepare, serve, Ctrl-C
    curl -s localhost:8000/artifact -d '{"input_ids": [[101, 2023, 102]], "attention_mask": [[1, 1, 1]]}'
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classifier import (FORMATS, ModelConfig, Prepared, compile_regions, example_inputs, prepare,  # noqa: E402
                        pruned_model)

ENGINES = ("artifact", "compiled", "eager")
MAX_SEQ = 512   # BERT's position embeddings
SERVE_DIR = str(Path(__file__).resolve().parent)


def rss_mb(pid: int) -> float:
    """Resident set size of a process (Linux /proc), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class ArtifactEngine:
    """One loaded artifact per bucket; a request runs on the smallest bucket
    holding it, padded (pad id 0, mask 0: attention ignores the padding)."""

    def __init__(self, prepared: Prepared) -> None:
        import sparse_mlir as sm
        self.buckets = {bucket: sm.load(prepared.artifact(bucket)) for bucket in prepared.buckets}

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, seq = ids.shape
        fits = [b for b in self.buckets if b[0] >= batch and b[1] >= seq]
        if not fits:
            raise ValueError(f"input_ids of shape {tuple(ids.shape)}: larger than every bucket {list(self.buckets)}")
        bucket = min(fits, key=lambda b: b[0] * b[1])
        if bucket != (batch, seq):
            padded_ids = torch.zeros(bucket, dtype=torch.int64)
            padded_mask = torch.zeros(bucket, dtype=torch.int64)
            padded_mask[:, 0] = 1    # padding rows attend to one token: no all-masked row
            padded_ids[:batch, :seq], padded_mask[:batch, :seq] = ids, mask
            ids, mask = padded_ids, padded_mask
        return self.buckets[bucket](ids, mask)[:batch]


@serve.deployment
class SparseClassifier:
    """HTTP POST {"input_ids": [[...]], "attention_mask": [[...]]} ->
    {"logits": [[...]]}. The model runs on the replica's event loop: one
    request at a time per replica, each on `threads` threads."""

    async def __init__(self, engine: str, workdir: str, threads: int, pid_dir: str | None = None,
                       warmup: int = 3) -> None:
        # async: Serve runs it on the event loop that serves the requests, so
        # the warm-up below allocates in the serving thread's malloc arena
        # (a new thread's first calls grew a plain process's RSS ~200 MB).
        torch.set_num_threads(threads)
        prepared = Prepared.read(workdir)
        if engine == "artifact":
            self.model: Any = ArtifactEngine(prepared)
        elif engine == "compiled":
            self.model = compile_regions(prepared)
        elif engine == "eager":
            self.model = pruned_model(prepared)
        else:
            raise ValueError(f"engine {engine!r}: expected one of {ENGINES}")
        self.engine, self.vocab_size = engine, prepared.config.vocab_size
        # Warm: the compiled engine builds and times its kernels per token
        # count on the first call at each shape, and malloc settles its mmap
        # threshold over the first few calls (once, RSS then stays flat).
        with torch.inference_mode():
            for _ in range(warmup):
                for bucket in prepared.buckets:
                    self.model(*example_inputs(*bucket))
        if pid_dir:   # the load test reads the replicas' RSS from /proc
            Path(pid_dir, f"{engine}-{os.getpid()}").touch()

    def infer(self, input_ids: list[list[int]], attention_mask: list[list[int]]) -> list[list[float]]:
        ids = torch.tensor(input_ids, dtype=torch.int64)
        mask = torch.tensor(attention_mask, dtype=torch.int64)
        if ids.dim() != 2 or ids.shape != mask.shape or not 1 <= ids.shape[1] <= MAX_SEQ or ids.shape[0] < 1:
            raise ValueError(f"input_ids {tuple(ids.shape)} and attention_mask {tuple(mask.shape)}: "
                             f"expected two [batch, seq] lists of the same shape, seq 1-{MAX_SEQ}")
        # Checked before any engine runs: an artifact given an id >= vocab
        # aborts the whole process ("index must be smaller than dim size").
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"input_ids: token ids must lie in [0, {self.vocab_size}), "
                             f"got {int(ids.min())}..{int(ids.max())}")
        with torch.inference_mode():
            return self.model(ids, mask).tolist()

    async def __call__(self, request: Request) -> dict[str, Any] | JSONResponse:
        try:
            body = await request.json()
            start = time.perf_counter()
            logits = self.infer(body["input_ids"], body["attention_mask"])
            return {"logits": logits, "engine": self.engine, "compute_ms": 1e3 * (time.perf_counter() - start)}
        except (ValueError, KeyError, TypeError) as error:   # the client's mistake: 400 saying what
            return JSONResponse({"error": f"{type(error).__name__}: {error}"}, status_code=400)


def build_app(engine: str, workdir: str, *, replicas: int = 1, threads: int = 1, max_ongoing: int = 8,
              pid_dir: str | None = None, warmup: int = 3) -> Any:
    """The Serve application for one engine; scaling is Serve's settings."""
    return SparseClassifier.options(
        name=f"classifier_{engine}", num_replicas=replicas, max_ongoing_requests=max_ongoing,
        # Ray gives an actor OMP_NUM_THREADS = its num_cpus: the replica's threads.
        ray_actor_options={"num_cpus": threads},
    ).bind(engine, workdir, threads, pid_dir, warmup)


def start_ray(cpus: int, port: int) -> None:
    """A local Ray instance and Serve's HTTP proxy on 127.0.0.1:`port`.
    Replicas run in a copy of this directory (Ray's working_dir), so they
    import its modules, and sparse_mlir from the installed package even where
    the driver runs from the source tree."""
    import ray
    ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False,
             runtime_env={"working_dir": SERVE_DIR})
    serve.start(http_options={"host": "127.0.0.1", "port": port})


def stop_ray() -> None:
    import ray
    serve.shutdown()
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", required=True, help="prepared model (made here if missing)")
    parser.add_argument("--engine", choices=ENGINES, default="artifact")
    parser.add_argument("--format", choices=FORMATS, default="csr90")
    parser.add_argument("--buckets", default="1x32,4x64,8x128", help="artifact shapes, BxS, comma-separated")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch / kernel threads per replica")
    parser.add_argument("--max-ongoing", type=int, default=8)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    if not (Path(args.workdir) / "meta.json").exists():
        buckets = [tuple(int(v) for v in b.split("x")) for b in args.buckets.split(",")]
        prepare(args.workdir, ModelConfig(), args.format, buckets)
    # SIGTERM (a service manager, `kill`) stops Ray and Serve as Ctrl-C does,
    # instead of leaving Ray's processes behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    start_ray(args.replicas * args.threads, args.port)
    try:
        serve.run(build_app(args.engine, args.workdir, replicas=args.replicas, threads=args.threads,
                            max_ongoing=args.max_ongoing), name=args.engine, route_prefix=f"/{args.engine}")
        print(f"serving {args.engine} on http://127.0.0.1:{args.port}/{args.engine} (Ctrl-C stops)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stop_ray()


if __name__ == "__main__":
    main()
