"""The served model and its preparation: a small BERT-style sequence
classifier (HF `BertForSequenceClassification` built from a config, random
weights, no hub) with its encoder's linear weights pruned 90% into CSR or
2:4, and what the three engines load:

- `pruned.pt`: the pruned weights (the eager engine runs them on torch, the
  compiled engine compiles them again with the same encodings);
- `artifacts/BxS.smlir`: one exported artifact per request bucket (artifacts
  are static-shape; a request is padded up to the smallest bucket holding it);
- `meta.json`: the config, the format and the buckets.

Imported by the Serve replicas, the load test and the smoke test.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from sparse_mlir.testing import import_transformers

FORMATS = ("csr90", "nm24")


@dataclass(frozen=True)
class ModelConfig:
    """BertConfig's size knobs (the rest are BERT's defaults)."""
    hidden_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 6
    intermediate_size: int = 1536
    num_labels: int = 3
    vocab_size: int = 30522
    seed: int = 0


@dataclass(frozen=True)
class Prepared:
    """What `prepare()` wrote into `workdir`."""
    workdir: Path
    config: ModelConfig
    format: str
    buckets: list[tuple[int, int]] = field(default_factory=list)

    @staticmethod
    def read(workdir: str | Path) -> "Prepared":
        meta = json.loads((Path(workdir) / "meta.json").read_text())
        return Prepared(Path(workdir), ModelConfig(**meta["config"]), meta["format"],
                        [tuple(b) for b in meta["buckets"]])

    def artifact(self, bucket: tuple[int, int]) -> Path:
        return self.workdir / "artifacts" / f"{bucket[0]}x{bucket[1]}.smlir"


class Classifier(torch.nn.Module):
    """Positional (input_ids, attention_mask) -> logits: what an artifact
    takes (export() wants positional tensors) and what a client needs."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        transformers = import_transformers()
        torch.manual_seed(config.seed)
        bert = transformers.BertConfig(**{k: v for k, v in asdict(config).items() if k != "seed"})
        self.bert = transformers.BertForSequenceClassification(bert).eval()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).logits


def encodings(model: torch.nn.Module, fmt: str) -> dict[str, Any]:
    """The encoder's linear weights (attention q/k/v/output, FFN in/out)."""
    import sparse_mlir as sm
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {FORMATS}")
    make = (lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9))) if fmt == "csr90" else (lambda: sm.NM(2, 4))
    return {n: make() for n, p in model.named_parameters() if ".layer." in n and p.dim() == 2}


def example_inputs(batch: int, seq: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (no pad id 0) and a mask whose last rows end early, so
    padding inside a request is exercised too."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 30000, (batch, seq), generator=generator)
    mask = torch.ones_like(ids)
    for row in range(1, batch, 2):
        mask[row, seq - seq // (row + 2):] = 0
    return ids, mask


def pruned_model(prepared: Prepared) -> Classifier:
    """The classifier with the pruned weights: what the eager engine runs."""
    model = Classifier(prepared.config)
    model.load_state_dict(torch.load(prepared.workdir / "pruned.pt"), strict=False)
    return model.eval()


def compile_regions(prepared: Prepared) -> torch.nn.Module:
    """The compiled engine: torch runs the graph, our kernels the sparse
    linears (mode="regions", any batch / sequence length)."""
    import sparse_mlir as sm
    model = pruned_model(prepared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings(model, prepared.format),
                          example_args=example_inputs(*prepared.buckets[0]))


def prepare(workdir: str | Path, config: ModelConfig, fmt: str, buckets: list[tuple[int, int]]) -> Prepared:
    """Exports one artifact per bucket (whole-graph compiles); the first
    prunes the model, whose effective weights are saved and compiled again
    for the other buckets (the same sparsifier keeps the same nonzeros: the
    smoke test checks every engine against eager on pruned.pt)."""
    import sparse_mlir as sm
    workdir = Path(workdir)
    (workdir / "artifacts").mkdir(parents=True, exist_ok=True)
    prepared = Prepared(workdir, config, fmt, sorted(buckets, key=lambda b: b[0] * b[1]))
    start = time.perf_counter()
    model: torch.nn.Module = Classifier(config)
    for i, bucket in enumerate(prepared.buckets):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            whole = sm.compile(model, encodings(model, fmt), example_args=example_inputs(*bucket), mode="graph")
        whole.export(prepared.artifact(bucket))
        if i == 0:
            torch.save(whole.effective_state_dict(), workdir / "pruned.pt")
            model = pruned_model(prepared)
    (workdir / "meta.json").write_text(json.dumps(
        {"config": asdict(config), "format": fmt, "buckets": prepared.buckets,
         "prepare_s": round(time.perf_counter() - start, 1)}, indent=1))
    return prepared
