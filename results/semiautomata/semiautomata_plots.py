"""The semiautomata study's plots: accuracy per regime and split, curriculum stages, prime vs composite, width vs
depth, end to end as T grows, and where the states are decodable (probes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hf_icot.studies.report import fmt, pyplot
from results.semiautomata.semiautomata_runs import (
    BASE,
    OOD_LABEL,
    REGIME_ORDER,
    accuracy,
    chance,
    group_accuracy,
    is_base,
    mean,
    ood_splits,
    own_mode,
    select,
)

plt = pyplot()


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
    base = [run for run in runs if is_base(run)]
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
    curricula = [run for run in runs if is_base(run) and run["regime"].endswith("curriculum")]
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
                # eval_<split>/<mode>/... since 2026-12-04; records before that have eval_<split>_<mode>/...
                values = [
                    next((metrics[key] for key in (f"eval_{split}/{mode}/answer_em", f"eval_{split}_{mode}/answer_em")
                          if key in metrics), None)
                    for metrics in (run["stage_metrics"][str(s)] for s in stages)
                ]  # fmt: skip
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
    chosen = [run for run in runs if run["probes"] and (is_base(run) or run["regime"] == "left curriculum")]
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
        what = "untrained control" if key == "accuracy_at_init" else f"ID {fmt(accuracy(run, 'test'))}, OOD {fmt(ood)}"
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
    chosen = [run for run in runs if run["probes"] and is_base(run)]
    if not chosen:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in sorted(chosen, key=lambda r: REGIME_ORDER.index(r["regime"])):
        probes = run["probes"]
        best = np.array(probes["accuracy"])[1:].max(axis=0)  # layers 1.. : what the blocks computed
        ood = mean([accuracy(run, s) for s in ood_splits(run)])
        ax.plot(probes["steps"], best, marker="o", markersize=3, label=f"{run['regime']} (OOD {fmt(ood)})")
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
