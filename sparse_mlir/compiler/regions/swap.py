"""Regions by module swap: the user's model runs eagerly, as written, with
each module that reads an encoded weight through a known op (nn.Linear,
HF's Conv1D, groups-1 nn.Conv2d) swapped for one calling our custom op.

No graph capture: nothing of the dense model changes (in-place ops, Python
control flow, data-dependent shapes, outputs and kwargs are the model's
own), compiling costs no torch.export (4 s of a 12-layer BERT-base's
compile), and any shape the model takes runs. Used when every module
holding an encoded weight is one of those (or an nn.Embedding, which then
gathers from the pruned weight on torch); otherwise the graph capture
(driver.py) finds the readers, functional ones (`x @ W`) included.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Mapping

import torch

from sparse_mlir.encodings import NM, Dense, Encoding
from sparse_mlir.compiler.importers.torch_fx import capture_lock
from sparse_mlir.runtime.ops import REGIONS, sparse_mlir_conv2d, sparse_mlir_linear
from sparse_mlir.compiler.weights import pack
from sparse_mlir.compiler.regions.base import Region, mark_handed_back, torch_won_everywhere
from sparse_mlir.compiler.regions.conv import ConvRegion, packed_matrix
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions import half
from sparse_mlir.compiler.regions.hybrid import linear_region
from sparse_mlir.compiler.regions.activation import GradientSparsifier
from sparse_mlir.compiler.regions.gradients import gradient_format
from sparse_mlir.compiler.regions.mask_update import PrunedLinear
from sparse_mlir.compiler.regions import tied
from sparse_mlir.errors import SpecError
from sparse_mlir.training import MaskUpdate

# Modules whose own forward is the only reader of their weight, which has
# no region: they read the pruned weight on torch (one warning).
READ_ON_TORCH = (torch.nn.Embedding, torch.nn.EmbeddingBag, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
                 torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


@dataclass(frozen=True)
class Owner:
    """A module holding an encoded weight (as its `weight`)."""

    path: str
    module: torch.nn.Module

    @property
    def kind(self) -> str | None:
        """"linear", "conv1d" ([in, out]), "conv2d", "torch" (read on torch: an
        embedding, a depthwise or other conv) or None (unknown)."""
        module = self.module
        if type(module) is torch.nn.Linear:
            return "linear"
        if type(module).__name__ == "Conv1D" and hasattr(module, "nf") and module.weight.dim() == 2:
            return "conv1d"
        if (type(module) is torch.nn.Conv2d and module.groups == 1 and module.padding_mode == "zeros"
                and not isinstance(module.padding, str)):
            return "conv2d"
        if isinstance(module, READ_ON_TORCH):
            return "torch"
        return None


def owners(model: torch.nn.Module, weights: Mapping[str, torch.Tensor]) -> dict[str, list[Owner]] | None:
    """Per encoded weight, the modules holding it as `weight`; None when one
    is held another way, by a module we cannot read, or by embeddings alone
    (the graph capture then finds its readers; `why_not_swapped` says why)."""
    found, reasons = _holders(model, weights)
    return None if reasons else found


def why_not_swapped(model: torch.nn.Module, weights: Mapping[str, torch.Tensor],
                    encodings: Mapping[str, Encoding]) -> list[str]:
    """The encoded weights `owners` cannot swap, each with its encoding and holder (a graph capture's reason)."""
    _, reasons = _holders(model, weights)
    return [f"{name} ({encodings[name].format_name}: {why})" for name, why in reasons.items()]


def _holders(model: torch.nn.Module,
             weights: Mapping[str, torch.Tensor]) -> tuple[dict[str, list[Owner]], dict[str, str]]:
    """Per encoded weight, the modules holding it as `weight` that a stand-in
    can replace, and why a weight cannot be swapped (where it cannot)."""
    found: dict[str, list[Owner]] = {name: [] for name in weights}
    reasons: dict[str, str] = {}
    by_id = {id(tensor): name for name, tensor in weights.items()}
    for path, module in model.named_modules(remove_duplicate=False):
        for attribute, parameter in module._parameters.items():
            name = by_id.get(id(parameter))
            if name is None:
                continue
            owner = Owner(path, module)
            if attribute != "weight" or owner.kind is None:
                reasons.setdefault(name, f"held as `{attribute}` by {type(module).__name__} ({path or 'the model'})")
            else:
                found[name].append(owner)
    # A weight only embeddings hold may be read functionally too (a tied
    # LM head's F.linear on the embedding's weight): only the graph shows that.
    for name, held in found.items():
        if name not in reasons and all(isinstance(o.module, (torch.nn.Embedding, torch.nn.EmbeddingBag))
                                       for o in held):
            what = type(held[0].module).__name__ if held else "no module"
            reasons[name] = (f"held by {what} only (a functional reader, such as a tied LM head, shows in the "
                             "graph alone)")
    return found, reasons


def in_out_nm(found: Mapping[str, list[Owner]], encodings: Mapping[str, Encoding]) -> set[str]:
    """n:m weights read only by Conv1D (as [in, out]): groups along dim 0."""
    return {name for name, held in found.items() if isinstance(encodings[name], NM)
            and {o.kind for o in held if o.kind != "torch"} == {"conv1d"}}


class SparseLinear(torch.nn.Module):
    """Stands for an nn.Linear / Conv1D whose weight is encoded: F.linear on our op.

    Its trainable tensors are `weight_values` (the stored values, the
    region's own: the kernels read them in place) and `bias`; `weight` is
    the dense-equivalent weight as the original module held it (models read
    `module.weight.dtype`), current after training steps. Its state_dict
    entries are the original module's (`weight` dense, `bias`): a compiled
    model's state_dict loads into the eager model and back (a loaded weight
    keeps the compiled mask)."""

    def __init__(self, handle: int, region: Region, bias: torch.nn.Parameter | None, original: torch.nn.Module,
                 in_out: bool = False):
        super().__init__()
        self._in_out = in_out   # the original holds W as [in, out] (HF Conv1D)
        self.handle, self.out_features = handle, region.signature.out_features
        self.in_features = region.signature.in_features
        self.weight_values = region.values   # shared by every stand-in of the region
        self._count = len(region.buffers)
        for index, buffer in enumerate(region.buffers[:-1]):
            self.register_buffer(f"packed_{index}", buffer, persistent=False)
        self._packed_names = [f"packed_{index}" for index in range(self._count - 1)]
        self.bias = bias
        self._original = [original]   # a list: not a submodule (its weight is not ours to list)
        # Set where torch won every shape at compile time: the original module runs.
        self.handed_back = False

    def _on_torch(self) -> bool:
        """Handed back, and no gradient of the stored values asked: the original module runs the call."""
        if not self.handed_back or (torch.is_grad_enabled() and self.weight_values.requires_grad):
            return False
        region = REGIONS.get(self.handle)
        if self.weight_values is not region.values:   # replaced: the region checks it
            return False
        region.sync()
        return True

    @property
    def weight(self) -> torch.Tensor:
        region = REGIONS.get(self.handle)
        region.sync()
        weight = self._original[0].weight
        if weight is None:   # a shared weight stored once (tied.py): its dense form, made now
            matrix = region.dense_now()
            return matrix.t() if self._in_out else matrix
        return weight

    def _buffers_in_order(self) -> list[torch.Tensor]:
        buffers = self._buffers   # (read directly: Module.__getattr__ costs ~0.5 us a name, on every call)
        return [*[buffers[name] for name in self._packed_names], self._parameters["weight_values"]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._on_torch():
            return self._original[0](x)
        return sparse_mlir_linear(x, self._buffers_in_order(), self.bias, self.out_features, self.handle)

    def _matrix(self, weight: torch.Tensor) -> torch.Tensor:
        """The region's W2 [out, in] for a weight in the original module's layout."""
        return weight.t() if self._in_out else weight

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        destination[prefix + "weight"] = self.weight.detach()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def _load_from_state_dict(self, state_dict: Mapping, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        region = REGIONS.get(self.handle)
        expected = ["weight"] + (["bias"] if self.bias is not None else [])
        for key in state_dict:
            if key.startswith(prefix) and "." not in key[len(prefix):] and key[len(prefix):] not in expected:
                unexpected_keys.append(key)
        for leaf in expected:
            key = prefix + leaf
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            current = self.weight if leaf == "weight" else self.bias
            if tuple(value.shape) != tuple(current.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)}, "
                                  f"the compiled model's is {tuple(current.shape)}")
                continue
            if leaf == "bias":
                with torch.no_grad():
                    self.bias.copy_(value)
                continue
            dropped = region.load_matrix(self._matrix(value.to(region.values.dtype)))
            if dropped:
                warnings.warn(f"load_state_dict: {key} has {dropped} nonzeros outside the mask it was compiled "
                              f"with ({region.encoding.format_name}); they were dropped (compile again to prune "
                              "it anew)", stacklevel=4)


class SparseConv2d(SparseLinear):
    """Stands for a groups-1 nn.Conv2d whose weight is encoded."""

    def __init__(self, handle: int, region: ConvRegion, bias: torch.nn.Parameter | None,
                 original: torch.nn.Module):
        super().__init__(handle, region, bias, original)
        self.kernel_size, self.stride = list(region.kernel_size), list(region.stride)
        self.padding, self.dilation = list(region.padding), list(region.dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._on_torch():
            # torch's conv2d on the region's weight: channels-last where the model runs so (the
            # original module's weight is not converted with the model).
            return REGIONS.get(self.handle).torch_conv2d(x, self.bias)
        return sparse_mlir_conv2d(x, self._buffers_in_order(), self.bias, self.out_features, self.kernel_size,
                                  self.stride, self.padding, self.dilation, self.handle)

    def _matrix(self, weight: torch.Tensor) -> torch.Tensor:
        return packed_matrix(weight, REGIONS.get(self.handle).encoding)


class SparseEmbedding(SparseLinear):
    """Stands for an nn.Embedding whose weight a linear region also reads (a
    tied LM head): its rows gathered from the region's stored values (one
    copy; tied.py), which it trains with the region's other readers."""

    def __init__(self, handle: int, region: tied.SharedLinearRegion, original: torch.nn.Embedding):
        super().__init__(handle, region, None, original)
        self.padding_idx = original.padding_idx
        self.num_embeddings, self.embedding_dim = region.matrix_shape

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        region = REGIONS.get(self.handle)
        tied.check_ids(region.name, region.encoding, self.num_embeddings, ids)
        values = self.weight_values
        if values is not region.values:
            region._own(values)   # (a SpecError for values of another shape)
        rows = tied.gather_rows(region.encoding, region._indices, values, region.matrix_shape,
                                ids.reshape(-1).long(), self.padding_idx)
        return rows.view(*ids.shape, self.embedding_dim)


class Root(torch.nn.Module):
    """Holds a model that is itself an encoded module (a bare nn.Linear or
    Conv2d), so that it is swapped as a child like any other."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)


def _set(model: torch.nn.Module, path: str, module: torch.nn.Module) -> None:
    owner, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(owner) if owner else model, leaf, module)


# What gives an encoded weight a dense master weight, for messages.
_DENSE_MASTER = "mask_update (or grad=Dense())"


def swap(model: torch.nn.Module, found: Mapping[str, list[Owner]], encodings: Mapping[str, Encoding],
         effective: Mapping[str, torch.Tensor], options: KernelOptions, cost_model: bool,
         updates: Mapping[str, MaskUpdate | None] | None = None,
         ) -> tuple[torch.nn.Module, dict[int, Region], dict[str, list[str]], dict[int, list[str]]]:
    """A copy of `model` (parameters a snapshot, encoded ones pruned) with
    its encoded modules swapped. Returns it, the regions by handle, each
    weight's readers (for the plan) and each region's module paths."""
    with capture_lock():
        copied = copy.deepcopy(model)
    if any(owner.path == "" for held in found.values() for owner in held):
        copied = Root(copied)
        found = {name: [Owner("model" + ("." + o.path if o.path else ""), o.module) for o in held]
                 for name, held in found.items()}
    updates = dict(updates or {})
    with capture_lock():
        originals = {name: p for name, p in model.named_parameters() if name in encodings}
    trainable = {name: p.requires_grad for name, p in originals.items()}
    # A weight trained with MaskUpdate: its dense master, as the model held it (not pruned).
    masters = {name: torch.nn.Parameter(originals[name].detach().clone(), requires_grad=trainable[name])
               for name in updates}
    pruned: dict[str, torch.nn.Parameter] = {}
    for name in encodings:   # shares effective's storage (effective_state_dict() returns clones)
        pruned[name] = torch.nn.Parameter(effective[name], requires_grad=False)
    regions: dict[int, Region] = {}
    readers: dict[str, list[str]] = {}
    paths: dict[int, list[str]] = {}
    by_key: dict[tuple, int] = {}
    gradient_sparsifiers: dict[str, GradientSparsifier] = {}
    for name, held in found.items():
        encoding = encodings[name]
        for owner in held:
            module = copied.get_submodule(owner.path)
            module.weight = pruned[name]   # tied owners keep sharing one pruned copy
            kind = owner.kind
            eligible = (kind != "torch" and not isinstance(encoding, Dense)
                        and half.reads_in_region(effective[name], encoding, "conv2d" if kind == "conv2d" else "linear"))
            if kind == "torch" or not eligible:
                if name in updates:
                    raise SpecError(f"{name}: {_DENSE_MASTER} trains weights read by nn.Linear or HF Conv1D; it is read "
                                    f"by {type(module).__name__} ({owner.path})")
                readers.setdefault(name, []).append(half.reader(f"{type(module).__name__} ({owner.path})",
                                                                effective[name]))
                continue
            if name in updates and kind not in ("linear", "conv1d"):
                raise SpecError(f"{name}: {_DENSE_MASTER} trains weights read by nn.Linear or HF Conv1D; it is read by "
                                f"{type(module).__name__} ({owner.path})")
            bias = module.bias if getattr(module, "bias", None) is not None else None
            key = (name, bias is not None, kind, *(_conv_key(module) if kind == "conv2d" else ()))
            if key not in by_key:
                # A weight several modules read: one region whose dense copy can go (tied.py).
                shared = (tied.ENABLED and len(held) > 1 and kind == "linear" and tied.gatherable(encoding)
                          and name not in updates)
                by_key[key] = REGIONS.add(region := _region(name, encoding, effective[name], kind, module,
                                                            bias is not None, options, cost_model, shared))
                regions[by_key[key]] = region
                # (With MaskUpdate the master weight trains, not the stored values.)
                region.values.requires_grad_(trainable.get(name, False) and name not in updates)
                if region.values.requires_grad:
                    _shape_values_gradient(region, options)
            handle = by_key[key]
            if name in updates:
                gradient = gradient_format(encoding, dense_by_default=True)
                if name not in gradient_sparsifiers and gradient.sparsifier is not None:
                    gradient_sparsifiers[name] = GradientSparsifier(name, gradient, options,
                                                                    tuple(regions[handle]._matrix.shape))
                stand_in = PrunedLinear(handle, regions[handle], bias, module, kind == "conv1d", updates[name],
                                        masters[name], gradient, gradient_sparsifiers.get(name))
            elif kind == "conv2d":
                stand_in = SparseConv2d(handle, regions[handle], bias, module)
            else:
                stand_in = SparseLinear(handle, regions[handle], bias, module, in_out=kind == "conv1d")
            _set(copied, owner.path, stand_in)
            paths.setdefault(handle, []).append(owner.path)
            op = "conv2d" if kind == "conv2d" else "linear"
            readers.setdefault(name, []).append(f"sparse_mlir::{op} (region {handle})")
    _serve_embeddings(copied, found, regions, readers)
    copied.eval()
    return copied, regions, readers, paths


def _serve_embeddings(model: torch.nn.Module, found: Mapping[str, list[Owner]], regions: Mapping[int, Region],
                      readers: dict[str, list[str]]) -> None:
    """nn.Embeddings holding a weight that a shared linear region stores
    (a tied LM head's): swapped for SparseEmbedding, gathering their rows
    from that region's stored values instead of a pruned dense copy."""
    for name, held in found.items():
        shared = [h for h, r in regions.items() if r.name == name and isinstance(r, tied.SharedLinearRegion)]
        if not shared:
            continue
        region = regions[shared[0]]
        for owner in held:
            module = model.get_submodule(owner.path)
            if not tied.plain_embedding(module):
                continue
            _set(model, owner.path, SparseEmbedding(shared[0], region, module))
            torch_reader = f"{type(module).__name__} ({owner.path})"
            readers[name] = [r for r in readers[name] if r != torch_reader]
            readers[name].append(f"{tied.EMBEDDING_READER} ({owner.path}: rows gathered from the stored "
                                 f"{region.encoding.format_name} values of region {shared[0]})")


def _shape_values_gradient(region: Region, options: KernelOptions) -> None:
    """A fixed-mask weight whose gradient format has a sparsifier
    (`grad=CSR(sparsifier=...)`): the stored values' gradient, as the dense
    W2 it stands for, pruned by it before it reaches `.grad`."""
    gradient = gradient_format(region.encoding, dense_by_default=False)
    if gradient.sparsifier is None:
        return
    sparsifier = GradientSparsifier(region.name, gradient, options, tuple(region._matrix.shape))

    def prune(grad: torch.Tensor) -> torch.Tensor:
        return sparsifier(region.dense_matrix(grad))[region._rows, region._cols]
    region.values.register_hook(prune)


def _conv_key(module: torch.nn.Conv2d) -> tuple:
    return (tuple(module.stride), tuple(module.padding), tuple(module.dilation))


def _region(name: str, encoding: Encoding, weight: torch.Tensor, kind: str, module: torch.nn.Module, bias: bool,
            options: KernelOptions, cost_model: bool, shared: bool = False) -> Region:
    if kind == "conv2d":
        matrix = packed_matrix(weight, encoding)
        return ConvRegion(name, encoding, weight, pack(encoding, matrix.numpy(), name), bias, module.stride,
                          module.padding, module.dilation, options, cost_model)
    matrix = weight.t() if kind == "conv1d" else weight   # torch's side reads W^T as a view
    packed = pack(encoding, half.packable(matrix.contiguous()).numpy(), name)
    if shared:
        return tied.SharedLinearRegion(name, encoding, matrix, packed, bias, options, cost_model)
    return linear_region(name, encoding, matrix, packed, bias, options, cost_model)


def eager_call(model: torch.nn.Module, paths: Mapping[int, list[str]], example_args: tuple,
               example_kwargs: Mapping[str, object]):
    """The swapped model on the example with its original modules back in
    place for the call (pruned weights): eager torch, to time against."""
    def run() -> object:
        stand_ins = {path: model.get_submodule(path) for handle_paths in paths.values() for path in handle_paths}
        for path, stand_in in stand_ins.items():
            if hasattr(stand_in, "_original"):
                _set(model, path, stand_in._original[0])
        try:
            return model(*example_args, **example_kwargs)
        finally:
            for path, stand_in in stand_ins.items():
                _set(model, path, stand_in)
    return run


def hand_back(model: torch.nn.Module, regions: Mapping[int, Region], paths: Mapping[int, list[str]],
              readers: dict[str, list[str]]) -> None:
    """Regions torch won everywhere at compile time: their stand-ins call
    the original modules (with the pruned weight) from now on, unless a
    call trains the stored values (the region's op then records it)."""
    for handle in torch_won_everywhere(regions):
        for path in paths.get(handle, []):
            model.get_submodule(path).handed_back = True
        mark_handed_back(handle, regions[handle], readers)
