"""A whole HF BERT-base (built from its config, random weights) with sparse
weights: torch runs the graph, sparse_mlir's kernels the sparse linears.

Every Linear weight of the encoder is magnitude-pruned 90% into CSR, then
2:4, then 2:4 with one pattern per 4 rows. Each compiled model is called as
the model is (input ids + attention_mask, a BaseModelOutput back) at the
example's shape and at another batch / sequence length, checked against
eager PyTorch on the same pruned weights, and timed against it.
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings


import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_transformers, median_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    transformers = import_transformers()
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(num_hidden_layers=args.layers)).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 30000, (args.batch, args.seq), generator=generator)
    mask = torch.ones_like(ids)
    other = {"input_ids": ids[:1, : args.seq // 2 + 3], "attention_mask": mask[:1, : args.seq // 2 + 3]}
    linears = [n for n, p in model.named_parameters() if ".layer." in n and p.dim() == 2]
    print(f"BERT-base ({args.layers} layers), ids {tuple(ids.shape)}, {len(linears)} encoded linears, "
          f"torch threads = {torch.get_num_threads()}")

    variants = {
        "90% CSR": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)),
        "2:4": lambda: sm.NM(2, 4),
        "2:4, 4-row patterns": lambda: sm.NM(2, 4, rows=4),
    }
    ok = True
    for label, make in variants.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sm.SparseFallbackWarning)
            fn = sm.compile(model, {name: make() for name in linears}, example_args=(ids,),
                            example_kwargs={"attention_mask": mask}, mode="regions")
        compile_s = time.perf_counter() - start
        pruned = copy.deepcopy(model)
        pruned.load_state_dict(fn.effective_state_dict(), strict=False)   # eager on the same pruned weights
        errors = []
        with torch.no_grad():
            for call in ({"input_ids": ids, "attention_mask": mask}, other):
                got, want = fn(**call), pruned(**call)
                assert type(got) is type(want)
                errors.append(float((got.last_hidden_state - want.last_hidden_state).abs().max()))
            eager_ms = median_ms(lambda: pruned(ids, attention_mask=mask), args.repeats)
            ours_ms = median_ms(lambda: fn(ids, attention_mask=mask), args.repeats)
        on_kernels = sum(c.kernel is not None for r in fn.regions() for c in r.choices.values())
        decided = sum(len(r.choices) for r in fn.regions())
        print(f"{label}: compile {compile_s:.1f} s, eager {eager_ms:.1f} ms, ours {ours_ms:.1f} ms "
              f"({eager_ms / ours_ms:.2f}x), {on_kernels}/{decided} region calls on our kernels, "
              f"max |error| vs eager = {max(errors):.2e} (two shapes)")
        ok &= max(errors) < 1e-3
    print("OK" if ok else "MISMATCH")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
