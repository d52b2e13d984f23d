"""The eager reference for sparsifiers on intermediate tensors (tests only).

An fx graph transform of the torch.export program: after each named node,
apply the same sparsifier in torch. Weights come from the compiled module's
effective_state_dict(), so eager sees the same pruned weights too.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

import torch

import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier


def _torch_sparsifier(sparsifier: sm.Sparsifier, call: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The same numpy implementation that sparsifies weights at compile time."""
    return lambda x: torch.from_numpy(apply_sparsifier(sparsifier, x.detach().numpy(), call=call))


def eager_reference(model: torch.nn.Module, example_args: tuple[torch.Tensor, ...],
                    intermediates: Mapping[str, sm.Sparsifier],
                    state: Mapping[str, torch.Tensor], call: int = 0) -> torch.nn.Module:
    """`model` with `state` loaded and each named node's output sparsified
    (random fractions with the masks of call number `call`)."""
    module = torch.export.export(model, example_args).module()
    graph = module.graph
    found = set()
    for node in list(graph.nodes):
        if node.name not in intermediates:
            continue
        found.add(node.name)
        with graph.inserting_after(node):
            sparsified = graph.call_function(_torch_sparsifier(intermediates[node.name], call), (node,))
        node.replace_all_uses_with(sparsified, delete_user_cb=lambda user: user is not sparsified)
    missing = set(intermediates) - found
    assert not missing, f"nodes not in the exported graph: {missing}"
    graph.lint()
    module.recompile()
    module.load_state_dict(dict(state), strict=False)
    return module


def compile_and_check(model: torch.nn.Module, x: torch.Tensor,
                      encodings: Mapping[str, sm.Encoding], **options: Any) -> sm.CompiledModule:
    """Compiles `model` with `encodings` (and compile()'s keyword `options`;
    the whole-graph mode unless they say otherwise) and checks its first call
    (call number 0) against the eager reference with the same sparsifiers at
    the same points."""
    options.setdefault("mode", "graph")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        compiled = sm.compile(model, dict(encodings), example_args=(x,), **options)
    params = dict(model.named_parameters())
    intermediates = {n: e.effective_sparsifier for n, e in encodings.items() if n not in params}
    state = {**model.state_dict(), **compiled.effective_state_dict()}
    reference = eager_reference(model, (x,), intermediates, state)
    with torch.no_grad():
        expected = reference(x)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-4, atol=1e-5)
    return compiled
