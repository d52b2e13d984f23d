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
import shutil
import signal
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
# One request: its shape, latency (s), the replica's compute time (ms), error or None.
Result = tuple[tuple[int, int], float, float, str | None]


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
                 start: int, deadline: float, results: list[Result]) -> None:
    """Sends requests back to back until `deadline`, cycling through the bodies."""
    for shape, body in itertools.islice(itertools.cycle(bodies), start, None):
        if time.perf_counter() >= deadline:
            return
        sent = time.perf_counter()
        error, compute_ms = None, float("nan")
        try:
            async with session.post(url, data=body, headers={"content-type": "application/json"}) as response:
                answer = await response.read()
                if response.status != 200:
                    error = f"HTTP {response.status}: {answer[:200]!r}"
                else:
                    reply = json.loads(answer)
                    compute_ms = reply["compute_ms"]
                    if len(reply["logits"]) != shape[0]:
                        error = "wrong number of logits rows"
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        results.append((shape, time.perf_counter() - sent, compute_ms, error))


async def sample_rss(pids: list[int], every: float, deadline: float, samples: list[float]) -> None:
    """The replicas' summed RSS every `every` seconds while the load runs."""
    while time.perf_counter() < deadline:
        samples.append(round(sum(rss_mb(pid) for pid in pids), 1))
        await asyncio.sleep(min(every, max(0.0, deadline - time.perf_counter())))


async def load(url: str, shapes: list[tuple[int, int]], clients: int, duration: float,
               pids: list[int]) -> tuple[list[Result], float, list[float]]:
    """(per request: shape, latency, error or None), the seconds it took, RSS samples."""
    by_shape = payloads(shapes)
    bodies = [(shape, body) for variant in range(4) for shape in shapes for body in [by_shape[shape][variant]]]
    results: list[Result] = []
    samples: list[float] = []
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients), timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + duration
        await asyncio.gather(sample_rss(pids, 5.0, deadline, samples),
                             *(client(session, url, bodies, i, deadline, results) for i in range(clients)))
        elapsed = time.perf_counter() - start
    return results, elapsed, samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarise(results: list[Result], elapsed: float) -> dict[str, Any]:
    ok = [r for r in results if r[3] is None]
    per_shape = {}
    for shape in sorted({r[0] for r in results}):
        mine = [r for r in ok if r[0] == shape]
        per_shape[f"{shape[0]}x{shape[1]}"] = {
            "requests": len(mine),
            "p50_ms": 1e3 * percentile([r[1] for r in mine], 0.5) if mine else None,
            "p99_ms": 1e3 * percentile([r[1] for r in mine], 0.99) if mine else None,
            "compute_p50_ms": percentile([r[2] for r in mine], 0.5) if mine else None}
    latencies = [r[1] for r in ok]
    errors = [r[3] for r in results if r[3] is not None]
    return {"seconds": round(elapsed, 2), "requests": len(results), "errors": len(errors),
            "first_errors": errors[:3], "throughput_rps": len(ok) / elapsed,
            "sequences_per_s": sum(r[0][0] for r in ok) / elapsed,
            "p50_ms": 1e3 * statistics.median(latencies) if ok else None,
            "p99_ms": 1e3 * percentile(latencies, 0.99) if ok else None, "per_shape": per_shape}


def replica_rss(pid_dir: Path, engine: str) -> dict[int, float]:
    return {int(p.name.split("-")[1]): rss_mb(int(p.name.split("-")[1])) for p in pid_dir.glob(f"{engine}-*")}


def run_engines(args: argparse.Namespace, engines: list[str], shapes: list[tuple[int, int]],
                pid_dir: Path) -> list[dict[str, Any]]:
    """Deploys every engine side by side (same Serve settings), then loads
    them in turn, `--rounds` times each: background load on a shared machine
    then falls on every engine alike. An idle engine's replicas use no CPU."""
    from ray import serve
    started = time.perf_counter()
    serve.run_many([serve.RunTarget(build_app(engine, str(args.workdir), replicas=args.replicas,
                                              threads=args.threads, max_ongoing=args.max_ongoing,
                                              pid_dir=str(pid_dir)), name=engine, route_prefix=f"/{engine}")
                    for engine in engines])
    ready_s = time.perf_counter() - started
    rss_start = {engine: replica_rss(pid_dir, engine) for engine in engines}
    runs: dict[str, list[Any]] = {engine: [[], 0.0, []] for engine in engines}
    for round_ in range(args.rounds):
        for engine in engines:
            results, elapsed, samples = asyncio.run(load(f"http://127.0.0.1:{args.port}/{engine}", shapes,
                                                         args.clients, args.duration / args.rounds,
                                                         list(rss_start[engine])))
            runs[engine][0] += results
            runs[engine][1] += elapsed
            runs[engine][2] += samples
            print(f"round {round_ + 1}/{args.rounds} {engine}: {len(results) / elapsed:.1f} req/s "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    out = []
    for engine in engines:
        results, elapsed, samples = runs[engine]
        start_mb = sum(rss_start[engine].values())
        end_mb = sum(rss_mb(pid) for pid in rss_start[engine])
        out.append({"engine": engine, **summarise(results, elapsed), "deploy_s": round(ready_s, 1),
                    "replicas": len(rss_start[engine]), "rss_start_mb": round(start_mb, 1),
                    "rss_end_mb": round(end_mb, 1), "rss_growth_mb": round(end_mb - start_mb, 1),
                    "rss_samples_mb": samples})
    for engine in engines:
        serve.delete(engine)
    return out


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [f"Serving: {s['clients']} clients, {s['duration_s']} s per engine ({s['rounds']} turns each), "
             f"shapes {', '.join(s['shapes'])} (cycled), {s['replicas']} replicas x {s['threads']} thread(s), "
             f"max_ongoing_requests {s['max_ongoing']}, {report['model']}, {report['machine']['cpus']} CPUs, "
             f"{report['date']}, load average {report['machine']['load_average_1min_start']} -> "
             f"{report['machine']['load_average_1min_end']}.", "",
             "| engine | req/s | seq/s | p50 ms | p99 ms | errors | replica RSS start -> end (MB) | growth MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["engines"]:
        lines.append(f"| {r['engine']} | {r['throughput_rps']:.1f} | {r['sequences_per_s']:.1f} | {r['p50_ms']:.1f} | "
                     f"{r['p99_ms']:.1f} | {r['errors']} | {r['rss_start_mb']:.0f} -> {r['rss_end_mb']:.0f} | "
                     f"{r['rss_growth_mb']:+.1f} |")
    lines += ["", "Per shape: latency p50 / p99 ms (queueing included), and the replica's own compute time p50 ms:",
              "", "| engine | " + " | ".join(s["shapes"]) + " |", "|---|" + "---|" * len(s["shapes"])]
    for r in report["engines"]:
        cells = [f"{v['p50_ms']:.0f} / {v['p99_ms']:.0f}, compute {v['compute_p50_ms']:.1f}"
                 if v["p50_ms"] is not None else "-"
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
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per engine, all rounds together")
    parser.add_argument("--rounds", type=int, default=3, help="engines take turns, this many times each")
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
        "settings": {"clients": args.clients, "duration_s": args.duration, "rounds": args.rounds,
                     "shapes": [f"{b}x{s}" for b, s in shapes],
                     "replicas": args.replicas, "threads": args.threads, "max_ongoing": args.max_ongoing,
                     "format": prepared.format, "config": prepared.config.__dict__},
        "engines": []}
    pid_dir = Path(tempfile.mkdtemp(prefix="sparse_mlir_serve_pids_"))
    engines = args.engines.split(",")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # stop Ray (finally below), as on Ctrl-C
    start_ray(len(engines) * args.replicas * args.threads, args.port)
    try:
        report["engines"] = run_engines(args, engines, shapes, pid_dir)
    finally:
        stop_ray()
        shutil.rmtree(pid_dir, ignore_errors=True)
    report["machine"]["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(table(report))
    print(table(report))
    if any(r["errors"] for r in report["engines"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
