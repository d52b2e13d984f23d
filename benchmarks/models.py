"""Whole models on the CPU: sparse_mlir (mode="regions") against eager torch
and torch.compile (inductor) of the same pruned model, in one process.

Models are built from their libraries' configs with random weights (no hub
downloads): HF BERT-base, ViT-base, DistilBERT, T5-small's encoder, LLaMA
(512 hidden, 2 layers), GPT-2 (12 layers); torchvision's ResNet-50 and
MobileNetV3-Small, timm's ConvNeXt-T (n:m conv weights group along
(kh, kw, C); one whose kh * kw * C is no multiple of m stays dense). Every
Linear / Conv1D / Conv2d weight (LM
heads included; GPT-2's is tied to its embedding, which then reads the pruned
weight on torch) is pruned and encoded: 70% and
90% CSR (magnitude), 2:4, 2:4 with one pattern per 4 rows. For each model,
format and thread count (1, 2: torch's, which our kernels share):

- eager      the pruned model in torch (weights with the zeros), as written
             (channels-first for the CNNs)
- inductor   torch.compile(pruned model), default mode
- ours       sm.compile(model, encodings) with the cost model, compiled at the
             thread count it runs with (the cost model's choices depend on it)

Medians of --repeats calls after warm-up calls, eager and ours alternating;
each compiled output is checked against eager on the same weights first.
Each model runs in a process of its own.
Causal LMs also run decode (one token). Inductor is measured once per
(model, threads, phase), on the first format's weights (dense compute: its
time does not depend on the values).
Writes results/models.{json,md,png}.

    .venv/bin/python benchmarks/models.py                 # everything (~1 h on 2 cores)
    .venv/bin/python benchmarks/models.py --models bert --formats 90% --threads 1
    .venv/bin/python benchmarks/models.py --models BERT-base --formats 90% 2:4 --dtype bfloat16 --no-inductor
                     # the model in bf16 (its linears on the half kernels),
                     # eager in bf16; writes results/models_bfloat16.*
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

import sparse_mlir as sm
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags
from sparse_mlir.testing import import_torchvision, import_transformers, median_ms, paired_medians_ms

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("benchmarks.models")

FORMATS: dict[str, Callable[[], sm.Encoding]] = {
    "70%": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.7)),
    "90%": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)),
    "2:4": lambda: sm.NM(2, 4),
    "2:4 (4 rows)": lambda: sm.NM(2, 4, rows=4),
}


def _models() -> dict[str, tuple[Callable[[], torch.nn.Module], bool]]:
    """name -> (build, causal LM)."""
    tf = import_transformers()
    return {
        "BERT-base": (lambda: tf.BertModel(tf.BertConfig()), False),
        "ViT-base": (lambda: tf.ViTModel(tf.ViTConfig()), False),
        "DistilBERT": (lambda: tf.DistilBertModel(tf.DistilBertConfig()), False),
        "T5-small encoder": (lambda: tf.T5EncoderModel(tf.T5Config.from_dict(dict(
            d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128))), False),
        "LLaMA (512, 2 layers)": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
            hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=8, vocab_size=32000)), True),
        "GPT-2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config()), True),
        "ResNet-50": (lambda: import_torchvision().models.resnet50(weights=None), False),
        "MobileNetV3-S": (lambda: import_torchvision().models.mobilenet_v3_small(weights=None), False),
        "ConvNeXt-T": (lambda: _timm().create_model("convnext_tiny", pretrained=False), False),
    }


def _timm() -> Any:
    import_torchvision()   # timm imports torchvision
    import timm
    return timm


CONV_MODELS = ("ResNet", "MobileNet", "ConvNeXt")


def _linear_weights(model: torch.nn.Module) -> list[str]:
    """Canonical names of every Linear / Conv1D weight (a tied LM head under its embedding's name)."""
    canonical = {id(p): n for n, p in model.named_parameters()}
    return list(dict.fromkeys(canonical[id(m.weight)] for m in model.modules()
                              if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) or type(m).__name__ == "Conv1D"))


def _inputs(name: str, model: torch.nn.Module, phase: str) -> tuple[tuple, dict]:
    generator = torch.Generator().manual_seed(0)
    if name.startswith(("ViT", *CONV_MODELS)):   # images in the model's dtype
        return (torch.randn(4, 3, 224, 224, generator=generator).to(next(model.parameters()).dtype),), {}
    tokens = (4, 128) if phase == "prefill" else (4, 1)
    ids = torch.randint(0, 1000, tokens, generator=generator)
    if name.startswith(("LLaMA", "GPT")):
        return (ids,), {"use_cache": False}
    return (ids,), {"attention_mask": torch.ones(tokens, dtype=torch.long)}


def _first_tensor(output: Any) -> torch.Tensor:
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    return values[0] if isinstance(values, (tuple, list)) else values


def run(models: list[str], formats: list[str], threads: list[int], repeats: int, dtype: str = "float32",
        inductor: bool = True) -> list[dict]:
    rows: list[dict] = []
    # The check against eager (same dtype): bf16 / fp16 round each layer's
    # output, and ours accumulates in another order than oneDNN's.
    tolerance = 1e-2 if dtype == "float32" else 0.1
    for name in models:
        build, causal = _models()[name]
        torch.manual_seed(0)
        model = build().eval().to(getattr(torch, dtype))
        phases = ["prefill", "decode"] if causal else ["prefill"]
        weights = _linear_weights(model)
        baseline: dict[tuple[int, str], tuple[float, float]] = {}
        for fmt in formats:
            encodings = {n: FORMATS[fmt]() for n in weights}
            # n:m conv weights group (kh, kw, C): a weight whose kh * kw * C
            # is no multiple of m (ResNet's 7 x 7 x 3 stem) stays dense.
            # (One pattern per 4 rows where 4 does not divide the rows, GPT-2's
            # 50257-row tied embedding / LM head: the last group holds 1 row.)
            named = dict(model.named_parameters())
            encodings = {n: e for n, e in encodings.items()
                         if not isinstance(e, sm.NM) or named[n].dim() != 4 or named[n][0].numel() % e.m == 0}
            for t in threads:
                # Compiled at the thread count it runs with, as a user would:
                # the cost model's choices (and hand-backs) depend on it.
                torch.set_num_threads(t)
                sm.set_num_threads(None)   # our kernels follow torch's count
                args, kwargs = _inputs(name, model, "prefill")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    start = time.perf_counter()
                    try:
                        fn = sm.compile(model, encodings, example_args=args, example_kwargs=kwargs)
                    except sm.SparseMLIRError as error:
                        log.warning("%s %s: %s", name, fmt, error)
                        rows.append(dict(model=name, format=fmt, error=str(error)[:300]))
                        break
                    compile_s = time.perf_counter() - start
                pruned = copy.deepcopy(model).eval()
                pruned.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
                for phase in phases:
                    args, kwargs = _inputs(name, model, phase)
                    with torch.no_grad():
                        got, want = _first_tensor(fn(*args, **kwargs)), _first_tensor(pruned(*args, **kwargs))
                    error = float((got - want).abs().max())
                    if error > tolerance * max(1.0, float(want.abs().max())):
                        raise AssertionError(f"{name} {fmt} {phase}: max error {error}")
                    with torch.no_grad():   # eager and ours alternate: drift hits both alike
                        eager, ours = paired_medians_ms(lambda: pruned(*args, **kwargs),
                                                        lambda: fn(*args, **kwargs), repeats)
                    # Inductor after the pair: right after its compile (worker
                    # processes, freed memory) the next timings ran up to 1.5x
                    # slower (MobileNetV3-S, 1 thread: eager 15.7 vs 10.9 ms).
                    if inductor and (t, phase) not in baseline:
                        with torch.no_grad():
                            inductor_fn = torch.compile(pruned)
                            inductor_fn(*args, **kwargs)
                            baseline[(t, phase)] = median_ms(lambda: inductor_fn(*args, **kwargs), repeats, warmup=2)
                    inductor_ms = baseline.get((t, phase))
                    eager_cl = None
                    if name.startswith(CONV_MODELS):   # ours runs CNNs channels-last: eager that way too
                        channels_last = copy.deepcopy(pruned).to(memory_format=torch.channels_last)
                        with torch.no_grad():
                            eager_cl = median_ms(lambda: channels_last(*args, **kwargs), repeats)
                        del channels_last
                    on_kernels = sum(c.kernel is not None for r in fn.regions() for c in r.choices.values())
                    decided = sum(len(r.choices) for r in fn.regions())
                    row = dict(model=name, format=fmt, dtype=dtype, threads=t, phase=phase, eager_ms=eager,
                               inductor_ms=inductor_ms, ours_ms=ours, vs_eager=eager / ours,
                               vs_inductor=inductor_ms / ours if inductor_ms else None,
                               eager_channels_last_ms=eager_cl,
                               vs_eager_channels_last=eager_cl / ours if eager_cl else None,
                               compile_s=compile_s, max_error=error, regions=len(fn.regions()),
                               region_calls_on_our_kernels=f"{on_kernels}/{decided}")
                    rows.append(row)
                    log.warning("%s %s %s %d thr %s: eager %.1f ms, inductor %s ms, ours %.1f ms -> %.2fx eager "
                                "(compile %.1f s, %s on our kernels)", name, fmt, dtype, t, phase, eager,
                                f"{inductor_ms:.1f}" if inductor_ms else "-", ours, eager / ours, compile_s,
                                row["region_calls_on_our_kernels"])
                del fn
    return rows


def _write(rows: list[dict], threads: list[int], results: Path = RESULTS, stem: str = "models") -> None:
    results.mkdir(parents=True, exist_ok=True)
    machine = dict(cpu=cpu_model(), isa=" ".join(host_isa_flags()), python=platform.python_version(),
                   torch=torch.__version__, load_average=os.getloadavg())
    (results / f"{stem}.json").write_text(json.dumps(dict(machine=machine, rows=rows), indent=1) + "\n")
    dtypes = sorted({r.get("dtype", "float32") for r in rows})
    lines = [f"# Whole models, sparse_mlir mode='regions', {'/'.join(dtypes)} ({machine['cpu']}; {machine['isa']}; "
             f"load average at the end {machine['load_average']})", "",
             "speedup = time of eager (or inductor) on the same pruned weights / ours; medians.", "",
             "CNNs: ours runs them channels-last; `vs eager (channels-last)` is against eager torch run that way.", "",
             "| model | phase | format | threads | eager ms | inductor ms | ours ms | vs eager | vs inductor | "
             "vs eager (channels-last) | compile s | on our kernels |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | {r['format']} | | | | | | | | | error: {r['error']} |")
            continue
        fmt = r["format"] + (" *" if r.get("plain_nm") else "")
        lines.append(f"| {r['model']} | {r['phase']} | {fmt} | {r['threads']} | {r['eager_ms']:.1f} | "
                     f"{_number(r['inductor_ms'])} | {r['ours_ms']:.1f} | {r['vs_eager']:.2f}x | "
                     f"{_ratio(r['vs_inductor'])} | {_ratio(r.get('vs_eager_channels_last'))} | {r['compile_s']:.1f} | "
                     f"{r['region_calls_on_our_kernels']} |")
    plain = sorted({f"{r['model']}: {', '.join(r['plain_nm'])}" for r in rows if r.get("plain_nm")})
    if plain:
        lines += ["", "\\* plain 2:4 where 4 does not divide the weight's rows: " + "; ".join(plain)]
    (results / f"{stem}.md").write_text("\n".join(lines) + "\n")
    if stem == "models":
        _plot(rows, threads, results)


def _number(value: float | None) -> str:
    return f"{value:.1f}" if value else ""



def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value else ""


def _plot(rows: list[dict], threads: list[int], results: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    prefill = [r for r in rows if r.get("phase") == "prefill"]
    models = list(dict.fromkeys(r["model"] for r in prefill))
    formats = list(dict.fromkeys(r["format"] for r in prefill))
    figure, axes = plt.subplots(1, len(threads), figsize=(7 * len(threads), 4.5), squeeze=False)
    for axis, t in zip(axes[0], threads):
        width = 0.8 / max(1, len(formats))
        for i, fmt in enumerate(formats):
            values = [next((r["vs_eager"] for r in prefill if r["model"] == m and r["format"] == fmt
                            and r["threads"] == t), 0.0) for m in models]
            axis.bar([x + i * width for x in range(len(models))], values, width, label=fmt)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks([x + width * (len(formats) - 1) / 2 for x in range(len(models))])
        axis.set_xticklabels(models, rotation=20, ha="right", fontsize=8)
        axis.set_ylabel("speedup over eager (prefill)")
        axis.set_title(f"{t} thread{'s' if t > 1 else ''}")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(results / "models.png", dpi=120)


def _run_isolated(name: str, options: argparse.Namespace) -> list[dict]:
    """One model's rows, measured in a fresh process: a long run's earlier
    models (their inductor graphs, freed heaps) slowed later ones by up to 30%."""
    with tempfile.TemporaryDirectory() as scratch:
        rows_file = Path(scratch) / "rows.json"
        command = [sys.executable, __file__, "--model-in-this-process", name, "--rows-out", str(rows_file),
                   "--formats", *options.formats, "--threads", *map(str, options.threads),
                   "--repeats", str(options.repeats), "--dtype", options.dtype]
        if not options.inductor:
            command.append("--no-inductor")
        subprocess.run(command, check=True)
        return json.loads(rows_file.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", help="model names (substring match)")
    parser.add_argument("--formats", nargs="*", default=list(FORMATS))
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder (default benchmarks/results)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of the other models in --out's models.json (a rerun of some models)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="the models' dtype (eager in it too); results/models_<dtype>.* unless float32")
    parser.add_argument("--no-inductor", dest="inductor", action="store_false", help="skip torch.compile's row")
    parser.add_argument("--model-in-this-process", help=argparse.SUPPRESS)   # a child of _run_isolated
    parser.add_argument("--rows-out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if options.model_in_this_process:
        rows = run([options.model_in_this_process], options.formats, options.threads, options.repeats,
                   options.dtype, options.inductor)
        options.rows_out.write_text(json.dumps(rows))
        return
    names = [n for n in _models() if not options.models or any(s.lower() in n.lower() for s in options.models)]
    rows: list[dict] = []
    stem = "models" if options.dtype == "float32" else f"models_{options.dtype}"
    if options.merge and (options.out / f"{stem}.json").exists():
        previous = json.loads((options.out / f"{stem}.json").read_text())["rows"]
        rows = [row for row in previous if row["model"] not in names]
    for name in names:
        rows += _run_isolated(name, options)
        _write(rows, options.threads, options.out, stem)   # partial results survive an interrupted run


if __name__ == "__main__":
    main()
