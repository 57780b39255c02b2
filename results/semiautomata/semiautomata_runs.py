"""The semiautomata study's run records as the analysis reads them: what each run was (from its records, never its
name), its accuracies per split and mode, and the groups of runs a claim compares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, STAGES_FILE, TRAINING_LOG_FILE
from hf_icot.studies.report import read_json
from hf_icot.studies.statistics import Summary, summarize
from hf_icot.studies.sweep import RECORD_FILE

#: Two accuracies differ when they are this far apart (about 2 standard errors of a 500-example split near 0.5).
MARGIN = 0.05
#: A bound met to within float rounding is met (means of 300-example accuracies: 0.95 - 0.90 >= 0.05 is False).
EPS = 1e-9
#: "Near-perfect" and "high" accuracy.
HIGH = 0.95
GOOD = 0.9
BASE = {"automaton": "C7", "T": 16, "depth": 4}
#: Claim 6 at T = 16: C_13..C_17 would rarely wrap around within 16 inputs, so the CPU scale pairs smaller counters of
#: about the same size, one prime and one composite (a product of coprime cycles) each: (C_6, C_7) and (C_10, C_11).
PRIMES = ("C7", "C11")
COMPOSITES = ("C6", "C10")
OOD_LABEL = {"test": "ID (uniform)"}


REGIME_ORDER = [
    "end to end",
    "full CoT",
    "left curriculum",
    "right curriculum",
    "inductive curriculum",
    "mixture (hints)",
]


def is_base(run: dict[str, Any]) -> bool:
    return all(run[key] == value for key, value in BASE.items())


def regime_of(schedule: dict[str, Any]) -> str:
    name = schedule.get("name")
    if name == "staged":
        return f"{schedule['side']} curriculum"
    return {"no_cot": "end to end", "full_cot": "full CoT", "mixture": "mixture (hints)"}.get(name, str(name))


def automaton_of(task_args: dict[str, Any]) -> str:
    """``C7`` for the counter (inputs stay / add one), ``C7 group`` for the cyclic group acting on itself (inputs
    0 .. n - 1 add mod n), else the kind (``s3``)."""
    kind = task_args.get("kind", "counter")
    if kind in ("counter", "cyclic"):
        return f"C{task_args.get('modulus', 2)}" + (" group" if kind == "cyclic" else "")
    return kind


def own_mode(regime: str, length: int) -> str:
    """The mode a regime is meant to be asked in: full CoT writes its CoT, the others answer at once."""
    return {"full CoT": "explicit", "mixture (hints)": "hint=0"}.get(regime, "implicit")


def load_run(folder: Path) -> dict[str, Any]:
    task_args = read_json(folder / "task_args.json") or {}
    schedule = read_json(folder / "schedule.json") or {}
    size = read_json(folder / "model_size.json") or {}
    log = read_json(folder / TRAINING_LOG_FILE) or []
    regime = regime_of(schedule)
    length = int(task_args.get("length", 0))
    return {
        "run": folder.name,
        "folder": folder,
        "automaton": automaton_of(task_args),
        "T": length,
        "regime": regime,
        "mode": own_mode(regime, length),
        "depth": size.get("n_layer"),
        "width": size.get("n_embd"),
        "parameters": size.get("parameters"),
        "seed": schedule.get("seed"),
        "steps": max((entry.get("step", 0) for entry in log), default=0),
        "lr": _learning_rate(log),
        "wall_s": (read_json(folder / "wall_time.json") or read_json(folder / RECORD_FILE) or {}).get("wall_s"),
        "sweep_run": (read_json(folder / RECORD_FILE) or {}).get("run", folder.name),
        "metrics": read_json(folder / EVAL_RESULTS_FILE) or {},
        "splits": read_json(folder / "splits.json") or {},
        "stages": read_json(folder / STAGES_FILE) or [],
        "stage_metrics": read_json(folder / "stage_metrics.json") or {},
        "probes": read_json(folder / "probes.json"),
        "log": log,
    }


def _learning_rate(log: list[dict[str, Any]]) -> float | None:
    """The run's peak learning rate, as its training log shows it (after warm-up), to 3 significant digits."""
    rates = [entry["learning_rate"] for entry in log if "learning_rate" in entry]
    return float(f"{max(rates):.3g}") if rates else None


def ood_splits(run: dict[str, Any]) -> list[str]:
    return sorted(name for name in run["splits"] if name.startswith("test_ood_"))


def accuracy(run: dict[str, Any], split: str, mode: str | None = None) -> float | None:
    return run["metrics"].get(f"{split}/{mode or run['mode']}/answer_em")


def chance(run: dict[str, Any], split: str) -> float | None:
    return (run["splits"].get(split) or {}).get("majority_answer_share")


def result_row(run: dict[str, Any]) -> dict[str, Any]:
    row = {key: run[key] for key in ("run", "automaton", "T", "regime", "depth", "width", "parameters", "seed")}
    row.update(steps=run["steps"], wall_s=run["wall_s"], mode=run["mode"])
    for split in ["test", *ood_splits(run)]:
        row[split] = accuracy(run, split)
    for split in ["test", *ood_splits(run)]:
        row[f"{split} explicit"] = accuracy(run, split, "explicit")
    if run["regime"] == "mixture (hints)":
        for split in ["test", *ood_splits(run)]:
            row[f"{split} hint={run['T']}"] = accuracy(run, split, f"hint={run['T']}")
    return row


def select(runs: list[dict[str, Any]], **wanted: Any) -> list[dict[str, Any]]:
    return [run for run in runs if all(run[key] == value for key, value in wanted.items())]


def summary_of(values: list[float | None]) -> Summary | None:
    """The values' :class:`~hf_icot.studies.statistics.Summary` over seeds, the missing ones left out (None if none)."""
    values = [value for value in values if value is not None]
    return summarize(values) if values else None


def mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def group_accuracy(runs: list[dict[str, Any]], split: str, mode: str | None = None) -> float | None:
    """Mean over seeds (and over several OOD splits when ``split`` is "ood")."""
    if split == "ood":
        return mean([mean([accuracy(run, s, mode) for s in ood_splits(run)]) for run in runs])
    return mean([accuracy(run, split, mode) for run in runs])


def seeds_of(runs: list[dict[str, Any]]) -> str:
    return ", ".join(str(run["seed"]) for run in runs) or "none"
