"""The captured graph called on flat tensors: RegionModule's common path.

`ExportedProgram.module()` wraps the graph in pytree flattening of the
call's (args, kwargs) against its in-spec, two forward pre-hooks (one
flattens the call again to compare structures), a forward hook and the
unflattening of the outputs: ~40 us per call, as much as a small kernel.
For a model whose every argument is one tensor (the common case: `adj, h`,
`x`, `input_ids, attention_mask`) the structure check is a length and a
key comparison, so this runs the same graph's code generated without the
pytree wrapper (torch.fx's plain CodeGen) on the module itself.

torch.export's guards are kept as they are: the graph's `_guards_fn` call
(static dims, equal dims across inputs, ranges: "Guard failed: ..." as an
AssertionError) is part of the flat code. A call whose structure differs
(another argument count, other keywords, a non-tensor) takes the wrapped
path, as does tracing under torch.compile.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.fx.graph import CodeGen
from torch.fx.graph_module import _forward_from_src
from torch.utils import _pytree as pytree

from sparse_mlir.compiler.regions.capture import Captured


class FlatCall:
    """The graph's forward without the pytree layer, for calls shaped like
    the example (same positional count, same keywords, tensors only)."""

    def __init__(self, graph_module: torch.fx.GraphModule, positional: int, keywords: tuple[str, ...]) -> None:
        graph = graph_module.graph
        self.code = graph_module.code   # the code it was generated from (recompile() makes a new one)
        codegen = graph._codegen
        graph._codegen = CodeGen()
        try:
            python_code = graph.python_code(root_module="self")
        finally:
            graph._codegen = codegen
        source, namespace = python_code.src, dict(python_code.globals)
        check = _guard_function(graph_module)
        if check is not None and source.count("self._guards_fn(") == 1:
            # The guards called as a function: no module call, no config patch.
            source = source.replace("self._guards_fn(", "_smlir_guards(")
            namespace["_smlir_guards"] = check
        self._forward: Callable[..., Any] = _forward_from_src(source, namespace)
        self._module = graph_module
        self.positional = positional
        self.keywords = keywords
        self._keyword_set = frozenset(keywords)
        self._out_spec = graph_module._out_spec
        self._single = self._out_spec.is_leaf()

    @classmethod
    def build(cls, graph_module: torch.fx.GraphModule, captured: Captured) -> "FlatCall | None":
        """The flat call of `graph_module`, or None where the model's
        inputs are not all plain tensor arguments (the wrapped path)."""
        import inspect
        signature = captured.signature
        in_spec = getattr(graph_module, "_in_spec", None)
        out_spec = getattr(graph_module, "_out_spec", None)
        if signature is None or in_spec is None or out_spec is None:
            return None
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
            return None
        if in_spec.type is not tuple or in_spec.num_children != 2:
            return None
        args_spec, kwargs_spec = in_spec.children()
        if args_spec.type not in (tuple, list) or kwargs_spec.type is not dict:
            return None
        keywords = tuple(kwargs_spec.context or ())
        if (args_spec.num_children != len(captured.positional) or list(keywords) != list(captured.keywords)
                or not all(child.is_leaf() for child in [*args_spec.children(), *kwargs_spec.children()])):
            return None
        placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
        paths = [spec.path for spec in captured.inputs]
        if len(placeholders) != len(paths) or paths != [*captured.positional, *keywords]:
            return None   # (a non-tensor argument, or inputs named otherwise)
        return cls(graph_module, len(captured.positional), keywords)

    def leaves(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor] | None:
        """The call's tensors in the graph's input order, or None where the
        call is not shaped like the example (the wrapped path decides)."""
        if len(args) != self.positional:
            return None
        if kwargs:
            if kwargs.keys() != self._keyword_set:
                return None
            flat = [*args, *(kwargs[name] for name in self.keywords)]
        elif self.keywords:
            return None
        else:
            flat = list(args)
        for leaf in flat:
            if not isinstance(leaf, torch.Tensor):
                return None
        return flat

    def __call__(self, flat: Sequence[torch.Tensor]) -> Any:
        out = self._forward(self._module, *flat)
        return out[0] if self._single else pytree.tree_unflatten(list(out), self._out_spec)


def _guard_function(graph_module: torch.fx.GraphModule) -> Callable[..., None] | None:
    """The function torch.export generated for the graph's guards, without
    the wrapper that patches dynamo's config around each call (it lets
    dynamo trace the guards, and this path is not traced); None where it
    is not found (the module is called instead)."""
    guards = getattr(graph_module, "_guards_fn", None)
    forward = getattr(guards, "forward", None)
    cells = dict(zip(getattr(getattr(forward, "__code__", None), "co_freevars", ()),
                     getattr(forward, "__closure__", None) or ()))
    cell = cells.get("func")
    function = cell.cell_contents if cell is not None else None
    return function if callable(function) and getattr(function, "__name__", "") == "_" else None
