"""Token plans for routed weights (mixture-of-experts experts).

An expert's linear sees a different token count every call (how many
tokens the router sent it, 0 included). The default plan (token_plan.py)
gives the example's counts kernels of their own and makes a cost-model
choice per input shape: for an expert that is a kernel build or a timing
in most calls. A routed region instead pads each count up to one of
`SIZES` (steps of at most 1.5x: at most a third of the rows are padding),
whose kernels and choices are all made at compile time up to the largest
count it was prepared for: a call then never compiles nor times.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparse_mlir.compiler.regions.token_plan import BUCKETS, Piece, plan

SIZES = (1, 2, 3, 4, 6, 8) + BUCKETS


@dataclass(frozen=True)
class RoutedTokens:
    """Counts up to `max_tokens` were prepared for (kernels and choices);
    larger ones run on the default plan's buckets (built when first seen)."""

    max_tokens: int

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")

    @staticmethod
    def size(tokens: int) -> int | None:
        """The kernel size a count pads to (None: past the largest, several pieces)."""
        return next((size for size in SIZES if size >= tokens), None)

    def plan(self, tokens: int) -> tuple[Piece, ...]:
        size = self.size(tokens)
        return (Piece(0, tokens, size),) if size is not None else plan(tokens)

    def key(self, tokens: int) -> tuple[int, ...]:
        """What a choice depends on: the kernel sizes that run the count."""
        return tuple(piece.size for piece in self.plan(tokens))

    def prepared_sizes(self) -> tuple[int, ...]:
        """The sizes built at compile time: every one a count up to max_tokens pads to."""
        largest = self.size(self.max_tokens)
        return tuple(size for size in SIZES if largest is None or size <= largest)
