"""Tables, plots and the README of results/semiautomata/ from the run folders that run_all.sh writes.

    python results/semiautomata/make_results.py --runs outputs/semiautomata --out results/semiautomata

Every folder under ``--runs`` holding ``eval_results.json`` is one run; what it was (automaton, T, regime, depth,
width, seed) is read from the records recipes/semiautomata.py leaves (``task_args.json``, ``schedule.json``,
``model_size.json``), never from its name. Writes ``results.csv`` / ``results.md`` (one row per run), one CSV per claim
(``claim<i>.csv``), the plots ``curriculum_stages.png``, ``id_vs_ood.png``, ``prime_vs_composite.png``,
``width_vs_depth.png``, ``end_to_end_vs_T.png``, ``probes.png`` and ``probe_profiles.png``, and ``README.md``, whose
verdicts follow the rules stated in it (:data:`MARGIN`).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

#: Two accuracies differ when they are this far apart (about 2 standard errors of a 500-example split near 0.5).
MARGIN = 0.05
#: "Near-perfect" and "high" accuracy.
HIGH = 0.95
GOOD = 0.9
BASE = {"automaton": "C7", "T": 16, "depth": 4}
#: Claim 6 at T = 16: C_13..C_17 would rarely wrap around within 16 inputs, so the CPU scale pairs smaller counters of
#: about the same size, one prime and one composite (a product of coprime cycles) each: (C_6, C_7) and (C_10, C_11).
PRIMES = ("C7", "C11")
COMPOSITES = ("C6", "C10")
OOD_LABEL = {"test": "ID (uniform)"}


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def regime_of(schedule: dict[str, Any]) -> str:
    name = schedule.get("name")
    if name == "staged":
        return f"{schedule['side']} curriculum"
    return {"no_cot": "end to end", "full_cot": "full CoT", "mixture": "mixture (hints)"}.get(name, str(name))


def automaton_of(task_args: dict[str, Any]) -> str:
    kind = task_args.get("kind", "counter")
    return f"C{task_args.get('modulus', 2)}" if kind == "counter" else kind


def own_mode(regime: str, length: int) -> str:
    """The mode a regime is meant to be asked in: full CoT writes its CoT, the others answer at once."""
    return {"full CoT": "explicit", "mixture (hints)": "hint=0"}.get(regime, "implicit")


def load_run(folder: Path) -> dict[str, Any]:
    task_args = _json(folder / "task_args.json") or {}
    schedule = _json(folder / "schedule.json") or {}
    size = _json(folder / "model_size.json") or {}
    log = _json(folder / "training_log.json") or []
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
        "wall_s": (_json(folder / "wall_time.json") or {}).get("wall_s"),
        "metrics": _json(folder / "eval_results.json") or {},
        "splits": _json(folder / "splits.json") or {},
        "stages": _json(folder / "stages.json") or [],
        "stage_metrics": _json(folder / "stage_metrics.json") or {},
        "probes": _json(folder / "probes.json"),
        "log": log,
    }


def ood_splits(run: dict[str, Any]) -> list[str]:
    return sorted(name for name in run["splits"] if name.startswith("test_ood_"))


def accuracy(run: dict[str, Any], split: str, mode: str | None = None) -> float | None:
    return run["metrics"].get(f"{split}/{mode or run['mode']}/answer_em")


def chance(run: dict[str, Any], split: str) -> float | None:
    return (run["splits"].get(split) or {}).get("majority_answer_share")


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def write_table(rows: list[dict[str, Any]], out: Path, name: str) -> str:
    """``name.csv`` and ``name.md``; returns the Markdown."""
    if not rows:
        return "_no runs_\n"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, columns)
        writer.writeheader()
        writer.writerows({key: _fmt(row.get(key)) for key in columns} for row in rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |" for row in rows]
    markdown = "\n".join(lines) + "\n"
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    return markdown


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


# ---------------------------------------------------------------------------------------------------------------
# Plots


def _bars(ax: Any, groups: list[str], series: dict[str, list[float | None]], chance_marks: list[float | None]) -> None:
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (label, values) in enumerate(series.items()):
        heights = [np.nan if v is None else v for v in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, heights, width, label=label)
    for xi, level in zip(x, chance_marks):
        if level is not None:
            ax.hlines(level, xi - 0.45, xi + 0.45, colors="black", linestyles="dotted")
    ax.plot([], [], "k:", label="chance (majority answer, mean of splits)")
    ax.set_xticks(x, groups, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("answer exact match")
    ax.legend(fontsize=7)


def plot_id_vs_ood(runs: list[dict[str, Any]], out: Path) -> None:
    base = [run for run in runs if _is_base(run)]
    regimes = [r for r in REGIME_ORDER if select(base, regime=r)]
    if not regimes:
        return
    splits = ["test", *ood_splits(base[0])]
    series = {
        OOD_LABEL.get(split, split): [group_accuracy(select(base, regime=r), split) for r in regimes]
        for split in splits
    }
    mixture = select(base, regime="mixture (hints)")
    labels = [f"{r}\n({own_mode(r, BASE['T'])})" for r in regimes]
    if mixture:
        labels.append(f"mixture (hints)\n(hint={BASE['T']}: full CoT)")
        for split in splits:
            series[OOD_LABEL.get(split, split)].append(group_accuracy(mixture, split, f"hint={BASE['T']}"))
    marks = [mean([chance(base[0], s) for s in splits])] * len(labels)
    fig, ax = plt.subplots(figsize=(10, 4))
    _bars(ax, labels, series, marks)
    ax.set_title(f"ID vs OOD per regime ({BASE['automaton']}, T={BASE['T']}, depth {BASE['depth']})")
    ax.set_xlabel("regime (evaluation mode)")
    fig.tight_layout()
    fig.savefig(out / "id_vs_ood.png", dpi=110)
    plt.close(fig)


def plot_curriculum_stages(runs: list[dict[str, Any]], out: Path) -> None:
    curricula = [run for run in runs if _is_base(run) and run["regime"].endswith("curriculum")]
    curricula += [
        run for run in runs if run["regime"] == "left curriculum" and run not in curricula and run["T"] == BASE["T"]
    ]
    if not curricula:
        return
    fig, axes = plt.subplots(2, len(curricula), figsize=(4.2 * len(curricula), 7), squeeze=False)
    for column, run in enumerate(curricula):
        ax = axes[0, column]
        stages = sorted(int(s) for s in run["stage_metrics"])
        for split in ["test", *ood_splits(run)]:
            for mode, style in (("explicit", "-"), ("implicit", "--")):
                values = [run["stage_metrics"][str(s)].get(f"eval_{split}_{mode}/answer_em") for s in stages]
                ax.plot(stages, values, style, marker="o", label=f"{OOD_LABEL.get(split, split)}, {mode}")
        ax.set_title(f"{run['regime']}: {run['automaton']}, depth {run['depth']}", fontsize=9)
        ax.set_xlabel("curriculum stage (end of stage; last = no CoT)")
        ax.set_ylabel("answer exact match")
        ax.set_ylim(-0.03, 1.03)
        ax.legend(fontsize=6)
        loss = [(e["step"], e["loss"]) for e in run["log"] if "loss" in e]
        ax = axes[1, column]
        if loss:
            ax.plot(*zip(*loss), label="training loss")
        for stage in run["stages"][1:]:
            ax.axvline(stage["start_step"], color="grey", linestyle=":", linewidth=0.8)
        ax.plot([], [], color="grey", linestyle=":", label="stage boundary")
        ax.set_yscale("log")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss")
        ax.legend(fontsize=7)
    fig.suptitle("Accuracy at the end of each curriculum stage (top) and training loss (bottom)")
    fig.tight_layout()
    fig.savefig(out / "curriculum_stages.png", dpi=100)
    plt.close(fig)


def plot_groups(runs_by_group: dict[str, list[dict[str, Any]]], out: Path, name: str, title: str, xlabel: str) -> None:
    groups = [g for g, group in runs_by_group.items() if group]
    if not groups:
        return
    first = runs_by_group[groups[0]][0]
    splits = ["test", *ood_splits(first)]
    series = {OOD_LABEL.get(s, s): [group_accuracy(runs_by_group[g], s) for g in groups] for s in splits}
    marks = [mean([chance(runs_by_group[g][0], s) for s in splits]) for g in groups]
    fig, ax = plt.subplots(figsize=(7, 4))
    _bars(ax, groups, series, marks)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=110)
    plt.close(fig)


def plot_end_to_end(runs: list[dict[str, Any]], out: Path) -> None:
    e2e = select(runs, regime="end to end", automaton=BASE["automaton"], depth=BASE["depth"])
    cot = select(runs, regime="full CoT", automaton=BASE["automaton"], depth=BASE["depth"])
    if not e2e:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, group, mode in (("end to end (implicit)", e2e, "implicit"), ("full CoT (explicit)", cot, "explicit")):
        lengths = sorted({run["T"] for run in group})
        ax.plot(lengths, [group_accuracy(select(group, T=t), "test", mode) for t in lengths], marker="o", label=label)
    lengths = sorted({run["T"] for run in e2e})
    ax.plot(lengths, [mean([chance(r, "test") for r in select(e2e, T=t)]) for t in lengths], "k:", label="chance")
    ax.set_xlabel("T (input symbols)")
    ax.set_ylabel("ID answer exact match")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"End to end vs full CoT as T grows ({BASE['automaton']}, depth {BASE['depth']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "end_to_end_vs_T.png", dpi=110)
    plt.close(fig)


def plot_probes(runs: list[dict[str, Any]], out: Path) -> None:
    chosen = [run for run in runs if run["probes"] and (_is_base(run) or run["regime"] == "left curriculum")]
    chosen = [run for run in chosen if run["seed"] == min(r["seed"] for r in chosen)]
    chosen = sorted(
        chosen, key=lambda r: (REGIME_ORDER.index(r["regime"]), len(r["automaton"]), r["automaton"], r["depth"])
    )
    if not chosen:
        return
    panels = [(run, "accuracy") for run in chosen] + [(chosen[0], "accuracy_at_init")]
    columns = 3
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.4 * rows), squeeze=False, layout="constrained")
    image = None
    for ax, (run, key) in zip(axes.ravel(), panels):
        probes = run["probes"]
        data = np.array(probes[key])
        image = ax.imshow(data, origin="lower", aspect="auto", vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(probes["steps"])), probes["steps"], fontsize=6)
        ax.set_yticks(range(len(probes["layers"])), probes["layers"], fontsize=6)
        ax.set_xlabel("step t", fontsize=8)
        ax.set_ylabel("layer (0 = embeddings)", fontsize=8)
        ood = mean([accuracy(run, s) for s in ood_splits(run)])
        what = (
            "untrained control" if key == "accuracy_at_init" else f"ID {_fmt(accuracy(run, 'test'))}, OOD {_fmt(ood)}"
        )
        ax.set_title(f"{run['regime']}, {run['automaton']}, depth {run['depth']}\n{what}", fontsize=8)
    for ax in axes.ravel()[len(panels) :]:
        ax.axis("off")
    fig.colorbar(image, ax=axes.ravel().tolist(), label="held-out probe accuracy")
    fig.suptitle(
        "Where did the reasoning go: held-out accuracy of a linear probe for the state after step t,\n"
        "read from each layer at the t-th input symbol (titles: the run's own-mode ID and mean OOD accuracy)"
    )
    fig.savefig(out / "probes.png", dpi=90)
    plt.close(fig)


def plot_probe_profiles(runs: list[dict[str, Any]], out: Path) -> None:
    """Per model, the best layer's probe accuracy at each step, beside the untrained control and the majority share."""
    chosen = [run for run in runs if run["probes"] and _is_base(run)]
    if not chosen:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in sorted(chosen, key=lambda r: REGIME_ORDER.index(r["regime"])):
        probes = run["probes"]
        best = np.array(probes["accuracy"])[1:].max(axis=0)  # layers 1.. : what the blocks computed
        ood = mean([accuracy(run, s) for s in ood_splits(run)])
        ax.plot(probes["steps"], best, marker="o", markersize=3, label=f"{run['regime']} (OOD {_fmt(ood)})")
    control = chosen[0]["probes"]
    ax.plot(control["steps"], np.array(control["accuracy_at_init"])[1:].max(axis=0), "k--", label="untrained control")
    ax.plot(control["steps"], control["majority"], "k:", label="majority state (chance)")
    ax.set_xlabel("step t (state after the t-th input, read at that input)")
    ax.set_ylabel("best layer's held-out probe accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(
        f"Linear decodability of the state per step ({BASE['automaton']}, T={BASE['T']}, depth {BASE['depth']})"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "probe_profiles.png", dpi=110)
    plt.close(fig)


REGIME_ORDER = [
    "end to end",
    "full CoT",
    "left curriculum",
    "right curriculum",
    "inductive curriculum",
    "mixture (hints)",
]


def _is_base(run: dict[str, Any]) -> bool:
    return all(run[key] == value for key, value in BASE.items())


# ---------------------------------------------------------------------------------------------------------------
# Claims: the table, the numbers and the verdict by the rules of the README


def _verdict(agree: bool | None, disagree: bool | None) -> str:
    if agree is None or disagree is None:
        return "inconclusive (runs missing)"
    return "agree" if agree else "disagree" if disagree else "inconclusive"


def claims(runs: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """One record per claim: ``title``, ``table`` (Markdown), ``numbers`` and ``verdict``."""
    base = [run for run in runs if _is_base(run)]
    by = {regime: select(base, regime=regime) for regime in REGIME_ORDER}
    found = []

    def regime_rows(groups: dict[str, list[dict[str, Any]]], modes: dict[str, str] | None = None) -> list[dict]:
        rows = []
        for label, group in groups.items():
            if not group:
                continue
            mode = (modes or {}).get(label)
            row = {"group": label, "mode": mode or group[0]["mode"], "seeds": seeds_of(group)}
            for split in ["test", *ood_splits(group[0])]:
                row[split] = group_accuracy(group, split, mode)
                row[f"chance {split}"] = mean([chance(run, split) for run in group])
            rows.append(row)
        return rows

    def record(index: int, title: str, rows: list[dict], numbers: str, verdict: str) -> None:
        found.append(
            {"title": title, "table": write_table(rows, out, f"claim{index}"), "numbers": numbers, "verdict": verdict}
        )

    # 1: full CoT near-perfect ID and OOD
    cot = by["full CoT"]
    values = [group_accuracy(cot, split) for split in ["test", *ood_splits(cot[0])]] if cot else []
    worst = min((v for v in values if v is not None), default=None)
    record(
        1,
        "full CoT is near-perfect in distribution and on biased inputs",
        regime_rows({"full CoT": cot}),
        f"worst split (explicit answer accuracy): {_fmt(worst)}",
        _verdict(None if worst is None else worst >= HIGH, None if worst is None else worst < GOOD - MARGIN * 2),
    )

    # 2: end to end much harder, failing as T grows
    e2e_all = select(runs, regime="end to end", automaton=BASE["automaton"], depth=BASE["depth"])
    lengths = sorted({run["T"] for run in e2e_all})
    rows = [
        {
            "T": t,
            "end to end (implicit) test": group_accuracy(select(e2e_all, T=t), "test"),
            "full CoT (explicit) test": group_accuracy(select(runs, regime="full CoT", T=t, depth=BASE["depth"],
                                                              automaton=BASE["automaton"]), "test"),
            "chance test": mean([chance(r, "test") for r in select(e2e_all, T=t)]),
            "end to end (implicit) OOD mean": group_accuracy(select(e2e_all, T=t), "ood"),
            "chance OOD mean": mean([mean([chance(r, s) for s in ood_splits(r)]) for r in select(e2e_all, T=t)]),
            "seeds": seeds_of(select(e2e_all, T=t)),
        }
        for t in lengths
    ]  # fmt: skip
    e2e, cot_id = group_accuracy(by["end to end"], "test"), group_accuracy(cot, "test")
    by_length = [row["end to end (implicit) test"] for row in rows]
    falls = len(by_length) < 2 or all(a >= b - MARGIN for a, b in zip(by_length, by_length[1:]))
    gap = None if e2e is None or cot_id is None else cot_id - e2e
    record(
        2,
        "end to end is much harder than full CoT and fails as T grows",
        rows,
        f"at T={BASE['T']}: end to end {_fmt(e2e)} vs full CoT {_fmt(cot_id)} (gap {_fmt(gap)}); "
        f"end to end by T {', '.join(f'{t}: {_fmt(a)}' for t, a in zip(lengths, by_length))}",
        _verdict(None if gap is None else gap >= 4 * MARGIN and falls, None if gap is None else gap < MARGIN),
    )

    # 3: left curriculum: ID high, OOD drops (to chance for primes)
    left = by["left curriculum"]
    left_id, left_ood = group_accuracy(left, "test"), group_accuracy(left, "ood")
    left_all = select(runs, regime="left curriculum", T=BASE["T"], depth=BASE["depth"])
    rows = regime_rows({run_label(g): g for g in _by_automaton(left_all)})
    drop = None if left_id is None or left_ood is None else left_id - left_ood
    record(
        3,
        "the left curriculum keeps ID accuracy high while OOD accuracy drops (to chance for prime counters)",
        rows,
        f"{BASE['automaton']}: ID {_fmt(left_id)}, OOD mean {_fmt(left_ood)} (drop {_fmt(drop)})",
        _verdict(
            None if drop is None else left_id >= GOOD and drop >= 2 * MARGIN,
            None if drop is None else left_id >= GOOD and drop < MARGIN,
        )
        if left_id is None or left_id >= GOOD
        else "inconclusive (the left curriculum did not reach high ID accuracy at this scale)",
    )

    # 4: left better than right (inductive the third)
    groups = {r: by[r] for r in ("left curriculum", "right curriculum", "inductive curriculum")}
    right_id = group_accuracy(by["right curriculum"], "test")
    record(
        4,
        "the left curriculum works better than the right one",
        regime_rows(groups),
        f"ID: left {_fmt(left_id)}, right {_fmt(right_id)}, inductive "
        f"{_fmt(group_accuracy(by['inductive curriculum'], 'test')) or 'not run'}; OOD mean: left "
        f"{_fmt(left_ood)}, right {_fmt(group_accuracy(by['right curriculum'], 'ood'))}",
        _verdict(
            None if left_id is None or right_id is None else left_id > right_id + MARGIN,
            None if left_id is None or right_id is None else right_id > left_id + MARGIN,
        ),
    )

    # 5: wide-shallow vs deep-narrow at equal budget
    depths = sorted(
        {r["depth"] for r in select(runs, regime="left curriculum", automaton=BASE["automaton"], T=BASE["T"])}
    )
    groups5 = {
        f"depth {d}": select(runs, regime="left curriculum", automaton=BASE["automaton"], T=BASE["T"], depth=d)
        for d in depths
    }
    rows = regime_rows(groups5)
    for row, group in zip(rows, groups5.values()):
        row["width"], row["parameters"] = group[0]["width"], group[0]["parameters"]
    shallow = group_accuracy(groups5.get(f"depth {min(depths)}", []), "test") if depths else None
    deep = group_accuracy(groups5.get(f"depth {max(depths)}", []), "test") if len(depths) > 1 else None
    record(
        5,
        "at an equal parameter budget, wide and shallow internalizes better than deep and narrow",
        rows,
        "; ".join(
            f"depth {d}: ID {_fmt(group_accuracy(group, 'test'))}, OOD {_fmt(group_accuracy(group, 'ood'))}"
            for d, group in zip(depths, groups5.values())
        ),
        _verdict(
            None if shallow is None or deep is None else shallow > deep + MARGIN,
            None if shallow is None or deep is None else deep > shallow + MARGIN,
        ),
    )

    # 6: prime vs composite counters
    primes = [r for r in left_all if r["automaton"] in PRIMES]
    composites = [r for r in left_all if r["automaton"] in COMPOSITES]
    p_id, c_id = group_accuracy(primes, "test"), group_accuracy(composites, "test")
    p_ood, c_ood = group_accuracy(primes, "ood"), group_accuracy(composites, "ood")
    rows = regime_rows({f"prime ({', '.join(PRIMES)})": primes, f"composite ({', '.join(COMPOSITES)})": composites})
    record(
        6,
        f"prime-order counters ({', '.join(PRIMES)}) are much harder to internalize than composite ones "
        f"({', '.join(COMPOSITES)})",
        rows,
        f"left curriculum, ID: prime {_fmt(p_id)} vs composite {_fmt(c_id)}; OOD: prime {_fmt(p_ood)} vs composite "
        f"{_fmt(c_ood)}",
        _verdict(
            None if p_id is None or c_id is None else c_id > p_id + MARGIN or (c_ood or 0) > (p_ood or 0) + MARGIN,
            None if p_id is None or c_id is None else p_id > c_id + MARGIN,
        ),
    )

    # 7: mixture vs curriculum, and the mixture asked for the full CoT OOD
    mixture = by["mixture (hints)"]
    full_hint = f"hint={BASE['T']}"
    rows = regime_rows(
        {"left curriculum": left, "mixture (hints)": mixture, "mixture asked for the full CoT": mixture},
        modes={
            "left curriculum": "implicit",
            "mixture (hints)": "hint=0",
            "mixture asked for the full CoT": full_hint,
        },
    )
    m_id, m_full_ood = group_accuracy(mixture, "test", "hint=0"), group_accuracy(mixture, "ood", full_hint)
    similar = None if m_id is None or left_id is None else m_id >= left_id - MARGIN
    better_ood = None if m_full_ood is None or left_ood is None else m_full_ood > left_ood + MARGIN
    record(
        7,
        "a mixture with length hints replaces the curriculum with similar success, and asked for the full CoT it is "
        "more robust OOD than curriculum-trained models",
        rows,
        f"ID without CoT: mixture {_fmt(m_id)} vs left curriculum {_fmt(left_id)}; OOD: mixture asked for the full "
        f"CoT {_fmt(m_full_ood)} vs left curriculum {_fmt(left_ood)}",
        _verdict(
            None if similar is None or better_ood is None else similar and better_ood,
            None if similar is None or better_ood is None else not similar and not better_ood,
        ),
    )
    return found


def _by_automaton(runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    names = sorted({r["automaton"] for r in runs}, key=lambda a: (len(a), a))
    return [[r for r in runs if r["automaton"] == name] for name in names]


def run_label(group: list[dict[str, Any]]) -> str:
    return f"{group[0]['regime']}, {group[0]['automaton']}"


# ---------------------------------------------------------------------------------------------------------------
# The README


def run_commands(script: Path) -> str:
    """The command of every run in ``run_all.sh`` (its ``run NAME ARGS`` lines, variables expanded), as a bash block."""
    text = script.read_text(encoding="utf-8")
    values = dict(re.findall(r"^(\w+)=(\S+)$", text, flags=re.M))
    arrays = dict(re.findall(r"^(\w+)=\((.*)\)$", text, flags=re.M))
    lines = []
    for name, args in re.findall(r"^run (\S+) ?(.*)$", text, flags=re.M):
        for key, value in arrays.items():
            args = args.replace(f'"${{{key}[@]}}"', value)
        command = f"python recipes/semiautomata.py --config {values.get('CONFIG', '')} --seed {values.get('SEED', 0)} "
        command += f"{args} --output_dir {values.get('OUT', 'outputs/semiautomata')}/{name}"
        lines.append(re.sub(r"\$SEED", values.get("SEED", "0"), command))
    return "```bash\n" + "\n".join(lines) + "\n```"


def write_readme(runs: list[dict[str, Any]], found: list[dict[str, Any]], table: str, out: Path) -> None:
    """README.md from readme_template.md (the prose: the command, the setting, what each claim says and its caveat)
    with every number, table and verdict filled in from the runs."""
    sizes = sorted({(run["depth"], run["width"], run["parameters"]) for run in runs})
    wall = [run["wall_s"] for run in runs if run["wall_s"] is not None]
    facts = {
        "n_runs": len(runs),
        "seeds": ", ".join(map(str, sorted({run["seed"] for run in runs}))),
        "sizes": "; ".join(f"depth {d}, width {w}: {p:,} parameters" for d, w, p in sizes),
        "steps": ", ".join(sorted({str(run["steps"]) for run in runs}, key=int)),
        "wall_min": f"{sum(wall) / 60:.1f}",
        "wall_range": f"{min(wall, default=0)}-{max(wall, default=0)} s",
        "automata": ", ".join(sorted({run["automaton"] for run in runs}, key=lambda a: (len(a), a))),
        "lengths": ", ".join(sorted({str(run["T"]) for run in runs}, key=int)),
        "results_table": table,
        "run_commands": run_commands(Path(__file__).parent / "run_all.sh"),
        "margin": MARGIN,
        "high": HIGH,
        "good": GOOD,
    }
    for index, claim in enumerate(found, start=1):
        facts[f"claim{index}_table"] = claim["table"]
        facts[f"claim{index}_numbers"] = claim["numbers"]
        facts[f"claim{index}_verdict"] = claim["verdict"]
    template = (Path(__file__).parent / "readme_template.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(template.format(**facts), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="outputs/semiautomata", help="folder of run folders (run_all.sh's)")
    parser.add_argument("--out", default="results/semiautomata", help="where tables, plots and README go")
    args = parser.parse_args(argv)
    runs_dir, out = Path(args.runs), Path(args.out)
    folders = sorted(p.parent for p in runs_dir.glob("*/eval_results.json"))
    if not folders:
        raise SystemExit(f"error: no run folder with eval_results.json under {runs_dir}; run run_all.sh first.")
    runs = sorted(
        (load_run(folder) for folder in folders),
        key=lambda r: (REGIME_ORDER.index(r["regime"]) if r["regime"] in REGIME_ORDER else 99, r["automaton"],
                       r["T"], r["depth"], r["seed"]),
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    table = write_table([result_row(run) for run in runs], out, "results")
    plot_id_vs_ood(runs, out)
    plot_curriculum_stages(runs, out)
    left = select(runs, regime="left curriculum", T=BASE["T"])
    plot_groups(
        {a: select(left, automaton=a, depth=BASE["depth"]) for a in (*PRIMES, *COMPOSITES)},
        out,
        "prime_vs_composite",
        f"Left curriculum: prime vs composite counters (T={BASE['T']}, depth {BASE['depth']}, implicit)",
        f"counter ({', '.join(PRIMES)} prime; {', '.join(COMPOSITES)} composite)",
    )
    plot_groups(
        {
            f"depth {d}, width {select(left, automaton=BASE['automaton'], depth=d)[0]['width']}": select(
                left, automaton=BASE["automaton"], depth=d
            )
            for d in sorted({r["depth"] for r in select(left, automaton=BASE["automaton"])})
        },
        out,
        "width_vs_depth",
        f"Left curriculum at one parameter budget: wide-shallow vs deep-narrow ({BASE['automaton']}, implicit)",
        "architecture",
    )
    plot_end_to_end(runs, out)
    plot_probes(runs, out)
    plot_probe_profiles(runs, out)
    write_readme(runs, claims(runs, out), table, out)


if __name__ == "__main__":
    main()
