"""Sparsifiers: which values of a tensor are kept (STen's taxonomy).

Each class converts its arguments and spells the matching `#smlir.*`
attribute. Whether the arguments are valid (the C++ verifier), whether it fits
a shape and its kind (streaming / blocking / materializing) are asked of the
attribute through the C API, so Python and the passes never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from sparse_mlir import _smlir
from sparse_mlir._attribute_spec import AttributeSpec
from sparse_mlir._literals import f64_literal, int_list_literal
from sparse_mlir._validate import check_block, check_bool, check_int, check_number
from sparse_mlir.errors import SpecError
from sparse_mlir.context import query_attribute


class Sparsifier(AttributeSpec):
    """Base class of every sparsifier spec."""

    @property
    def kind(self) -> str:
        """`streaming`, `blocking` or `materializing`, from the C++ interface."""
        return query_attribute(_smlir.sparsifier_kind, self.attr_text())

    @property
    def needs_ordering(self) -> bool:
        """True when magnitudes are compared (the tensor must be floating-point)."""
        return query_attribute(_smlir.sparsifier_needs_ordering, self.attr_text())


@dataclass(frozen=True)
class KeepAll(Sparsifier):
    """Keep every value; a sparse encoding drops only exact zeros."""

    def attr_text(self) -> str:
        return "#smlir.keep_all"


@dataclass(frozen=True)
class Threshold(Sparsifier):
    """Keep the values with |x| >= value."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", check_number("Threshold", "threshold", self.value))
        self._verify()

    def attr_text(self) -> str:
        return f"#smlir.threshold<{f64_literal(self.value)}>"


@dataclass(frozen=True)
class RandomFraction(Sparsifier):
    """Drop each value with probability `fraction` (counter-based RNG keyed by `seed`)."""

    fraction: float
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "fraction", check_number("RandomFraction", "fraction", self.fraction))
        seed = check_int("RandomFraction", "seed", self.seed)
        if not 0 <= seed < 2**64:  # the attribute's uint64_t (the parser would wrap -1)
            raise SpecError(f"RandomFraction: seed must be in [0, 2**64), got {seed}")
        object.__setattr__(self, "seed", seed)
        self._verify()

    def attr_text(self) -> str:
        return f"#smlir.random_fraction<fraction = {f64_literal(self.fraction)}, seed = {self.seed}>"


@dataclass(frozen=True)
class ScalarFraction(Sparsifier):
    """Magnitude pruning: drop the `fraction` of values with the smallest |x|."""

    fraction: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "fraction", check_number("ScalarFraction", "fraction", self.fraction))
        self._verify()

    def attr_text(self) -> str:
        return f"#smlir.scalar_fraction<{f64_literal(self.fraction)}>"


@dataclass(frozen=True)
class BlockFraction(Sparsifier):
    """Drop the `fraction` of `block`-shaped tiles with the smallest L1 norm."""

    fraction: float
    block: tuple[int, ...] = (4, 4)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fraction", check_number("BlockFraction", "fraction", self.fraction))
        object.__setattr__(self, "block", check_block("BlockFraction", self.block))
        self._verify()

    def attr_text(self) -> str:
        return (f"#smlir.block_fraction<fraction = {f64_literal(self.fraction)}, "
                f"block = {int_list_literal(self.block)}>")


@dataclass(frozen=True)
class NMMagnitude(Sparsifier):
    """Keep the `n` largest |x| of every `m` consecutive values along `dim`.

    `transposable=True` (matrices only) keeps at most `n` per row and per column
    of every m x m tile, so the transpose is n:m as well.

    `rows=r > 1` (STen's grouped n:m; `dim` the last dimension): every r
    consecutive rows share one pattern, the n positions of each group with
    the largest sum of |x| over the r rows (where r does not divide the rows,
    the last group holds the rest). `NM(n, m, rows=r)` stores it and
    runs it faster (each activation row is read once for the r rows).
    """

    n: int
    m: int
    dim: int = -1
    transposable: bool = False
    rows: int = 1

    def __post_init__(self) -> None:
        for name in ("n", "m", "dim", "rows"):
            object.__setattr__(self, name, check_int("NMMagnitude", name, getattr(self, name)))
        check_bool("NMMagnitude", "transposable", self.transposable)
        self._verify()

    def attr_text(self) -> str:
        rows = f", rows = {self.rows}" if self.rows != 1 else ""
        return (f"#smlir.nm_magnitude<n = {self.n}, m = {self.m}, dim = {self.dim}, "
                f"transposable = {'true' if self.transposable else 'false'}{rows}>")
