"""Optimizer steps bump the version counters of the tensors regions follow.

A region's dense copies and dx's W^T follow its stored values, and a
MaskUpdate stand-in prunes its master weight again, when the tensor's
version counter changes. torch's fused optimizers (`AdamW(fused=True)`,
`SGD(fused=True)`) update parameters in place without bumping it: the
copies would go stale (a wrong dx, a master never pruned again). A global
optimizer step post-hook (installed on first use) bumps the counter of
each followed tensor the optimizer holds; after a non-fused step that is
one change more, which costs nothing extra (the copies follow once).
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

# id -> tensor (dead entries drop out; the identity check guards reused ids).
_FOLLOWED: "weakref.WeakValueDictionary[int, torch.Tensor]" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
_hook: object | None = None


def follow(tensor: torch.Tensor) -> None:
    """Optimizer steps over `tensor` bump its version counter."""
    global _hook
    with _LOCK:
        _FOLLOWED[id(tensor)] = tensor
        if _hook is None:
            _hook = register_optimizer_step_post_hook(_bump_followed)


def _bump_followed(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if _FOLLOWED.get(id(parameter)) is parameter:
                torch.autograd.graph.increment_version(parameter)
