"""Reading stability from a run's curve (the methods league, issue 51): a run can reach the plateau and fall off it
late, and with a few seeds split between chance and the plateau a mean's t-interval spans the whole axis. So the league
reads each seed: the share of its late evaluations at the plateau, whether it stays there, and its curve drawn thin
under the median over seeds."""

from __future__ import annotations

from typing import Any


def late_share(points: list[float], bar: float) -> float | None:
    """The share of the late evaluations (the second half of ``points``, a run's held-out scores in order) at or above
    ``bar``; None for no evaluation."""
    late = points[len(points) // 2 :]
    return sum(em >= bar for em in late) / len(late) if late else None


def at_plateau(final: float | None, share: float | None, bar: float, share_needed: float) -> bool:
    """Whether a seed stays at the plateau: its final score at or above ``bar`` and at least ``share_needed`` of its
    late evaluations too."""
    return final is not None and final >= bar and share is not None and share >= share_needed


def median(values: list[float]) -> float:
    ordered, half = sorted(values), len(values) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def median_curve(axis: Any, curves: list[list[tuple[float, float]]], index: int, style: str, name: str) -> bool:
    """Each seed's curve thin and the median over seeds thick (at the measurements every seed has) on ``axis``, in
    colour ``index``; False (nothing drawn) for no curve."""
    curves = [one for one in curves if one]
    if not curves:
        return False
    color = f"C{index % 10}"
    for one in curves:
        axis.plot([x for x, _ in one], [y for _, y in one], color=color, linestyle=style, linewidth=0.6, alpha=0.35)
    length = min(len(one) for one in curves)
    xs = [curves[0][i][0] for i in range(length)]
    medians = [median([one[i][1] for one in curves]) for i in range(length)]
    axis.plot(xs, medians, color=color, linestyle=style, linewidth=2.0, label=f"{name}: median, seeds thin")
    return True
