"""A bounded load test of the Serve deployments on localhost.

Starts one local Ray instance and Serve's HTTP proxy, then, for each engine in
turn (same replicas, threads and Serve settings): deploys it, reads its
replicas' RSS, runs `--clients` concurrent HTTP clients (aiohttp, shipped
with ray[serve]) for `--duration` seconds over the request shapes, reads the
RSS again, and deletes the deployment. Reports throughput, p50/p99 latency,
errors and RSS growth per engine; writes JSON and a markdown table.

    python examples/serve/load_test.py --workdir /tmp/serve     # 32 clients, 60 s, artifact / compiled / eager
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classifier import FORMATS, ModelConfig, Prepared, example_inputs, prepare  # noqa: E402
from serve_app import ENGINES, build_app, rss_mb, start_ray, stop_ray  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def payloads(shapes: list[tuple[int, int]], variants: int = 4) -> dict[tuple[int, int], list[bytes]]:
    """A few different JSON bodies per shape, serialised once (the client
    shares the machine's cores with the server)."""
    out = {}
    for shape in shapes:
        out[shape] = []
        for seed in range(variants):
            ids, mask = example_inputs(*shape, seed=seed)
            out[shape].append(json.dumps({"input_ids": ids.tolist(), "attention_mask": mask.tolist()}).encode())
    return out


async def client(session: aiohttp.ClientSession, url: str, bodies: list[tuple[tuple[int, int], bytes]],
                 start: int, deadline: float, results: list[tuple[tuple[int, int], float, str | None]]) -> None:
    """Sends requests back to back until `deadline`, cycling through the bodies."""
    for shape, body in itertools.islice(itertools.cycle(bodies), start, None):
        if time.perf_counter() >= deadline:
            return
        sent = time.perf_counter()
        error = None
        try:
            async with session.post(url, data=body, headers={"content-type": "application/json"}) as response:
                answer = await response.read()
                if response.status != 200:
                    error = f"HTTP {response.status}: {answer[:200]!r}"
                elif len(json.loads(answer)["logits"]) != shape[0]:
                    error = "wrong number of logits rows"
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        results.append((shape, time.perf_counter() - sent, error))


async def sample_rss(pids: list[int], every: float, deadline: float, samples: list[float]) -> None:
    """The replicas' summed RSS every `every` seconds while the load runs."""
    while time.perf_counter() < deadline:
        samples.append(round(sum(rss_mb(pid) for pid in pids), 1))
        await asyncio.sleep(min(every, max(0.0, deadline - time.perf_counter())))


async def load(url: str, shapes: list[tuple[int, int]], clients: int, duration: float,
               pids: list[int]) -> dict[str, Any]:
    by_shape = payloads(shapes)
    bodies = [(shape, body) for variant in range(4) for shape in shapes for body in [by_shape[shape][variant]]]
    results: list[tuple[tuple[int, int], float, str | None]] = []
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients), timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + duration
        samples: list[float] = []
        await asyncio.gather(sample_rss(pids, max(1.0, duration / 12), deadline, samples),
                             *(client(session, url, bodies, i, deadline, results) for i in range(clients)))
        elapsed = time.perf_counter() - start
    return {**summarise(results, elapsed), "rss_samples_mb": samples}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarise(results: list[tuple[tuple[int, int], float, str | None]], elapsed: float) -> dict[str, Any]:
    ok = [latency for _, latency, error in results if error is None]
    errors = [error for _, _, error in results if error is not None]
    per_shape = {}
    for shape in sorted({s for s, _, _ in results}):
        lat = [latency for s, latency, error in results if s == shape and error is None]
        per_shape[f"{shape[0]}x{shape[1]}"] = {"requests": len(lat), "p50_ms": 1e3 * percentile(lat, 0.5) if lat else None,
                                               "p99_ms": 1e3 * percentile(lat, 0.99) if lat else None}
    return {"seconds": round(elapsed, 2), "requests": len(results), "errors": len(errors),
            "first_errors": errors[:3], "throughput_rps": len(ok) / elapsed,
            "sequences_per_s": sum(s[0] for s, _, e in results if e is None) / elapsed,
            "p50_ms": 1e3 * statistics.median(ok) if ok else None, "p99_ms": 1e3 * percentile(ok, 0.99) if ok else None,
            "per_shape": per_shape}


def replica_rss(pid_dir: Path, engine: str) -> dict[int, float]:
    return {int(p.name.split("-")[1]): rss_mb(int(p.name.split("-")[1])) for p in pid_dir.glob(f"{engine}-*")}


def run_engine(engine: str, args: argparse.Namespace, shapes: list[tuple[int, int]], pid_dir: Path) -> dict[str, Any]:
    from ray import serve
    started = time.perf_counter()
    serve.run(build_app(engine, str(args.workdir), replicas=args.replicas, threads=args.threads,
                        max_ongoing=args.max_ongoing, pid_dir=str(pid_dir)),
              name=engine, route_prefix=f"/{engine}")
    ready_s = time.perf_counter() - started
    rss_start = replica_rss(pid_dir, engine)
    result = asyncio.run(load(f"http://127.0.0.1:{args.port}/{engine}", shapes, args.clients, args.duration,
                              list(rss_start)))
    rss_end = {pid: rss_mb(pid) for pid in rss_start}
    serve.delete(engine)
    result.update(engine=engine, deploy_s=round(ready_s, 1), replicas=len(rss_start),
                  load_average_1min_end=round(os.getloadavg()[0], 2),
                  rss_start_mb=round(sum(rss_start.values()), 1), rss_end_mb=round(sum(rss_end.values()), 1),
                  rss_growth_mb=round(sum(rss_end.values()) - sum(rss_start.values()), 1))
    return result


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [f"Serving: {s['clients']} clients, {s['duration_s']} s per engine, shapes {', '.join(s['shapes'])} "
             f"(cycled), {s['replicas']} replicas x {s['threads']} thread(s), max_ongoing_requests "
             f"{s['max_ongoing']}, {report['model']}, {report['machine']['cpus']} CPUs, "
             f"{report['date']}.", "",
             "| engine | req/s | seq/s | p50 ms | p99 ms | errors | replica RSS start -> end (MB) | growth MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["engines"]:
        lines.append(f"| {r['engine']} | {r['throughput_rps']:.1f} | {r['sequences_per_s']:.1f} | {r['p50_ms']:.1f} | "
                     f"{r['p99_ms']:.1f} | {r['errors']} | {r['rss_start_mb']:.0f} -> {r['rss_end_mb']:.0f} | "
                     f"{r['rss_growth_mb']:+.1f} |")
    lines += ["", "Per shape, p50 / p99 ms:", "", "| engine | " + " | ".join(s["shapes"]) + " |",
              "|---|" + "---|" * len(s["shapes"])]
    for r in report["engines"]:
        cells = [f"{v['p50_ms']:.1f} / {v['p99_ms']:.1f}" if v["p50_ms"] is not None else "-"
                 for v in (r["per_shape"].get(name, {"p50_ms": None}) for name in s["shapes"])]
        lines.append(f"| {r['engine']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="prepared model (made here if missing; default: a temp dir)")
    parser.add_argument("--format", choices=FORMATS, default="csr90")
    parser.add_argument("--shapes", default="1x32,4x64,8x128", help="request shapes BxS (also the artifact buckets)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per engine")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-ongoing", type=int, default=8)
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "serving",
                        help="writes OUT.json and OUT.md")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sparse_mlir_serve_"))
    if not (args.workdir / "meta.json").exists():
        start = time.perf_counter()
        prepare(args.workdir, ModelConfig(), args.format, shapes)
        print(f"prepared {args.workdir} in {time.perf_counter() - start:.0f} s", flush=True)
    prepared = Prepared.read(args.workdir)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "load_average_1min_start": round(os.getloadavg()[0], 2),
                    "python": sys.version.split()[0]},
        "model": (f"BERT classifier {prepared.config.num_hidden_layers} layers, hidden {prepared.config.hidden_size}, "
                  f"{'90% CSR' if prepared.format == 'csr90' else '2:4'} encoder linears"),
        "settings": {"clients": args.clients, "duration_s": args.duration, "shapes": [f"{b}x{s}" for b, s in shapes],
                     "replicas": args.replicas, "threads": args.threads, "max_ongoing": args.max_ongoing,
                     "format": prepared.format, "config": prepared.config.__dict__},
        "engines": []}
    pid_dir = Path(tempfile.mkdtemp(prefix="sparse_mlir_serve_pids_"))
    start_ray(args.replicas * args.threads, args.port)
    try:
        for engine in args.engines.split(","):
            result = run_engine(engine, args, shapes, pid_dir)
            print(f"{engine}: {result['throughput_rps']:.1f} req/s, p50 {result['p50_ms']:.1f} ms, "
                  f"p99 {result['p99_ms']:.1f} ms, {result['errors']} errors, RSS {result['rss_start_mb']:.0f} -> "
                  f"{result['rss_end_mb']:.0f} MB", flush=True)
            report["engines"].append(result)
    finally:
        stop_ray()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(table(report))
    print(table(report))
    if any(r["errors"] for r in report["engines"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
