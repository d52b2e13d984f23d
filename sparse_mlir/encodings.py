"""Storage formats of a tensor: Dense, CSR, CSC, COO, BSR, NM, ELL, Hybrid (two parts summed).

Each class converts its arguments, spells the matching `#smlir.*` encoding
attribute and asks everything else of it through the C API: whether the
arguments are valid (the C++ verifier), whether it fits a shape, its name and
the `#sparse_tensor.encoding` it stands for. `sparsifier=` chooses which values are kept; left out, the
format's default applies (`default_sparsifier`). `grad=` is the format of the tensor's gradient in
training (STen's per-tensor gradient format and sparsifier): `Dense()` lets every position carry
gradient (straight-through), a sparse format keeps it to the tensor's kept positions, and the grad
encoding's sparsifier, if any, then prunes it (`CSR(grad=Dense(sparsifier=ScalarFraction(0.9)))`).
Left out: a fixed-mask weight's gradient has its stored positions, a weight trained from a dense master
(`MaskUpdate`) a dense one, an intermediate's the kept positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir import _smlir
from sparse_mlir._attribute_spec import AttributeSpec
from sparse_mlir._literals import f64_literal, int_list_literal
from sparse_mlir._validate import check_block, check_int, check_number
from sparse_mlir.context import query_attribute
from sparse_mlir.errors import SpecError
from sparse_mlir.sparsifiers import KeepAll, NMMagnitude, Sparsifier


@dataclass(frozen=True)
class Encoding(AttributeSpec):
    """Base class of every storage format spec."""

    sparsifier: Sparsifier | None = field(default=None, kw_only=True)
    grad: Encoding | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.sparsifier is not None and not isinstance(self.sparsifier, Sparsifier):
            raise SpecError(
                f"{type(self).__name__}: sparsifier must be a sparse_mlir sparsifier "
                f"(KeepAll(), Threshold(...), ...), got {self.sparsifier!r}")
        if self.grad is not None:
            if not isinstance(self.grad, Encoding):
                raise SpecError(f"{type(self).__name__}: grad must be a sparse_mlir encoding, the gradient's format "
                                f"(Dense(), CSR(), Dense(sparsifier=ScalarFraction(0.9)), ...), got {self.grad!r}")
            if self.grad.grad is not None:
                raise SpecError(f"{type(self).__name__}: grad={self.grad!r} has a grad= of its own; a gradient's "
                                "format has none (gradients of gradients are not trained)")

    def default_sparsifier(self) -> Sparsifier:
        """Keep the existing zeros; formats with a structure prune to fit it."""
        return KeepAll()

    @property
    def effective_sparsifier(self) -> Sparsifier:
        return self.sparsifier if self.sparsifier is not None else self.default_sparsifier()

    def sparse_tensor_encoding(self, rank: int, context: ir.Context | None = None) -> ir.Attribute | None:
        """The equivalent `#sparse_tensor.encoding` at `rank` (None for Dense)."""
        if context is None:
            return _smlir.sparse_tensor_encoding(self.to_attr(), rank)
        with context:
            return _smlir.sparse_tensor_encoding(self.to_attr(), rank)

    @property
    def format_name(self) -> str:
        return query_attribute(_smlir.format_name, self.attr_text())


def _widths_text(pos_width: int, crd_width: int) -> str:
    return f"posWidth = {pos_width}, crdWidth = {crd_width}"


@dataclass(frozen=True)
class Dense(Encoding):
    """Every value stored (a sparsifier then only zeroes values)."""

    def attr_text(self) -> str:
        return "#smlir.dense"


@dataclass(frozen=True)
class _IndexedEncoding(Encoding):
    """A format whose only parameters are its index bit widths."""

    pos_width: int = 32
    crd_width: int = 32
    _mnemonic = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        object.__setattr__(self, "pos_width", check_int(owner, "pos_width", self.pos_width))
        object.__setattr__(self, "crd_width", check_int(owner, "crd_width", self.crd_width))
        self._verify()

    def attr_text(self) -> str:
        return f"#smlir.{self._mnemonic}<{_widths_text(self.pos_width, self.crd_width)}>"


@dataclass(frozen=True)
class CSR(_IndexedEncoding):
    """Compressed sparse rows (batched for rank > 2)."""

    _mnemonic = "csr"


@dataclass(frozen=True)
class CSC(_IndexedEncoding):
    """Compressed sparse columns."""

    _mnemonic = "csc"


@dataclass(frozen=True)
class COO(_IndexedEncoding):
    """Coordinate list (one coordinate array per dimension)."""

    _mnemonic = "coo"


@dataclass(frozen=True)
class BSR(Encoding):
    """Block compressed sparse rows with `block = (rows, cols)` dense blocks."""

    block: tuple[int, int] = (4, 4)
    pos_width: int = 32
    crd_width: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "block", check_block("BSR", self.block))
        object.__setattr__(self, "pos_width", check_int("BSR", "pos_width", self.pos_width))
        object.__setattr__(self, "crd_width", check_int("BSR", "crd_width", self.crd_width))
        self._verify()

    def attr_text(self) -> str:
        return (f"#smlir.bsr<block = {int_list_literal(self.block)}, "
                f"{_widths_text(self.pos_width, self.crd_width)}>")


@dataclass(frozen=True)
class NM(Encoding):
    """n:m structured sparsity along the last dimension (2:4 for sparse tensor cores).

    The default sparsifier keeps the n largest magnitudes of every m.
    `rows=r > 1`: every r consecutive rows share one pattern (STen's grouped
    n:m; the default sparsifier then ranks positions by the group's summed
    |x|; the last group may hold fewer rows), and a linear reads each
    activation row once for the r weight rows.
    """

    n: int = 2
    m: int = 4
    crd_width: int = 8
    rows: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n", "m", "crd_width", "rows"):
            object.__setattr__(self, name, check_int("NM", name, getattr(self, name)))
        self._verify()

    def default_sparsifier(self) -> Sparsifier:
        return NMMagnitude(self.n, self.m, dim=-1, rows=self.rows)

    def attr_text(self) -> str:
        rows = f", rows = {self.rows}" if self.rows != 1 else ""
        return f"#smlir.nm<n = {self.n}, m = {self.m}, crdWidth = {self.crd_width}{rows}>"


@dataclass(frozen=True)
class ELL(Encoding):
    """ELLPACK: every row of a matrix stores `width` (column, value) pairs.

    A row's first `width` nonzeros (by column), padded with zeros at
    columns the row does not use where it has fewer; no positions. Alone,
    every row must fit (a longer row is a SpecError); as
    `Hybrid(ELL(width=k), COO())` the rest of each row goes to COO.
    `width` left out: picked when the weight is stored (alone: the longest
    row; in a Hybrid: the median row, see weights.ell_width).
    """

    width: int | None = None
    crd_width: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.width is not None:
            object.__setattr__(self, "width", check_int("ELL", "width", self.width))
        object.__setattr__(self, "crd_width", check_int("ELL", "crd_width", self.crd_width))
        self._verify()

    def attr_text(self) -> str:
        params = ([f"width = {self.width}"] if self.width is not None else []) + (
            [f"crdWidth = {self.crd_width}"] if self.crd_width != 32 else [])
        return f"#smlir.ell<{', '.join(params)}>" if params else "#smlir.ell"


# A block goes to Hybrid's block part when at least this fraction of it is
# nonzero. A value stored by the BSR micro-kernel costs ~0.45x one in CSR
# (cost_model.STORED_VALUE_COST, from benchmarks/formats.py's 768 -> 3072,
# 128 tokens), so a block pays in BSR from a fill of ~0.45 on: 0.5.
HYBRID_THRESHOLD = 0.5


@dataclass(frozen=True)
class Hybrid(Encoding):
    """SparseTIR's composable format: a matrix stored as the sum of two sparse parts.

    `Hybrid(BSR(block=(4, 4)), CSR())`: every block with at least
    `threshold` of its entries nonzero goes to the BSR part, every other
    nonzero to the CSR part; a linear runs both kernels into one output.
    `Hybrid(ELL(width=k), COO())`: each row's first k nonzeros in the ELL
    part (padded with zeros), the rest of the row in the COO part
    (`threshold` unused). The sparsifier (given here, not on the parts)
    prunes the whole weight before the split.
    """

    first: Encoding = field(default_factory=lambda: BSR())
    second: Encoding = field(default_factory=lambda: CSR())
    threshold: float = HYBRID_THRESHOLD

    def __post_init__(self) -> None:
        super().__post_init__()
        for which in ("first", "second"):
            part = getattr(self, which)
            if not isinstance(part, Encoding):
                raise SpecError(f"Hybrid: {which} part must be a sparse_mlir encoding (BSR(...), CSR()), "
                                f"got {part!r}")
            if part.sparsifier is not None or part.grad is not None:
                raise SpecError(f"Hybrid: its {which} part {part!r} has a sparsifier= or grad= of its own; "
                                "give the sparsifier to Hybrid(..., sparsifier=...): it prunes the whole weight "
                                "before the split")
        object.__setattr__(self, "threshold", check_number("Hybrid", "threshold", self.threshold))
        self._verify()   # two sparse parts, neither hybrid, ell first, threshold in [0, 1] (the C++ verifier)
        if not (isinstance(self.first, BSR) and isinstance(self.second, CSR)
                or isinstance(self.first, ELL) and isinstance(self.second, COO)):
            raise SpecError(f"Hybrid({self.first!r}, {self.second!r}): not yet implemented; Hybrid supports "
                            "Hybrid(BSR(block=(r, c)), CSR()) and Hybrid(ELL(width=k), COO())")
        if self.grad is not None:
            raise SpecError("Hybrid: grad= is not supported yet (its gradient has the stored positions of "
                            "both parts)")

    def attr_text(self) -> str:
        return (f"#smlir.hybrid<[{self.first.attr_text()}, {self.second.attr_text()}], "
                f"threshold = {f64_literal(self.threshold)}>")

    @property
    def parts(self) -> tuple[Encoding, Encoding]:
        return (self.first, self.second)


@dataclass(frozen=True)
class Auto(Encoding):
    """Let the compiler pick the format of a weight (`compile` replaces it).

    Per weight, from its nonzero pattern after `sparsifier` (left out: the
    weight's own zeros), the cost model picks dense, CSR, BSR, n:m or
    Hybrid(BSR, CSR) (sparse_mlir.compiler.auto_format); `sparsity_plan()`
    says which and why. Deterministic: the same weight gets the same format.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.grad is not None:
            raise SpecError("Auto: grad= is not supported (give the chosen format explicitly to train with one)")

    def attr_text(self) -> str:
        raise SpecError("Auto() stands for no attribute: compile() replaces it by the format it picks")

    @property
    def format_name(self) -> str:
        return "auto"
