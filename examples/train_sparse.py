"""Fine-tune a small transformer classifier with sparse weights.

An HF BertForSequenceClassification built from a small BertConfig (random
weights, no hub download) learns a toy task on random token ids (the label:
whether the first token after [CLS] is in the lower half of the vocabulary).
Every Linear weight of the encoder is compiled sparse and trained through
sparse_mlir's kernels:

- 90% CSR with the mask fixed at compile time (the stored values train);
- 2:4 with runtime pruning (`mask_update=sm.MaskUpdate(every=1)`): a dense
  master weight is pruned to 2:4 again before every training step.

The loss is printed each step (and a progress bar drawn on a terminal).
Checks: the first step's loss equals eager PyTorch's on the same pruned
weights, the fixed mask stayed, the runtime-pruned weights are 2:4, and
the mean loss over the data went down (with 8 steps or more).

    .venv/bin/python examples/train_sparse.py --steps 40
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import time
import warnings

import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_transformers

VOCAB = 200


class Progress:
    """A one-line progress bar on stderr where it is a terminal (else nothing)."""

    def __init__(self, total: int, width: int = 30) -> None:
        self.total, self.width = total, width
        self.enabled = sys.stderr.isatty()
        self.start = time.perf_counter()

    def update(self, done: int, loss: float) -> None:
        if not self.enabled:
            return
        filled = self.width * done // self.total
        rate = done / max(1e-9, time.perf_counter() - self.start)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} "
                         f"loss {loss:.4f} {rate:.1f} steps/s")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _data(batches: int, batch: int, seq: int) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    data = []
    for _ in range(batches):
        ids = torch.randint(1, VOCAB, (batch, seq), generator=generator)
        ids[:, 0] = 0   # [CLS]
        data.append(dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=(ids[:, 1] < VOCAB // 2).long()))
    return data


def _is_two_four(weight: torch.Tensor) -> bool:
    return bool(((weight.reshape(weight.shape[0], -1, 4) != 0).sum(-1) <= 2).all())


def train(label: str, model: torch.nn.Module, encodings: dict[str, sm.Encoding], mask_update: sm.MaskUpdate | None,
          data: list[dict[str, torch.Tensor]], steps: int, lr: float) -> bool:
    first = data[0]
    example = {"attention_mask": first["attention_mask"]}
    start = time.perf_counter()
    fn = sm.compile(model, encodings, (first["input_ids"],), example_kwargs=example, mode="regions",
                    mask_update=mask_update)
    compile_s = time.perf_counter() - start
    # Eager PyTorch on the same pruned weights: the first step's reference.
    eager = copy.deepcopy(model)
    eager.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    eager.train()
    masks = {name: weight != 0 for name, weight in fn.effective_state_dict().items()}
    expected = eager(**first).loss.item()

    before = _mean_loss(fn, data)
    print(f"\n{label}: {len(encodings)} encoded linears, compiled in {compile_s:.1f} s; "
          f"{sum(p.numel() for p in fn.parameters() if p.requires_grad)} trainable parameters")
    fn.train()
    optimizer = torch.optim.AdamW(fn.parameters(), lr=lr)
    progress = Progress(steps)
    losses = []
    start = time.perf_counter()
    for step in range(steps):
        batch = data[step % len(data)]
        loss = fn(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"  step {step + 1:3d}/{steps}  loss {losses[-1]:.4f}")
        progress.update(step + 1, losses[-1])
    elapsed = time.perf_counter() - start
    print(f"  {elapsed / steps * 1e3:.0f} ms per step (forward, backward, AdamW), "
          f"torch threads = {torch.get_num_threads()}")

    ok = True
    if abs(losses[0] - expected) > 1e-4 * abs(expected):
        print(f"  MISMATCH: first loss {losses[0]:.6f}, eager on the same pruned weights {expected:.6f}")
        ok = False
    trained = fn.effective_state_dict()
    if mask_update is None and not all(torch.equal(trained[n] != 0, m) for n, m in masks.items()):
        print("  MISMATCH: a fixed mask changed")
        ok = False
    if mask_update is not None and not all(_is_two_four(w) for w in trained.values()):
        print("  MISMATCH: a runtime-pruned weight is not 2:4")
        ok = False
    fn.eval()
    after = _mean_loss(fn, data)
    print(f"  mean loss over the data: {before:.4f} before training, {after:.4f} after")
    if steps >= 2 * len(data) and not after < before:   # each batch seen twice: it must have learned
        print("  MISMATCH: the loss did not go down")
        ok = False
    return ok


def _mean_loss(fn: torch.nn.Module, data: list[dict[str, torch.Tensor]]) -> float:
    with torch.no_grad():
        return sum(fn(**batch).loss.item() for batch in data) / len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="training steps per variant")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--verbose", action="store_true", help="sparse_mlir's log and fallback warnings")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    if not args.verbose:
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)

    transformers = import_transformers()
    # No dropout: the first step is compared with eager PyTorch's.
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=args.layers,
                                     num_attention_heads=4, intermediate_size=512, max_position_embeddings=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2)
    data = _data(4, args.batch, args.seq)
    variants = {
        "90% CSR, fixed mask": (lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)), None),
        "2:4, runtime pruning (MaskUpdate(every=1))": (lambda: sm.NM(2, 4), sm.MaskUpdate(every=1)),
    }
    print(f"BertForSequenceClassification ({args.layers} layers, hidden 128), batch {args.batch} x {args.seq} "
          f"tokens, AdamW lr {args.lr}")
    ok = True
    for label, (make, mask_update) in variants.items():
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification(config)
        encodings = {n: make() for n, p in model.named_parameters() if ".encoder." in f".{n}" and p.dim() == 2}
        ok &= train(label, model, encodings, mask_update, data, args.steps, args.lr)
    if not ok:
        raise SystemExit("MISMATCH")
    print("OK")


if __name__ == "__main__":
    main()
