"""The results kit: what every ``results/<study>/make_results.py`` needs besides its own tables, plots and claim rules.

* reading run records: :func:`read_json`, :func:`record_folders`, :data:`RUN_NAME` and :func:`unrecorded_runs` (a
  league's ``<task>_<what>_s<seed>`` runs that its sweep defines and the harness has not recorded);
* tables: :func:`fmt` (numbers as the tables print them), :func:`markdown_table` and :func:`write_table`
  (``name.csv`` + ``name.md``), :func:`section` and :func:`fill_section` (a generated part of a hand-written README);
* curves: :func:`plateau_median` (a series' level over :data:`PLATEAU_WINDOW` of its τ; τ itself is
  :func:`hf_icot.diagnostics.tau.crossing`, the one rule the training runs and the analyses share);
* plots: :func:`pyplot` (matplotlib on the Agg backend, so scripts run without a screen), :func:`error_bars` (a series
  of :class:`~hf_icot.studies.statistics.Summary` points with their intervals), :func:`mark_steps` (stage boundaries
  or a transition as dashed vertical lines) and :func:`save_figure`.

Plots follow one rule: every axis titled, a legend where there is more than one series, error bars wherever a point
stands for several seeds.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_icot.studies.statistics import Summary


def read_json(path: str | os.PathLike, default: Any = None) -> Any:
    """The JSON content of ``path``, or ``default`` when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else default


def record_folders(runs_dir: str | os.PathLike) -> list[Path]:
    """The run record folders in ``runs_dir`` (``results/<study>/runs``), sorted by name; none if it is missing."""
    folder = Path(runs_dir)
    if not folder.is_dir():
        return []
    return sorted(entry for entry in folder.iterdir() if entry.is_dir() and not entry.name.startswith("."))


#: A league run's name (``results/curricula``, ``results/methods``): ``<task>_<what>_s<seed>``.
RUN_NAME = re.compile(r"^(?P<task>[a-z0-9]+)_(?P<what>.+)_s(?P<seed>\d+)$")


def unrecorded_runs(sweep_folder: str | os.PathLike) -> list[str]:
    """The names (with their seed) of the runs ``sweep_folder/runs.yaml`` defines that the harness has not recorded
    as done; none without a sweep file there (records gathered elsewhere)."""
    from hf_icot.studies.sweep import SWEEP_FILE, load_sweep

    if not (Path(sweep_folder) / SWEEP_FILE).is_file():
        return []
    return [run.name for run in load_sweep(sweep_folder).runs if run.state() != "recorded"]


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: ``""`` for None, a float with ``digits`` decimals, anything else as ``str``."""
    if value is None:
        return ""
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _cell_text(cell: Callable[[Any], str] | None) -> Callable[[Any], str]:
    return cell or (lambda value: "" if value is None else str(value))


def markdown_table(rows: Sequence[Mapping[str, Any]], cell: Callable[[Any], str] | None = None) -> str:
    """``rows`` as a Markdown table (the columns: every key, in order of first appearance; ``cell`` formats each
    value, by default as it is with None empty); ``_no runs_`` for no rows."""
    if not rows:
        return "_no runs_\n"
    text = _cell_text(cell)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(text(row.get(column)) for column in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_table(
    rows: Sequence[Mapping[str, Any]],
    out: str | os.PathLike,
    name: str,
    cell: Callable[[Any], str] | None = None,
) -> str:
    """Write ``rows`` as ``out/name.csv`` and ``out/name.md`` (the columns: every key, in order of first appearance)
    and return the Markdown; nothing is written for no rows (the Markdown is then ``_no runs_``).

    ``cell`` formats each value of both files (e.g. :func:`fmt`); by default values are written as they are
    (``None`` as an empty cell)."""
    if not rows:
        return markdown_table(rows)
    text = _cell_text(cell)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = Path(out)
    with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, columns)
        writer.writeheader()
        writer.writerows({key: text(row.get(key)) for key in columns} for row in rows)
    markdown = markdown_table(rows, cell)
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    return markdown


def _section(path: Path, name: str) -> tuple[str, int, int]:
    content = path.read_text(encoding="utf-8")
    begin, end = f"<!-- begin {name} -->\n", f"<!-- end {name} -->"
    start, stop = content.find(begin), content.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path} has no section {name!r}: it needs a line {begin.strip()} before a line {end}.")
    return content, start + len(begin), stop


def section(path: str | os.PathLike, name: str) -> str:
    """What lies between the lines ``<!-- begin NAME -->`` and ``<!-- end NAME -->`` of the Markdown file at
    ``path``; a ValueError naming the file and the section when either line is missing."""
    content, start, stop = _section(Path(path), name)
    return content[start:stop]


def fill_section(path: str | os.PathLike, name: str, text: str) -> None:
    """Put ``text`` in place of the :func:`section` ``name`` of the Markdown file at ``path``, leaving the rest of
    the file as it is (a README whose prose is written by hand around tables a script regenerates)."""
    content, start, stop = _section(Path(path), name)
    Path(path).write_text(content[:start] + text.strip("\n") + "\n" + content[stop:], encoding="utf-8")


#: The plateau before a transition at τ: the measurements from 0.25 τ to 0.75 τ.
PLATEAU_WINDOW = (0.25, 0.75)


def plateau_median(steps, values, tau: float) -> float | None:
    """The plateau's level: the median of ``values`` over the measurements in :data:`PLATEAU_WINDOW` · τ (None if
    there is none)."""
    import numpy as np

    steps, values = np.asarray(steps), np.asarray(values)
    window = values[(steps >= PLATEAU_WINDOW[0] * tau) & (steps <= PLATEAU_WINDOW[1] * tau)]
    return float(np.median(window)) if len(window) else None


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no screen needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def error_bars(ax: Any, x: Sequence[float], points: Iterable[Summary | None], **style: Any) -> Any:
    """Plot the means of ``points`` at ``x`` with their intervals as error bars (a point of one seed has none; a
    None point is left out); returns matplotlib's container."""
    kept = [(position, point) for position, point in zip(x, points) if point is not None]
    xs = [position for position, _ in kept]
    means = [point.mean for _, point in kept]
    below = [0.0 if point.low is None else point.mean - point.low for _, point in kept]
    above = [0.0 if point.high is None else point.high - point.mean for _, point in kept]
    style.setdefault("capsize", 3)
    style.setdefault("marker", "o")
    return ax.errorbar(xs, means, yerr=[below, above], **style)


def mark_steps(ax: Any, steps: Iterable[float], label: str | None = None, **style: Any) -> None:
    """Dashed vertical lines at ``steps`` (stage boundaries, a transition); ``label`` names them once in the
    legend."""
    style = {"color": "grey", "linestyle": "--", "linewidth": 0.8, **style}
    for index, step in enumerate(steps):
        ax.axvline(step, label=label if index == 0 else None, **style)


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save ``fig`` (tight layout) to ``path`` and close it; returns the path."""
    plt = pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return Path(path)
