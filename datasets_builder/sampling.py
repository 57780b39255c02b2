"""Distinct rows of small integers, drawn reproducibly, for splits that never share an example.

Every generated task reduces its inputs to a row of small integers (the digits of two operands, the bits of a parity
input, the input symbols of a semiautomaton). :class:`RowSpace` describes the rows a task can produce and
:func:`draw_distinct` draws blocks of distinct rows from it, optionally excluding rows already used by other splits.

Rows come from a stream of fixed-size chunks and are kept in order of first occurrence, so the first ``m`` rows drawn
do not depend on how many more are asked for: growing ``train`` leaves ``test`` unchanged when ``test`` is drawn first.
(The exception: a small space asked for more than a quarter of its rows is shuffled whole instead, see
``PERMUTE_LIMIT``, and crossing that line changes every row.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Spaces up to this many rows are shuffled whole when more than a quarter of them is needed, so that asking for
#: (nearly) every row of a small space costs one permutation rather than a coupon collector's wait.
PERMUTE_LIMIT = 1 << 22
#: Integers per draw of the rejection stream (a chunk holds ``STREAM_CELLS // width`` rows); it depends on the row
#: width only, so the stream, hence the rows chosen, never depends on the split sizes.
STREAM_CELLS = 1 << 21
#: Give up on a biased law after this many draws per requested row: its likely rows are exhausted.
MAX_DRAWS_PER_ROW = 64


@dataclass(frozen=True)
class RowSpace:
    """Rows of ``len(sizes)`` integers; position ``j`` takes the values ``offsets[j] .. offsets[j] + sizes[j] - 1``.

    Position 0 is the least significant when a row is read as a mixed-radix number (its index in the space).
    """

    sizes: tuple[int, ...]
    offsets: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.offsets) or not self.sizes:
            raise ValueError(
                f"a row space needs one size and one offset per position, got {self.sizes} and {self.offsets}."
            )
        if min(self.sizes) < 1 or min(self.offsets) < 0:
            raise ValueError(f"row space sizes {self.sizes} must be >= 1 and offsets {self.offsets} >= 0.")

    @classmethod
    def uniform(cls, length: int, alphabet: int) -> RowSpace:
        """``length`` positions, each in ``0 .. alphabet - 1``."""
        return cls((alphabet,) * length, (0,) * length)

    @property
    def size(self) -> int:
        """Number of distinct rows (a Python int: it may exceed 64 bits)."""
        return math.prod(self.sizes)

    @property
    def dtype(self) -> np.dtype:
        top = max(s + o for s, o in zip(self.sizes, self.offsets))
        return np.dtype(np.uint8 if top <= 256 else np.int32)

    def sample(self, rng: np.random.Generator, n: int, probabilities: np.ndarray | None = None) -> np.ndarray:
        """``n`` rows, positions independent: uniform, or each drawn from ``probabilities`` (one law shared by every
        position, which then must all have the same size). Returns an ``(n, len(sizes))`` array."""
        width = len(self.sizes)
        if probabilities is None:
            # A scalar bound and a narrow dtype draw several times faster than per-position int64 bounds.
            high = self.sizes[0] if len(set(self.sizes)) == 1 else np.asarray(self.sizes)
            rows = rng.integers(0, high, size=(n, width), dtype=self.dtype)
        else:
            if len(set(self.sizes)) != 1 or len(probabilities) != self.sizes[0]:
                raise ValueError(
                    f"a law of {len(probabilities)} probabilities cannot draw rows of sizes {self.sizes}."
                )
            rows = rng.choice(len(probabilities), size=(n, width), p=probabilities)
        if any(self.offsets):
            rows = rows + np.asarray(self.offsets)
        return rows.astype(self.dtype, copy=False)

    def from_index(self, index: np.ndarray) -> np.ndarray:
        """The rows whose mixed-radix indices are ``index`` (int64, only for spaces that fit in 63 bits)."""
        rows = np.empty((len(index), len(self.sizes)), dtype=self.dtype)
        rest = index.astype(np.int64)
        for j, (size, offset) in enumerate(zip(self.sizes, self.offsets)):
            rest, rows[:, j] = np.divmod(rest, size)
            rows[:, j] += offset
        return rows

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """One sortable key per row, equal iff the rows are: the row's index when the space fits in int64, else its
        bytes."""
        if self.size < 2**63:
            index = np.zeros(len(rows), dtype=np.int64)
            for j in reversed(range(len(self.sizes))):
                index = index * self.sizes[j] + (rows[:, j].astype(np.int64) - self.offsets[j])
            return index
        contiguous = np.ascontiguousarray(rows)
        return contiguous.view(np.dtype((np.void, contiguous.shape[1] * contiguous.itemsize))).ravel()


def draw_distinct(
    space: RowSpace,
    counts: Sequence[int],
    rng: np.random.Generator,
    *,
    exclude: np.ndarray | None = None,
    probabilities: np.ndarray | None = None,
    what: str = "rows",
) -> list[np.ndarray]:
    """Draw ``sum(counts)`` distinct rows of ``space`` and cut them into blocks of ``counts`` rows, in order.

    Args:
        space: the rows allowed.
        counts: the size of each block (each split).
        rng: the random stream; the same stream state gives the same rows.
        exclude: keys (from :meth:`RowSpace.keys`) of rows that must not be drawn, e.g. those of earlier splits.
        probabilities: a non-uniform law for every position (see :meth:`RowSpace.sample`); None is uniform.
        what: how the error message names a row (e.g. "operand pairs").

    Returns:
        One ``(count, width)`` array per count, pairwise disjoint and disjoint from ``exclude``.

    Raises:
        ValueError: more rows are asked for than the space (less the excluded rows) holds, or a biased law did not
            yield enough distinct rows within ``MAX_DRAWS_PER_ROW`` draws per row.
    """
    total = int(sum(counts))
    excluded = 0 if exclude is None else len(exclude)
    if total > space.size - excluded:
        raise ValueError(
            f"{total} examples were asked for but only {space.size - excluded} distinct {what} exist"
            f"{' beyond those of the other splits' if excluded else ''}; ask for at most that many."
        )
    if probabilities is None and space.size <= PERMUTE_LIMIT and 4 * (total + excluded) > space.size:
        rows = space.from_index(rng.permutation(space.size))
        rows = _first_distinct(space, rows, total, exclude)
    else:
        rows = _stream_distinct(space, total, rng, exclude, probabilities, what)
    bounds = np.cumsum([0, *counts])
    return [rows[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]


def _first_distinct(space: RowSpace, rows: np.ndarray, total: int, exclude: np.ndarray | None) -> np.ndarray:
    """Up to ``total`` rows of ``rows``: first occurrences only, excluded ones skipped, original order kept."""
    keys = space.keys(rows)
    unique_keys, first = np.unique(keys, return_index=True)
    if exclude is not None and len(exclude):
        first = first[~_in_sorted(unique_keys, np.sort(exclude))]
    return rows[np.sort(first)[:total]]


def _in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in ``sorted_keys`` (faster than ``np.isin`` when the latter is large)."""
    position = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[position] == keys


def _stream_distinct(
    space: RowSpace,
    total: int,
    rng: np.random.Generator,
    exclude: np.ndarray | None,
    probabilities: np.ndarray | None,
    what: str,
) -> np.ndarray:
    chunks: list[np.ndarray] = []
    drawn = 0
    # A first guess that covers the expected duplicates of a uniform law; biased laws top it up below.
    target = total + total // 16 + 1
    chunk_rows = max(256, STREAM_CELLS // len(space.sizes))
    give_up = MAX_DRAWS_PER_ROW * total + chunk_rows
    while True:
        while drawn < target:
            chunks.append(space.sample(rng, chunk_rows, probabilities))
            drawn += chunk_rows
        rows = _first_distinct(space, np.concatenate(chunks), total, exclude)
        if len(rows) == total:
            return rows
        if drawn >= give_up:
            raise ValueError(
                f"only {len(rows)} distinct {what} turned up in {drawn} draws from this input law, fewer than the "
                f"{total} asked for; ask for fewer examples, longer inputs or a less concentrated law."
            )
        draws_per_row = max(1, drawn // max(len(rows), 1))
        target = min(drawn + max(chunk_rows, 2 * (total - len(rows)) * draws_per_row), give_up)
