"""Worker of test_fuzz_models.py: compiles one fuzzed case and compares it with eager torch.

A case (JSON) names a model shape, which tensor is encoded (a weight, an fx
node's output or the input), its format with index widths, its sparsifier,
and the compile mode. The answer is "ok" with the largest error against
eager PyTorch on `fn.effective_state_dict()` (activation sparsifiers applied
in eager by the compile-time numpy implementation, as test/python/e2e does),
"spec_error" with the message, or "exception" (any other error).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import torch

import fuzz_support
import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier


class Net(torch.nn.Module):
    """Linear -> activation -> Linear, on 2-d or 3-d inputs."""

    def __init__(self, dims: list[int], bias: bool, act: str) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(dims[0], dims[1], bias=bias)
        self.fc2 = torch.nn.Linear(dims[1], dims[2], bias=bias)
        self.act = {"relu": torch.nn.ReLU(), "gelu": torch.nn.GELU(), "tanh": torch.nn.Tanh()}[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def sparsifier(spec: dict[str, Any] | None) -> sm.Sparsifier | None:
    if spec is None:
        return None
    kind = spec["kind"]
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items() if k != "kind"}
    return getattr(sm, kind)(**args)


def encoding(spec: dict[str, Any], sparsify: sm.Sparsifier | None) -> sm.Encoding:
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items() if k != "kind"}
    if sparsify is not None:
        args["sparsifier"] = sparsify
    return getattr(sm, spec["kind"])(**args)


def eager_with_sparsified_nodes(model: torch.nn.Module, x: torch.Tensor, nodes: dict[str, sm.Sparsifier],
                                state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """`model` with `state` loaded and each named fx node's output (or input) sparsified."""
    module = torch.export.export(model, (x,)).module()
    graph = module.graph
    for node in list(graph.nodes):
        if node.name in nodes:
            chosen = nodes[node.name]
            after = node if node.op != "placeholder" else next(n for n in graph.nodes if n.op != "placeholder")
            context = graph.inserting_after(node) if node.op != "placeholder" else graph.inserting_before(after)
            with context:
                sparsified = graph.call_function(
                    lambda t, s=chosen: torch.from_numpy(apply_sparsifier(s, t.detach().numpy(), call=0)), (node,))
            node.replace_all_uses_with(sparsified, delete_user_cb=lambda user, s=sparsified: user is not s)
    graph.lint()
    module.recompile()
    module.load_state_dict(state, strict=False)
    return module


def node_shapes(model: torch.nn.Module, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    graph = torch.export.export(model, (x,)).graph
    return {n.name: tuple(n.meta["val"].shape) for n in graph.nodes if n.op == "call_function"}


def handle(case: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(case["seed"])
    model = Net(case["dims"], case["bias"], case["act"]).eval()
    x = torch.randn(*case["batch"], case["dims"][0])
    try:  # a spec invalid in itself is refused before any tensor is named
        chosen = sparsifier(case["sparsifier"])
        spec = encoding(case["format"], chosen)
    except sm.SpecError as error:
        return {"outcome": "spec_error", "stage": "construct", "name": "", "shape": [], "message": str(error)}
    target = case["target"]
    if target == "weight":
        name = f"fc{case['which'] % 2 + 1}.weight"
        shape = tuple(dict(model.named_parameters())[name].shape)
    elif target == "input":
        name, shape = "x", tuple(x.shape)
    else:
        nodes = node_shapes(model, x)
        name = sorted(nodes)[case["which"] % len(nodes)]
        shape = nodes[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn = sm.compile(model, {name: spec}, example_args=(x,), mode=case["mode"], cost_model=False)
            got = fn(x)
    except sm.CompileError as error:
        return {"outcome": "compile_error", "name": name, "shape": shape, "message": str(error)[:2000]}
    except sm.SpecError as error:
        return {"outcome": "spec_error", "stage": "compile", "name": name, "shape": shape, "message": str(error)[:2000]}
    state = {**model.state_dict(), **fn.effective_state_dict()}
    if target == "weight":
        reference = Net(case["dims"], case["bias"], case["act"]).eval()
        reference.load_state_dict(state)
    else:
        reference = eager_with_sparsified_nodes(model, x, {name: spec.effective_sparsifier}, state)
    with torch.no_grad():
        expected = reference(x)
    error = (got - expected).abs()
    bound = case["atol"] + case["rtol"] * expected.abs()
    return {"outcome": "ok", "name": name, "shape": shape, "shape_ok": got.shape == expected.shape,
            "max_abs_error": float(error.max()) if error.numel() else 0.0,
            "within": bool((error <= bound).all()), "finite": bool(torch.isfinite(got).all()),
            "expected_finite": bool(torch.isfinite(expected).all())}


if __name__ == "__main__":
    torch.set_num_threads(1)
    sm.set_num_threads(1)
    fuzz_support.serve(handle)
    sys.exit(0)
