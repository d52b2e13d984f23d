"""STen's A.3 case study with sparse_mlir's Python extension API.

STen (appendix A.3) defines a CSC format over scipy, a random-fraction
sparsifier, and forward / backward implementations of `torch.mm` and
`torch.add` for it, all from Python. Here the same three registrations run
inside a small MLP compiled by `sm.compile`, trained a few steps, and are
checked against dense eager PyTorch with the same masks:

    h = relu(fc1(x))                 fc1.weight stored ScipyCSC, pruned by MyRandomFraction(0.5): linear by scipy
    s = torch.add(h, shift)          A.3's add, its output sparsified by MyRandomFraction(0.5) into ScipyCSC
    w2 = torch.add(delta, base)      a sparse fine-tuning delta (ScipyCSC) on a dense base: add by scipy
    y = torch.mm(s, w2)              A.3's mm(CSC, dense): scipy

Then the same MLP's fc1 with its weight in an MLIR format given as text
(DCSR), run by MLIR's generic sparse_tensor code generation.
"""

from __future__ import annotations

import argparse
import copy
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import torch

import sparse_mlir as sm


class ScipyCSC(sm.PythonFormat):
    """CSC over scipy (STen's MyCscTensor)."""

    def from_dense(self, tensor: torch.Tensor) -> scipy.sparse.csc_matrix:
        return scipy.sparse.csc_matrix(tensor.numpy())

    def to_dense(self, stored: scipy.sparse.csc_matrix) -> torch.Tensor:
        return torch.from_numpy(stored.toarray())


@sm.register_sparsifier
@dataclass(frozen=True)
class MyRandomFraction(sm.UserSparsifier):
    """Drops `fraction` of the positions, chosen by a seeded generator (STen's MyRandomFractionSparsifier)."""

    fraction: float
    seed: int = 0

    def keep(self, w: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed)
        return torch.rand(w.shape, generator=generator) >= self.fraction


# Implementations: arguments come as the torch op gets them, a ScipyCSC tensor as its scipy matrix;
# a backward returns one gradient per positional argument.
def linear_forward(x, w, b):       # F.linear(x, W, b) with W in ScipyCSC
    return torch.from_numpy(np.asarray(w @ x.numpy().T).T.copy()) + b


def linear_backward(grad, x, w, b):
    dx = torch.from_numpy(np.asarray(w.T @ grad.numpy().T).T.copy())
    return dx, grad.t() @ x, grad.sum(0)


def mm_forward(a, b):              # A.3: torch.mm(CSC, dense) by scipy
    return torch.from_numpy(np.asarray(a @ b.numpy()))


def mm_backward(grad, a, b):
    return grad @ b.t(), torch.from_numpy(np.asarray(a.T @ grad.numpy()))


def add_forward(a, b):             # torch.add(CSC, dense)
    out = b.numpy().copy()
    rows, cols = a.nonzero()
    out[rows, cols] += np.asarray(a[rows, cols]).reshape(-1)
    return torch.from_numpy(out)


def add_backward(grad, a, b):
    return grad, grad


class MLP(torch.nn.Module):
    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(features, hidden)
        self.shift = torch.nn.Parameter(0.1 * torch.randn(hidden))
        self.delta = torch.nn.Parameter(0.1 * torch.randn(hidden, classes))
        self.register_buffer("base", 0.1 * torch.randn(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        s = torch.add(h, self.shift)
        w2 = torch.add(self.delta, self.base)
        return torch.mm(s, w2)


def eager_reference(model: MLP, masks: dict[str, torch.Tensor], keep: MyRandomFraction) -> MLP:
    """The dense model with the same masks: weights pruned, the add's output multiplied by its mask."""
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for name, mask in masks.items():
            reference.get_parameter(name).mul_(mask)

    def forward(x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(reference.fc1(x))
        s = torch.add(h, reference.shift)
        s = s * keep.keep(s)
        return torch.mm(s, torch.add(reference.delta, reference.base))

    reference.forward = forward  # type: ignore[method-assign]
    return reference


def train(module: torch.nn.Module, masks: dict[str, torch.Tensor], xs: list, ys: list) -> list[float]:
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    losses = []
    for x, y in zip(xs, ys):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(x), y)
        loss.backward()
        for name, mask in masks.items():   # the eager side keeps its pruned weights' gradients where kept
            grad = module.get_parameter(name).grad
            if grad is not None:
                grad.mul_(mask)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MLP(32, 64, 10)
    sm.register_implementation(torch.nn.functional.linear, ScipyCSC, forward=linear_forward, backward=linear_backward)
    sm.register_implementation(torch.mm, ScipyCSC, forward=mm_forward, backward=mm_backward)
    sm.register_implementation(torch.add, ScipyCSC, forward=add_forward, backward=add_backward)

    sparsifier = MyRandomFraction(0.5)
    encodings = {"fc1.weight": ScipyCSC(sparsifier=sparsifier),
                 "delta": ScipyCSC(sparsifier=MyRandomFraction(0.5, seed=1)),
                 "add": ScipyCSC(sparsifier=sparsifier)}          # the fx node of torch.add(h, shift)
    xs = [torch.randn(args.batch, 32) for _ in range(args.steps)]
    ys = [torch.randint(0, 10, (args.batch,)) for _ in range(args.steps)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = sm.compile(model, encodings, example_args=(xs[0],))
    for w in caught:
        print(f"warning: {w.message}")
    for region in fn.extension_regions():
        print(f"{region.node:10s} {region.op:9s} {region.tensor:10s} {region.format:9s} {region.runs}")

    state = fn.effective_state_dict()
    masks = {name: state[name] != 0 for name in ("fc1.weight", "delta")}
    reference = eager_reference(model, masks, sparsifier)
    with torch.no_grad():
        error = float((fn(xs[0]) - reference(xs[0])).abs().max())
    print(f"forward: max |compiled - eager| = {error:.2e}")
    ours = train(fn, {}, xs, ys)
    theirs = train(reference, masks, xs, ys)
    print("losses (compiled):", " ".join(f"{v:.5f}" for v in ours))
    print("losses (eager):   ", " ".join(f"{v:.5f}" for v in theirs))
    weight_error = max(float((fn.model.get_parameter(n) - reference.get_parameter(n)).detach().abs().max())
                       for n in ("fc1.weight", "fc1.bias", "shift", "delta"))
    print(f"after {args.steps} steps: max |weight difference| = {weight_error:.2e}")

    # An MLIR format given as text: fc1's weight in DCSR, run by MLIR's generic sparsification.
    dcsr = sm.SparseTensorFormat("#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>",
                                 name="DCSR", sparsifier=sm.ScalarFraction(0.8))
    dense_model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    fn2 = sm.compile(dense_model, {"0.weight": dcsr, "2.weight": dcsr}, example_args=(xs[0],))
    eager2 = copy.deepcopy(dense_model)
    eager2.load_state_dict(fn2.effective_state_dict())
    with torch.no_grad():
        error2 = float((fn2(xs[1]) - eager2(xs[1])).abs().max())
    print(f"DCSR MLP: max |compiled - eager| = {error2:.2e}; regions: "
          + ", ".join(r.runs for r in fn2.extension_regions()))
    if not (error < 1e-5 and weight_error < 1e-5 and error2 < 1e-5
            and all(abs(a - b) < 1e-5 for a, b in zip(ours, theirs))):
        raise SystemExit("MISMATCH")
    print("OK")


if __name__ == "__main__":
    main()
