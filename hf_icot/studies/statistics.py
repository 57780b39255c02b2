"""Aggregation over seeds: the mean, the spread and a 95% interval of one sweep point's values.

:func:`summarize` is what every study's tables and error bars read. The interval is Student's t (the default: exact
for normal values, and the usual choice with 3–10 seeds) or a percentile bootstrap of the mean (no normality assumed;
seeded, so the same values give the same interval). One value gives no interval (``low`` / ``high`` None), never a
made-up one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

METHODS = ("t", "bootstrap")


@dataclass(frozen=True)
class Summary:
    """One point over its seeds.

    Attributes:
        n: how many values (seeds) the point has.
        mean, std: their mean and sample standard deviation (``std`` 0.0 for one value).
        minimum, maximum: the spread.
        low, high: the interval of the mean at ``confidence`` (None for one value).
        method: ``"t"`` or ``"bootstrap"`` (:func:`summarize`), ``"welch"`` (:func:`difference`) or
            ``"clopper-pearson"`` (:func:`success_rate`).
        confidence: e.g. 0.95.
    """

    n: int
    mean: float
    std: float
    minimum: float
    maximum: float
    low: float | None
    high: float | None
    method: str
    confidence: float

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (None for one value): the ± of a table and the error bar of a plot."""
        return None if self.low is None else (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, digits: int = 3) -> str:
        """``mean ± half-width (n)``, or ``mean (n=1)`` for one value: the cell of a table."""
        if self.low is None:
            return f"{self.mean:.{digits}f} (n=1)"
        return f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f} (n={self.n})"


def summarize(
    values: Iterable[float],
    confidence: float = 0.95,
    method: str = "t",
    n_boot: int = 10_000,
    seed: int = 0,
) -> Summary:
    """Mean, spread and interval of ``values`` (one per seed).

    Args:
        values: finite numbers; None entries are not allowed (filter the runs that lack the value first).
        confidence: the interval's level, in (0, 1).
        method: ``"t"`` (mean ± t quantile × standard error) or ``"bootstrap"`` (percentile interval of the means of
            ``n_boot`` resamples drawn with ``seed``).

    Raises:
        ValueError: no values, a value that is not a finite number, ``confidence`` outside (0, 1), or an unknown
            method.
    """
    data = [float(v) for v in values]
    if not data:
        raise ValueError("summarize needs at least one value; the point has no runs with this figure.")
    if not all(math.isfinite(v) for v in data):
        raise ValueError(f"summarize got {data}; every value must be a finite number.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not allowed; it must lie in (0, 1), e.g. 0.95.")
    if method not in METHODS:
        raise ValueError(f"interval method {method!r} is unknown; allowed: {', '.join(METHODS)}.")
    array = np.asarray(data)
    mean, n = float(array.mean()), len(data)
    std = float(array.std(ddof=1)) if n > 1 else 0.0
    low = high = None
    if n > 1 and method == "t":
        from scipy import stats

        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    elif n > 1:
        rng = np.random.default_rng(seed)
        means = array[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
        low, high = (float(q) for q in np.quantile(means, [0.5 - confidence / 2, 0.5 + confidence / 2]))
    return Summary(n, mean, std, float(array.min()), float(array.max()), low, high, method, confidence)


def group_by(records: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> dict[tuple, list[Mapping[str, Any]]]:
    """The records sharing the values of ``keys`` (a sweep point), in order of first appearance."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(record.get(key) for key in keys), []).append(record)
    return groups


def summarize_points(
    records: Iterable[Mapping[str, Any]],
    keys: Sequence[str],
    value: str | Callable[[Mapping[str, Any]], float | None],
    **options: Any,
) -> list[dict[str, Any]]:
    """One row per sweep point: its ``keys``, the seeds it has (``seeds``) and :func:`summarize` of ``value`` (a
    record key or a function of the record) over the records that have it (``summary``; None if none has)."""
    read = value if callable(value) else (lambda record: record.get(value))
    rows = []
    for point, members in group_by(records, keys).items():
        values = [read(record) for record in members]
        present = [v for v in values if v is not None]
        rows.append(
            {
                **dict(zip(keys, point)),
                "seeds": len(members),
                "summary": summarize(present, **options) if present else None,
            }
        )
    return rows


def difference(first: Iterable[float], second: Iterable[float], confidence: float = 0.95) -> Summary:
    """``mean(first) - mean(second)`` with Welch's t-interval (unequal variances; one value per seed on each side).

    ``n`` is the smaller side's count and ``std`` the difference's standard error; with fewer than two values on a
    side there is no interval.

    Raises:
        ValueError: an empty side, or a value that is not a finite number.
    """
    a, b = summarize(first, confidence), summarize(second, confidence)
    delta = a.mean - b.mean
    if a.n < 2 or b.n < 2:
        return Summary(min(a.n, b.n), delta, 0.0, delta, delta, None, None, "welch", confidence)
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Summary(min(a.n, b.n), delta, 0.0, delta, delta, delta, delta, "welch", confidence)
    from scipy import stats

    dof = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return Summary(min(a.n, b.n), delta, se, delta, delta, delta - half, delta + half, "welch", confidence)


def success_rate(successes: int, trials: int, confidence: float = 0.95) -> Summary:
    """The share of ``trials`` (seeds) that succeeded, with the exact (Clopper-Pearson) binomial interval, which
    stays inside [0, 1] where a t-interval over 0/1 values would not (10 seeds, all failing: [0, 0.31]).

    Raises:
        ValueError: ``trials`` < 1, or ``successes`` outside 0 .. ``trials``.
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(
            f"success_rate got {successes} of {trials}; it needs trials >= 1 and 0 <= successes <= trials."
        )
    from scipy import stats

    interval = stats.binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
    rate = successes / trials
    std = math.sqrt(rate * (1 - rate))  # of one trial's 0/1 outcome
    minimum, maximum = float(successes == trials), float(successes > 0)  # of the 0/1 outcomes
    return Summary(trials, rate, std, minimum, maximum, interval.low, interval.high, "clopper-pearson", confidence)
