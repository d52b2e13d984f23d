"""torch.export of the user's model with dynamic dims, kwargs and any outputs.

Every dim of every tensor input is exported as `Dim.AUTO`: torch.export
keeps it symbolic unless the model fixes it (a linear's in-features, an
image's channels), so calls at other batch sizes, sequence lengths or image
sizes run the same graph. Dims of size 0 or 1 in the example are fixed by
torch.export (its 0/1 specialisation): give examples of size >= 2 where the
size varies.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
from torch.export import Dim
from torch.utils import _pytree as pytree

from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.importers.torch_fx import ExportError, capture_lock


@dataclass(frozen=True)
class InputSpec:
    """One tensor leaf of the model's inputs, as exported."""

    path: str                          # "x", "attention_mask", "inputs[0]"
    dtype: torch.dtype
    shape: tuple[int | None, ...]      # None: dynamic


@dataclass
class Captured:
    program: torch.export.ExportedProgram
    positional: list[str]              # forward's parameters passed positionally in the example
    keywords: list[str]                # ... and by keyword
    signature: inspect.Signature | None
    inputs: list[InputSpec]
    example_args: tuple = ()           # (clones: for export's whole-graph compile)


def _auto_dims(value: Any) -> Any:
    return pytree.tree_map(lambda leaf: {d: Dim.AUTO for d in range(leaf.dim())}
                           if isinstance(leaf, torch.Tensor) else None, value)


def capture(model: torch.nn.Module, example_args: Sequence[Any], example_kwargs: Mapping[str, Any],
            dynamic: bool, keep_examples: bool = True) -> Captured:
    """The exported program of `model` (eval mode) on the examples (kept,
    cloned, for export() unless `keep_examples` is False: sparse inputs'
    stand-ins, which export() cannot take anyway)."""
    args, kwargs = tuple(example_args), dict(example_kwargs)
    try:
        signature = inspect.signature(model.forward)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise SpecError(f"example_args / example_kwargs do not match {type(model).__name__}.forward: {error}") from None
    names = list(bound.arguments)
    positional, keywords = names[:len(args)], [name for name in names[len(args):]]
    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = {name: _auto_dims(value) for name, value in bound.arguments.items()}
    with capture_lock():
        was_training = model.training
        model.eval()
        try:
            program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
        except Exception as error:  # torch.export raises many types
            raise ExportError(f"torch.export could not capture {type(model).__name__}: "
                              f"{type(error).__name__}: {error}") from error
        finally:
            model.train(was_training)
    examples = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args) if keep_examples else ()
    return Captured(program, positional, keywords, signature, _input_specs(program, args, kwargs, positional),
                    examples)


def _input_specs(program: torch.export.ExportedProgram, args: tuple, kwargs: dict,
                 positional: Sequence[str]) -> list[InputSpec]:
    leaves, _ = pytree.tree_flatten_with_path((args, kwargs))
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    user_inputs = list(program.graph_signature.user_inputs)
    specs = []
    tensor_leaves = [(path, leaf) for path, leaf in leaves if isinstance(leaf, torch.Tensor)]
    for (path, leaf), name in zip(tensor_leaves, [n for n in user_inputs if _is_tensor(placeholders.get(n))]):
        value = placeholders[name].meta.get("val")
        shape = tuple(_static(d) for d in value.shape) if value is not None else tuple(leaf.shape)
        specs.append(InputSpec(_path_text(path, positional), leaf.dtype, shape))
    return specs


def _static(dim: Any) -> int | None:
    """A dim's size where torch.export fixed it (an int, or a symbol it
    specialised to one), else None."""
    if isinstance(dim, int):
        return dim
    return dim.node.maybe_as_int()


def _is_tensor(node: Any) -> bool:
    return node is not None and isinstance(node.meta.get("val"), torch.Tensor)


def _path_text(path: tuple, positional: Sequence[str]) -> str:
    """((args|kwargs), key...) as the user wrote it: "x", "inputs[1]", "attention_mask"."""
    text = pytree.keystr(path)           # "[0][0]" or "[1]['attention_mask']"
    if text.startswith("[0]["):
        index, _, tail = text[4:].partition("]")
        return (positional[int(index)] if int(index) < len(positional) else f"args[{index}]") + tail
    if text.startswith("[1]['"):
        rest = text[5:]
        key, _, tail = rest.partition("']")
        return key + tail
    return text
