"""The marginals study's run records read into one row per run (``runs.csv``) and one row per sweep point over its
seeds (``points.csv``); the figures every table, plot and claim of ``make_results.py`` reads.

Times are in optimiser steps. A crossing (τ, the step the training loss falls below 0.05) is interpolated linearly
between the two measurements around it — in the loss for τ, in log loss for the training loss, whose fall is
exponential — so its resolution is finer than the measurement interval; ``tau_resolution`` keeps that interval, and a
run measured more finely than every 50 steps also gives ``tau_from_every_50``, the crossing its every-50th-step rows
alone give: the interpolation's error at the first round's interval, measured.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from hf_icot.diagnostics.tau import crossing
from hf_icot.publishing.run_files import TRAINING_LOG_FILE
from hf_icot.studies.report import PLATEAU_WINDOW, plateau_median, read_json
from hf_icot.studies.statistics import summarize

#: a measured Δz counts as "on" above this fraction of log K; a series' onset is its first step past the midpoint
#: between its start and its final value.
DZ_ONSET_FRACTION = 0.1
SOLVED_LOSS = 0.05
#: C1's sharpness test: from >= HIGH · log K to < LOW · log K (its plateau: the kit's PLATEAU_WINDOW of τ)
DROP_HIGH, DROP_LOW = 0.9, 0.1
#: what a sweep point is: the run's parameters but its seed
POINT_KEYS = ("direction", "schedule", "setup", "K", "n_b", "D", "lr", "batch")


def _read_csv(path: Path) -> list[dict[str, float]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as stream:
        return [
            {k: float(v) if v not in ("", None) else math.nan for k, v in row.items()}
            for row in csv.DictReader(stream)
        ]


def load_run(folder: Path) -> dict:
    """A run folder's record, its diagnostics rows, per-group accuracies, training losses and ablation."""
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    run["name"] = folder.name
    run["direction"] = run["task"].get("direction", "bz_to_a")
    # the first round's runs (before run.json recorded it) all ran marginals.yaml: constant lr, no clipping
    run["schedule_name"] = (run.get("schedule") or {}).get("lr_scheduler_type", "constant")
    run["arguments"] = run.get("diagnostics") or {}  # the recipe's own arguments (run.json "diagnostics")
    run["diagnostics"] = _read_csv(folder / "diagnostics.csv")
    run["groups"] = _read_csv(folder / "group_accuracy.csv")
    run["hessian"] = _read_csv(folder / "hessian.csv")
    history = json.loads((folder / TRAINING_LOG_FILE).read_text(encoding="utf-8"))
    run["losses"] = [(entry["step"], entry["loss"]) for entry in history if "loss" in entry]
    run["ablation"] = read_json(folder / "ablation.json")
    # the first round's adopted runs keep wall_time.json; the harness's own records carry it in sweep.json
    run["wall_s"] = (read_json(folder / "wall_time.json") or read_json(folder / "sweep.json") or {}).get("wall_s")
    return run


def series(run: dict, column: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in run["diagnostics"] if column in r and not math.isnan(r[column])]
    return np.array([r["step"] for r in rows]), np.array([r[column] for r in rows])


def midpoint_onset(steps: np.ndarray, values: np.ndarray) -> float:
    """The first step where a rising series passes halfway from its first to its last value."""
    if len(values) < 2 or values[-1] <= values[0]:
        return math.nan
    above = np.nonzero(values >= (values[0] + values[-1]) / 2)[0]
    return float(steps[above[0]])


def selector_head(run: dict) -> tuple[str, np.ndarray, np.ndarray]:
    """The layer-0 head whose attention to the selector grew most, and its series ("" without selector attention)."""
    columns = [c for c in (run["diagnostics"] or [{}])[0] if c.startswith("attn_z_l0h")]
    if not columns:
        return "", np.array([]), np.array([])
    best = max(columns, key=lambda c: series(run, c)[1][-1] - series(run, c)[1][0])
    return best, *series(run, best)


def switch_steps(run: dict, threshold: float = 0.8) -> np.ndarray:
    """Per base, the first measured step at which its accuracy reaches ``threshold`` (NaN if never)."""
    rows = run["groups"]
    if not rows:
        return np.array([])
    steps = np.array([r["step"] for r in rows])
    switches = []
    for group in [c for c in rows[0] if c != "step"]:
        reached = np.nonzero(np.array([r[group] for r in rows]) >= threshold)[0]
        switches.append(float(steps[reached[0]]) if len(reached) else math.nan)
    return np.array(switches)


def share_switched_at(run: dict, step: float, threshold: float = 0.8) -> float | None:
    """The share of measured bases whose accuracy, interpolated linearly between the measurements around ``step``,
    is >= ``threshold`` there; None without per-base records or when ``step`` lies past the last measurement."""
    rows = run["groups"]
    if not rows or step > rows[-1]["step"]:
        return None
    steps = np.array([r["step"] for r in rows])
    groups = [c for c in rows[0] if c != "step"]
    accuracy = [np.interp(step, steps, [r[g] for r in rows]) for g in groups]
    return float(np.mean(np.array(accuracy) >= threshold - 1e-9))


def switched_shares(run: dict, tau: float | None, threshold: float = 0.8) -> dict:
    """C8's reading in the study's terms: the share of measured bases at >= ``threshold`` accuracy at τ/2 and at τ
    (each base's accuracy interpolated between the measurements around those steps)."""
    shares = {"bases_at_80pct_half_tau": "", "bases_at_80pct_tau": ""}
    if not tau:
        return shares
    for key, step in (("bases_at_80pct_half_tau", tau / 2), ("bases_at_80pct_tau", tau)):
        share = share_switched_at(run, step, threshold)
        shares[key] = round(share, 2) if share is not None else ""
    return shares


def removed_heads(run: dict) -> tuple[list[str], int]:
    """The heads trained zeroed (``["l0h2"]``; none for most runs) and the step from which."""
    arguments = run.get("arguments", {})
    heads = ["l{}h{}".format(*spec.split(":")) for spec in arguments.get("ablate_heads") or []]
    return heads, int(arguments.get("ablate_from_step") or 0)


def variant(run: dict) -> str:
    """``study`` or the study settings this run changes (``gpt2_init``, ``dropout``, ``free_first_chars``,
    ``ablate_<heads>_from<step>`` for heads zeroed during training); the free first characters of a_to_b's questions
    are the study's own choice there, not a change."""
    model = run.get("model", {})
    changed = []
    if model.get("initializer_range", 0.0707) != 0.0707 or model.get("tie_word_embeddings", False):
        changed.append("gpt2_init")
    if model.get("resid_pdrop", 0.0) > 0:
        changed.append("dropout")
    if not run["task"].get("distinct_first_chars", True) and run["direction"] == "bz_to_a":
        changed.append("free_first_chars")
    heads, start = removed_heads(run)
    if heads:
        changed.append(f"ablate_{'+'.join(heads)}_from{start}")
    return "+".join(changed) or "study"


def _round(value: float | None, digits: int = 3):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), digits)


def candidate_figures(run: dict) -> dict:
    """τ interpolated, the plateau's candidate loss against log K, and the width of the drop (C1)."""
    log_k = run["log_k"]
    steps, cand = series(run, "candidate_loss")
    tau = crossing(steps, cand, run.get("tau_fraction", 0.5) * log_k) if len(cand) else None
    figures = {"tau": _round(tau[0], 1) if tau else "", "tau_resolution": tau[1] if tau else ""}
    # how well the interpolation does at the first round's 50 steps: the crossing of this run's every-50th-step rows
    coarse = crossing(steps[steps % 50 == 0], cand[steps % 50 == 0], run.get("tau_fraction", 0.5) * log_k)
    figures["tau_from_every_50"] = _round(coarse[0], 1) if tau and tau[1] < 50 and coarse else ""
    figures.update(plateau_candidate_over_log_k="", plateau_candidate_minus_log_k="", plateau_min_over_log_k="")
    figures["drop_width_over_tau"] = ""
    if not tau or tau[0] <= 0:
        return figures
    t = tau[0]
    level = plateau_median(steps, cand, t)
    if level is not None:
        figures.update(
            plateau_candidate_over_log_k=_round(level / log_k), plateau_candidate_minus_log_k=_round(level - log_k)
        )
    # descriptive, not C1's rule: the lowest the candidate loss comes after step 0 up to the window's end (0.75 τ)
    before = cand[(steps > 0) & (steps <= PLATEAU_WINDOW[1] * t)]
    figures["plateau_min_over_log_k"] = _round(before.min() / log_k) if len(before) else ""
    high = steps[(steps < t) & (cand >= DROP_HIGH * log_k)]
    low = steps[(steps > t) & (cand < DROP_LOW * log_k)]
    if len(high) and len(low):
        figures["drop_width_over_tau"] = _round((low[0] - high[-1]) / t)
    return figures


def summarise(run: dict) -> dict:
    """One row of ``runs.csv``."""
    log_k = run["log_k"]
    row = {"run": run["name"], "direction": run["direction"], "schedule": run["schedule_name"], "setup": variant(run),
           "K": run["k"], "n_b": run["n_bases"], "D": run["dataset_size"], "lr": run["learning_rate"],
           "batch": run["batch_size"], "seed": run["seed"], "steps": run["max_steps"], "log_K": round(log_k, 3),
           "tau_measured": run["tau"] if run["tau"] is not None else ""}  # fmt: skip
    row.update(candidate_figures(run))
    tau = row["tau"] or None
    steps, first = series(run, "first_token_loss_clean")
    plateau = plateau_median(steps, first, tau) if tau else None
    row["plateau_first_token_loss"] = _round(plateau) if plateau is not None else ""
    dz_steps, dz = series(run, "z_shuffle_gap")
    dz_on = dz_steps[dz > DZ_ONSET_FRACTION * log_k]
    row["dz_onset_over_tau"] = _round(dz_on[0] / tau, 2) if len(dz_on) and tau else ""
    head, attn_steps, attn = selector_head(run)
    onset = midpoint_onset(attn_steps, attn)
    row["selector_head_l0"] = head.removeprefix("attn_z_")
    row["attn_onset_over_tau"] = _round(onset / tau, 2) if tau and not math.isnan(onset) else ""
    switches = switch_steps(run)
    switched = switches[~np.isnan(switches)] if len(switches) else switches
    row["bases_switched"] = f"{len(switched)}/{len(switches)}" if len(switches) else ""
    iqr = np.subtract(*np.percentile(switched, [75, 25])) if len(switched) > 1 else None
    row["switch_iqr_over_tau"] = _round(iqr / tau) if tau and iqr is not None else ""
    row.update(switched_shares(run, tau))
    solved = crossing([s for s, _ in run["losses"]], [v for _, v in run["losses"]], SOLVED_LOSS, log=True)
    row["steps_to_train_loss_0.05"] = _round(solved[0], 1) if solved else ""
    row["wall_s"] = run["wall_s"] if run["wall_s"] is not None else ""
    if run["ablation"]:
        zero = np.array(run["ablation"]["zero"], dtype=float)
        layer, index = np.unravel_index(np.nanargmax(zero), zero.shape)
        row["max_zero_ablation"] = f"l{layer}h{index}: +{zero[layer, index]:.2f}"
    return row


def point_of(row: dict) -> tuple:
    return tuple(row[key] for key in POINT_KEYS)


def points(rows: list[dict], figures: tuple[str, ...]) -> list[dict]:
    """One row per sweep point: its parameters, its seeds and, per figure, mean ± 95% t-interval over the seeds that
    have it (``<figure>`` the summary, ``<figure>_min``/``_max`` the spread)."""
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        grouped.setdefault(point_of(row), []).append(row)
    table = []
    for point, members in sorted(grouped.items(), key=lambda item: [str(v) for v in item[0]]):
        entry = {**dict(zip(POINT_KEYS, point)), "seeds": ",".join(str(r["seed"]) for r in members)}
        for figure in figures:
            values = [r[figure] for r in members if r.get(figure) not in ("", None)]
            entry[figure] = summarize(values) if values else None
        table.append(entry)
    return table


def point_cells(table: list[dict]) -> list[dict]:
    """``points`` as table cells: ``mean ± half (n)``, then the min-max."""
    cells = []
    for entry in table:
        row = {}
        for key, value in entry.items():
            if key in POINT_KEYS or key == "seeds":
                row[key] = value
                continue
            row[key] = value.text(3 if abs(value.mean) < 10 else 1) if value is not None else ""
            row[f"{key}_range"] = f"{value.minimum:g}-{value.maximum:g}" if value is not None else ""
        cells.append(row)
    return cells
