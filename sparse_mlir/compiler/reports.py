"""What a compile decided, as every target's compiled module reports it:
`stats()`, `sparsity_plan()`, `effective_state_dict()`."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TensorStats:
    shape: tuple[int, ...]
    format: str
    sparsifier: str
    nnz: int
    density: float


@dataclass(frozen=True)
class PlanEntry:
    """How one named tensor is sparsified and stored (see `sparsity_plan()`)."""

    name: str
    role: str                  # "weight" | "intermediate"
    shape: tuple[int, ...]
    format: str                # the requested storage format
    stored_as: str             # what the compiled code uses (a fallback says so)
    sparsifier: str            # the #smlir.* attribute
    kind: str                  # streaming | blocking | materializing
    applied: str               # when and where the sparsifier runs
    origin: str                # "user", or "inferred from '<tensor>'" (smlir-propagate-encodings)
    fallbacks: tuple[str, ...]  # fallback warnings that name this tensor
    readers: tuple[str, ...] = ()  # a weight several modules read: each (path, op, what serves it)

    def __str__(self) -> str:
        fallback = f"; fallbacks: {'; '.join(self.fallbacks)}" if self.fallbacks else ""
        readers = f"; readers: {'; '.join(self.readers)}" if self.readers else ""
        return (f"{self.name} [{self.role} {list(self.shape)}] {self.format} -> stored as {self.stored_as}, "
                f"{self.sparsifier} ({self.kind}), {self.applied}, {self.origin}{fallback}{readers}")


class CompileReports:
    """What compilation decided, for every target's compiled module (which
    sets `_effective`, `_stats` and `_plan`)."""

    _effective: dict[str, torch.Tensor]
    _stats: dict[str, TensorStats]
    _plan: list[PlanEntry]

    def effective_state_dict(self) -> dict[str, torch.Tensor]:
        """Dense-equivalent parameters after sparsification (zeros where pruned)."""
        return {name: t.clone() for name, t in self._effective.items()}

    def stats(self) -> dict[str, TensorStats]:
        """Shape, format, sparsifier, nnz and density of every encoded tensor."""
        return dict(self._stats)

    def sparsity_plan(self) -> list[PlanEntry]:
        """Per named tensor: format, sparsifier and its kind, where it runs, fallbacks."""
        return list(self._plan)
