"""GPT-2 with its tied embedding / LM head stored once at 90% CSR
(compiler/regions/tied.py), against eager torch: GPT-2 base size (124M
config: 12 layers, 768 wide, vocabulary 50257; random weights), prefill
(1 x 128 tokens) and one token (1 x 1, no KV cache: the per-token cost of
the layers and the 50257 x 768 head), 1 and 2 threads, and memory.

Timing: the compiled model (cost model on, mode="regions") and the eager
dense model alternate per round; medians over rounds. Memory, each in a
fresh process: `held_MB` the bytes of tensors the compiled module holds
(sparse_mlir.testing.held_tensors; the user's model's own parameters not
counted), `dense_copies` tensors of [V, D]'s size among them, `rss_MB` the
process RSS after compiling (user model alive) and `rss_alone_MB` after the
user model is deleted; for "eager" the model alone. "before" is the same
compile with tied.ENABLED off (the dense copy the region keeps for torch's
path, and the pruned dense weight the embedding reads on torch).
Writes benchmarks/results/tied_weights.{json,md}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions import tied
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import held_tensors, import_transformers, write_results

SIZES = {"base": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
         "small": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)}


def _model(size: str) -> torch.nn.Module:
    transformers = import_transformers()
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**SIZES[size])).eval()


def _compile(model: torch.nn.Module, tokens: int, cost_model: bool = True) -> torch.nn.Module:
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)   # ("before": the embedding on torch)
        return sm.compile(model, {"transformer.wte.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))},
                          example_args=(ids,), example_kwargs={"use_cache": False}, cost_model=cost_model)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def memory(size: str, variant: str, cost_model: bool) -> dict:
    """One variant's memory figures (run in a fresh process)."""
    model = _model(size)
    gc.collect()
    row: dict = dict(size=size, variant=variant, cost_model=cost_model, rss_model_MB=_rss_mb())
    shape = (model.config.vocab_size, model.config.n_embd)
    if variant == "eager":
        held = {p.untyped_storage().data_ptr(): (tuple(p.shape), p.untyped_storage().nbytes())
                for p in model.parameters()}
        row.update(held_MB=sum(s for _, s in held.values()) / 2 ** 20, dense_copies=1, rss_MB=_rss_mb(),
                   rss_alone_MB=_rss_mb(), peak_rss_MB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return row
    tied.ENABLED = variant == "after"
    fn = _compile(model, 128, cost_model)
    row["head"] = "torch (handed back)" if fn.regions()[0].handed_back else "ours"
    own = {p.untyped_storage().data_ptr() for p in model.parameters()}
    gc.collect()
    held = {k: v for k, v in held_tensors(fn).items() if k not in own}
    row["held_MB"] = sum(s for _, s in held.values()) / 2 ** 20
    row["dense_copies"] = sum(1 for _, s in held.values() if s >= shape[0] * shape[1] * 4)
    region = fn.regions()[0]
    row["stored_MB"] = sum(t.numel() * t.element_size() for t in region.buffers) / 2 ** 20
    row["rss_MB"] = _rss_mb()
    del model
    gc.collect()
    row["rss_alone_MB"] = _rss_mb()
    row["peak_rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def timing(size: str, threads_list: list[int], repeats: int) -> list[dict]:
    model = _model(size)
    vocab = model.config.vocab_size
    fn = _compile(model, 128)
    twin = _model(size)
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    rows = []
    for threads in threads_list:
        torch.set_num_threads(threads)
        set_num_threads(threads)
        for phase, tokens in (("prefill", 128), ("decode", 1)):
            ids = torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(tokens))
            with torch.no_grad():
                err = float((fn(ids, use_cache=False).logits - twin(ids, use_cache=False).logits).abs().max())
                times: dict[str, list[float]] = {"eager": [], "ours": []}
                for round_ in range(repeats + 1):
                    for label, run in (("eager", model), ("ours", fn)):
                        start = time.perf_counter()
                        run(ids, use_cache=False)
                        if round_:
                            times[label].append((time.perf_counter() - start) * 1e3)
                # The embedding alone: our row gather from the stored values vs torch's lookup of the dense weight.
                gather = {"gather": [], "eager_gather": []}
                wte, dense = fn.model.transformer.wte, twin.transformer.wte
                for round_ in range(3 * repeats + 1):
                    for label, run in (("gather", wte), ("eager_gather", dense)):
                        start = time.perf_counter()
                        run(ids)
                        if round_:
                            gather[label].append((time.perf_counter() - start) * 1e3)
            region = fn.regions()[0]
            head = [c for key, c in region.choices.items() if key[0][:-1] == (1, tokens) and key[2] == threads]
            row = dict(size=size, phase=phase, tokens=tokens, threads=threads,
                       eager_ms=statistics.median(times["eager"]), ours_ms=statistics.median(times["ours"]),
                       head=("ours" if head and head[0].kernel is not None else "torch") if head else "?",
                       max_abs_err=err, gather_ms=statistics.median(gather["gather"]),
                       eager_gather_ms=statistics.median(gather["eager_gather"]), load_average=os.getloadavg()[0])
            row["speedup"] = row["eager_ms"] / row["ours_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="base", choices=list(SIZES))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--no-cost-model", action="store_true", help="memory: our kernel for every shape")
    parser.add_argument("--one", help=argparse.SUPPRESS)   # (internal: one memory variant, in this process)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "tied_weights"))
    args = parser.parse_args()
    if args.one:
        print(json.dumps(memory(args.size, args.one, not args.no_cost_model)))
        return
    load = os.getloadavg()
    rows = []
    for variant in ("eager", "before", "after"):
        done = subprocess.run([sys.executable, __file__, "--size", args.size, "--one", variant,
                               *(["--no-cost-model"] if args.no_cost_model else [])], check=True,
                              capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if not args.memory_only:
        rows += timing(args.size, [int(t) for t in args.threads.split(",")], args.repeats)
    write_results(args.out, rows, load, markdown, repeats=args.repeats)


def markdown(result: dict) -> str:
    lines = ["# GPT-2, tied embedding / LM head stored once at 90% CSR (`benchmarks/tied_weights.py`)", "",
             f"{result['cpus']} CPUs, torch {result['torch']}, load average {result['load_average_start'][0]:.2f} "
             f"(start) / {result['load_average_end'][0]:.2f} (end).", "",
             "| size | variant | cost model | head | held MB | [V, D] copies | stored values+indices MB | "
             "RSS MB (model alive) | RSS MB (compiled alone) | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "variant" in r:
            lines.append(f"| {r['size']} | {r['variant']} | {'on' if r['cost_model'] else 'off'} | "
                         f"{r.get('head', '-')} | {r['held_MB']:.1f} | {r['dense_copies']} | "
                         f"{r.get('stored_MB', float('nan')):.1f} | {r['rss_MB']:.0f} | {r['rss_alone_MB']:.0f} | "
                         f"{r['peak_rss_MB']:.0f} |")
    lines += ["", f"Medians of {result['repeats']} alternating rounds (ms per call):", "",
              "| size | phase | tokens | threads | eager ms | ours ms | speedup | head | embedding: our gather ms / "
              "torch's lookup ms | max abs err | load |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "phase" in r:
            lines.append(f"| {r['size']} | {r['phase']} | {r['tokens']} | {r['threads']} | {r['eager_ms']:.2f} | "
                         f"{r['ours_ms']:.2f} | {r['speedup']:.2f}x | {r['head']} | {r['gather_ms']:.3f} / "
                         f"{r['eager_gather_ms']:.3f} | {r['max_abs_err']:.1e} | "
                         f"{r['load_average']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
