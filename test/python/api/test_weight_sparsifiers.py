"""The numpy sparsifiers of sparse_mlir.compiler.weights against slow, obvious loops.

These are the references of the MLIR lowerings (scalar / block fraction,
transposable n:m), so their tie and NaN rules are pinned down here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier, pack


def _magnitude_order(values: list[float]) -> list[int]:
    """Indices by |x| descending, ties to the lower index, NaN last."""
    def rank_key(i: int) -> tuple[int, float, int]:
        v = abs(float(values[i]))
        return (1, 0.0, i) if math.isnan(v) else (0, -v, i)
    return sorted(range(len(values)), key=rank_key)


def _slow_transposable(w: np.ndarray, n: int, m: int) -> np.ndarray:
    out = np.zeros_like(w)
    rows, cols = w.shape
    for r0 in range(0, rows, m):
        for c0 in range(0, cols, m):
            tile = [w[r0 + e // m, c0 + e % m] for e in range(m * m)]
            in_row, in_col = [0] * m, [0] * m
            for e in _magnitude_order(tile):
                r, c = divmod(e, m)
                if in_row[r] < n and in_col[c] < n:
                    out[r0 + r, c0 + c] = w[r0 + r, c0 + c]
                    in_row[r] += 1
                    in_col[c] += 1
    return out


def _slow_scalar_fraction(w: np.ndarray, fraction: float) -> np.ndarray:
    flat = w.reshape(-1)
    keep = flat.size - int(np.floor(fraction * flat.size))
    out = np.zeros_like(flat)
    for i in _magnitude_order(list(flat))[:keep]:
        out[i] = flat[i]
    return out.reshape(w.shape)


def _tied_matrix(rng: np.random.Generator, shape: tuple[int, int], nan_fraction: float) -> np.ndarray:
    """Few distinct magnitudes (many ties, both signs, zeros) and some NaNs."""
    w = rng.integers(-3, 4, size=shape).astype(np.float32)
    w[rng.random(shape) < nan_fraction] = np.nan
    return w


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (3, 4), (2, 8)])
@pytest.mark.parametrize("seed", range(4))
def test_transposable_matches_the_slow_greedy(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for w in (rng.standard_normal((2 * m, 3 * m)).astype(np.float32),
              _tied_matrix(rng, (2 * m, 3 * m), nan_fraction=0.2)):
        got = apply_sparsifier(sm.NMMagnitude(n, m, transposable=True), w)
        np.testing.assert_array_equal(got, _slow_transposable(w, n, m))


def _slow_nm(w: np.ndarray, n: int, m: int) -> np.ndarray:
    out = np.zeros_like(w)
    for r in range(w.shape[0]):
        for c0 in range(0, w.shape[1], m):
            for e in _magnitude_order(list(w[r, c0:c0 + m]))[:n]:
                out[r, c0 + e] = w[r, c0 + e]
    return out


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (3, 4), (2, 8), (1, 16), (5, 20)])
@pytest.mark.parametrize("seed", range(3))
def test_nm_matches_the_slow_selection(n: int, m: int, seed: int) -> None:
    """The n largest |x| of every group of m, ties to the lower index, NaN last."""
    rng = np.random.default_rng(seed)
    for w in (rng.standard_normal((6, 3 * m)).astype(np.float32),
              _tied_matrix(rng, (6, 3 * m), nan_fraction=0.2)):
        got = apply_sparsifier(sm.NMMagnitude(n, m), w)
        np.testing.assert_array_equal(got, _slow_nm(w, n, m))


def _slow_grouped_nm(w: np.ndarray, n: int, m: int, rows: int) -> np.ndarray:
    """Per group of `rows` rows and `m` columns: the n columns with the
    largest sum of |x| over the rows (summed in order, in w's precision),
    ties to the lower column, NaN last, kept in every row; the last group
    sums the rows it has."""
    out = np.zeros_like(w)
    for r0 in range(0, w.shape[0], rows):
        for c0 in range(0, w.shape[1], m):
            sums = []
            for c in range(m):
                total = abs(w[r0, c0 + c])
                for r in range(1, min(rows, w.shape[0] - r0)):
                    total = total + abs(w[r0 + r, c0 + c])
                sums.append(total)
            for c in _magnitude_order(sums)[:n]:
                out[r0:r0 + rows, c0 + c] = w[r0:r0 + rows, c0 + c]
    return out


@pytest.mark.parametrize("n,m,rows", [(2, 4, 2), (2, 4, 4), (1, 4, 3), (3, 8, 8)])
@pytest.mark.parametrize("extra", [0, 1, -1], ids=["whole", "one-row-left", "one-row-short"])
@pytest.mark.parametrize("seed", range(3))
def test_grouped_nm_matches_the_slow_selection(n: int, m: int, rows: int, extra: int, seed: int) -> None:
    """rows > 1: one pattern per row group, by the group's summed |x|;
    where rows does not divide the rows, the last group is smaller."""
    rng = np.random.default_rng(seed)
    shape = (2 * rows + extra, 3 * m)
    for w in (rng.standard_normal(shape).astype(np.float32),
              _tied_matrix(rng, shape, nan_fraction=0.1)):
        got = apply_sparsifier(sm.NMMagnitude(n, m, rows=rows), w)
        np.testing.assert_array_equal(got, _slow_grouped_nm(w, n, m, rows))


def test_grouped_nm_partial_last_group_ranks_by_its_own_rows() -> None:
    """6 rows, rows = 4: rows 4 and 5 keep their own top pair, whatever
    rows 0..3 keep; a batched weight starts its groups again per matrix."""
    w = np.zeros((6, 4), np.float32)
    w[:4] = [9, 8, 1, 1]
    w[4:] = [1, 1, 5, 6]
    got = apply_sparsifier(sm.NMMagnitude(2, 4, rows=4), w)
    np.testing.assert_array_equal(got[:4] != 0, np.tile([True, True, False, False], (4, 1)))
    np.testing.assert_array_equal(got[4:] != 0, np.tile([False, False, True, True], (2, 1)))
    batched = apply_sparsifier(sm.NMMagnitude(2, 4, rows=4), np.stack([w, w]))
    np.testing.assert_array_equal(batched, np.stack([got, got]))


def test_grouped_nm_rejects_bad_shapes() -> None:
    with pytest.raises(sm.SpecError, match="needs dim to be the last dimension"):
        apply_sparsifier(sm.NMMagnitude(2, 4, dim=0, rows=2), np.ones((8, 8), np.float32), name="w")


def test_grouped_nm_packing_shares_positions() -> None:
    """NM(rows=r) storage: a row group's positions are its rows' union (a
    row with a zero at a kept position stores that zero); rows that do not
    share a pattern are refused, naming the tensor."""
    w = np.zeros((2, 8), np.float32)
    w[0, [1, 2, 4, 7]] = [1, 2, 3, 4]
    w[1, [2, 7]] = [5, 6]  # its group-0 pattern is row 0's {1, 2}; group 1 {4, 7}
    positions, values = pack(sm.NM(2, 4, rows=2), w, name="fc.weight")
    np.testing.assert_array_equal(positions, [1, 2, 0, 3, 1, 2, 0, 3])
    np.testing.assert_array_equal(values, [1, 2, 3, 4, 0, 5, 0, 6])
    w[1, 3] = 7  # group 0 of the pair now holds 3 distinct positions
    with pytest.raises(sm.SpecError, match="fc.weight: its rows do not share one 2:4 pattern per 2 rows"):
        pack(sm.NM(2, 4, rows=2), w, name="fc.weight")


def test_grouped_nm_packing_partial_last_group() -> None:
    """rows = 2 over 3 rows: the last row stores its own positions."""
    w = np.zeros((3, 4), np.float32)
    w[0, [0, 1]] = [1, 2]
    w[1, [1]] = [3]
    w[2, [2, 3]] = [4, 5]
    positions, values = pack(sm.NM(2, 4, rows=2), w, name="fc.weight")
    np.testing.assert_array_equal(positions, [0, 1, 0, 1, 2, 3])
    np.testing.assert_array_equal(values, [1, 2, 0, 3, 4, 5])


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (2, 8)])
def test_transposable_invariants(n: int, m: int) -> None:
    """<= n kept per row and column of a tile; a dropped element's row or column is full."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4 * m, 4 * m)) + 1.0  # no zeros: kept <=> nonzero
    kept = apply_sparsifier(sm.NMMagnitude(n, m, transposable=True), w) != 0
    tiles = kept.reshape(4, m, 4, m).transpose(0, 2, 1, 3)  # [tile row, tile col, r, c]
    per_row, per_col = tiles.sum(axis=3), tiles.sum(axis=2)
    assert per_row.max() <= n and per_col.max() <= n
    dropped = ~tiles
    full_row = np.broadcast_to((per_row == n)[..., :, None], tiles.shape)
    full_col = np.broadcast_to((per_col == n)[..., None, :], tiles.shape)
    assert (full_row | full_col)[dropped].all()
    # So the weight and its transpose are n:m along their last dimension.
    assert (kept.reshape(-1, m).sum(axis=1) <= n).all()
    assert (kept.T.reshape(-1, m).sum(axis=1) <= n).all()


def test_transposable_tie_and_nan_order() -> None:
    """All equal: row-major greedy keeps the 'staircase'; NaN goes last, kept only if room is left."""
    w = np.ones((4, 4), np.float32)
    got = apply_sparsifier(sm.NMMagnitude(2, 4, transposable=True), w) != 0
    expected = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], bool)
    np.testing.assert_array_equal(got, expected)
    w[0, 0] = np.nan  # now visited last: the rest of row 0 / column 0 fills first
    got = apply_sparsifier(sm.NMMagnitude(2, 4, transposable=True), w)
    assert got[0, 0] == 0 and not np.isnan(got[0, 0])
    np.testing.assert_array_equal(got != 0, _slow_transposable(w, 2, 4) != 0)


def test_transposable_rejects_bad_shapes() -> None:
    with pytest.raises(sm.SpecError, match="needs a matrix"):
        apply_sparsifier(sm.NMMagnitude(2, 4, transposable=True), np.ones((2, 4, 4)))
    with pytest.raises(sm.SpecError, match="divide both dimensions"):
        apply_sparsifier(sm.NMMagnitude(2, 4, transposable=True), np.ones((6, 8)))


# > 4096 entries: selection; >= 65536: selection within a sampled band
@pytest.mark.parametrize("shape", [(6, 10), (80, 120), (300, 260)], ids=["sorted", "selected", "banded"])
@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_scalar_fraction_matches_the_slow_sort(fraction: float, shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(3)
    w = _tied_matrix(rng, shape, nan_fraction=0.15)
    got = apply_sparsifier(sm.ScalarFraction(fraction), w)
    np.testing.assert_array_equal(got, _slow_scalar_fraction(w, fraction))
    assert np.count_nonzero(got == 0) >= int(np.floor(fraction * w.size))


@pytest.mark.parametrize("values", ["normal", "two-valued", "constant", "one-outlier"])
def test_kth_largest_by_band_is_exact(values: str) -> None:
    """The band's selection against a full partition, where the sampled band
    holds the cut and where it cannot (every value tied, skewed samples)."""
    from sparse_mlir.compiler.weights import _kth_largest

    rng = np.random.default_rng(7)
    size = 100_003
    ranked = {"normal": np.abs(rng.standard_normal(size)).astype(np.float32),
              "two-valued": rng.integers(0, 2, size).astype(np.float32),
              "constant": np.full(size, 0.25, np.float32),
              "one-outlier": np.r_[np.full(size - 1, 1.0, np.float32), np.float32(9.0)]}[values]
    for keep in (1, 2, 17, size // 10, size // 2, size - 3, size):
        assert _kth_largest(ranked, keep) == np.partition(ranked, size - keep)[size - keep], keep


def test_scalar_fraction_ties_keep_the_lower_index_and_nan_is_dropped_first() -> None:
    w = np.array([[2.0, -1.0, 1.0, np.nan], [1.0, -2.0, np.nan, 0.5]], np.float32)
    got = apply_sparsifier(sm.ScalarFraction(0.5), w)  # keep 4 of 8
    expected = np.array([[2.0, -1.0, 1.0, 0.0], [0.0, -2.0, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(got, expected)
    got = apply_sparsifier(sm.ScalarFraction(0.125), w)  # keep 7: one NaN (the later) dropped
    assert np.isnan(got[0, 3]) and got[1, 2] == 0


def test_block_fraction_ties_keep_the_lower_tile() -> None:
    w = np.ones((4, 8), np.float32)  # 2 x 2 tiles of 2 x 4, all with norm 8
    got = apply_sparsifier(sm.BlockFraction(0.5, block=(2, 4)), w)
    expected = np.zeros_like(w)
    expected[:2, :] = 1.0  # tiles 0 and 1 (row-major) kept
    np.testing.assert_array_equal(got, expected)


def test_block_fraction_nan_tile_is_dropped_first() -> None:
    w = np.full((4, 4), 0.1, np.float32)
    w[0, 0] = np.nan  # tile 0
    got = apply_sparsifier(sm.BlockFraction(0.25, block=(2, 2)), w)
    assert (got[:2, :2] == 0).all() and (got[2:, :] == np.float32(0.1)).all()


def test_block_fraction_norms_are_accumulated_in_f64() -> None:
    """In f32, 1e8 + 1 == 1e8: the tiles would tie and the lower one win."""
    w = np.zeros((2, 4), np.float32)
    w[0, 0] = 1e8           # tile 0: norm 1e8
    w[0, 2], w[0, 3] = 1e8, 1.0  # tile 1: norm 1e8 + 1 (in f64)
    assert np.float32(1e8) + np.float32(1.0) == np.float32(1e8)
    got = apply_sparsifier(sm.BlockFraction(0.5, block=(2, 2)), w)
    assert got[0, 0] == 0 and got[0, 2] == np.float32(1e8)


@pytest.mark.parametrize("dtype,threshold,values,kept", [
    (np.float32, 0.7, [0.7, -0.7, 0.75], [False, False, True]),   # f32(0.7) = 0.69999998 < 0.7
    (np.float16, 0.1, [0.1, 0.2], [False, True]),                 # f16(0.1) = 0.09998 < 0.1
    (np.float64, 0.7, [0.7, float(np.nextafter(0.7, 0.0))], [True, False]),
])
def test_threshold_compares_exactly_as_the_compiled_code(dtype: type, threshold: float, values: list[float],
                                                         kept: list[bool]) -> None:
    """|x| >= v in exact arithmetic, as compiled code compares on an
    intermediate (numpy rounded v to x's dtype first: f32(0.7) >= 0.7 held)."""
    w = np.array(values, dtype=dtype)
    assert (apply_sparsifier(sm.Threshold(threshold), w, "w") != 0).tolist() == kept


@pytest.mark.parametrize("sparsifier", [sm.ScalarFraction(0.7), sm.NMMagnitude(2, 4)], ids=["fraction", "2:4"])
def test_pruned_weights_are_64_byte_aligned_and_pruned_inf_is_zero(sparsifier) -> None:
    """The pruned weight comes 64-byte aligned (torch's side reads it without
    a copy); where w holds inf the masked product would give NaN: zeros."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    w[3, :4] = [np.inf, 1e-3, -np.inf, 2e-3]    # the infinities are kept, the small ones pruned
    got = apply_sparsifier(sparsifier, w)
    assert got.ctypes.data % 64 == 0 and got.flags.c_contiguous and got.dtype == np.float32
    assert not np.isnan(got).any() and np.isinf(got[3, [0, 2]]).all() and (got[3, [1, 3]] == 0).all()
    kept = got != 0
    np.testing.assert_array_equal(got[kept], w[kept])
    assert not np.signbit(got[~kept]).any()   # +0.0 where pruned, never -0.0
