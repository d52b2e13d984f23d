"""How encoded weights train (public API; see `compile(..., mask_update=...)`).

By default a compiled model trains with the masks fixed at compile time:
each encoded weight's stored values are its parameter (`<module>.weight_values`)
and its gradient is computed at the stored positions only. `MaskUpdate`
instead keeps a dense master weight (`<module>.weight`, the model's own
name) and re-applies the weight's sparsifier to it as it trains (STen's
materializing update; with `NM(2, 4)`, PyTorch's 2:4 training with runtime
pruning): the forward and dx run on the pruned weight, and the master gets
the dense gradient (straight-through: pruned entries keep learning and may
come back).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparse_mlir.errors import SpecError


@dataclass(frozen=True)
class MaskUpdate:
    """Re-prune from the dense master weight every `every` training calls
    (1: each forward, runtime pruning). Outside training, a call after the
    master changed (an optimizer step, load_state_dict) prunes it first."""

    every: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise SpecError(f"MaskUpdate: every must be an int >= 1 (training calls between re-prunings), "
                            f"got {self.every!r}")
