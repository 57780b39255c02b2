"""The parity study's plots (``make_results.py`` draws them): model A's losses per step with the stage boundaries, and
one run's final attention with each node's true children marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hf_icot.studies.report import error_bars, mark_steps, pyplot, save_figure
from hf_icot.studies.statistics import summarize


def plot_losses(group: list[dict[str, Any]], won: list[dict[str, Any]], out: Path, name: str) -> None:
    """Validation loss per step of the seeds that succeeded (``won``) and of the rest, training loss of every seed;
    mean and interval over seeds, stage boundaries marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    lost = [run for run in group if run not in won]
    curves = [(won, "eval_loss", f"validation loss (after the step), the {len(won)} seeds that succeeded"),
              (lost, "eval_loss", f"validation loss (after the step), the {len(lost)} seeds that failed"),
              (group, "loss", "training loss (before the step), every seed")]  # fmt: skip
    for runs, key, label in curves:
        steps = sorted({e["step"] for run in runs for e in run["log"] if key in e})
        points = [
            summarize([e[key] for run in runs for e in run["log"] if key in e and e["step"] == s]) for s in steps
        ]
        if steps:
            error_bars(ax, steps, points, label=label)
    mark_steps(ax, [stage["start_step"] + 0.5 for stage in group[0]["stages"][1:]], label="stage boundary")
    ax.set(title=f"{name}: loss per step, mean and 95% interval over {len(group)} seeds", xlabel="optimizer step",
           ylabel="loss (current stage's layout)", yscale="log")  # fmt: skip
    ax.legend(fontsize=8)
    save_figure(fig, out / f"loss_{name}.png", dpi=110)


def plot_attention(run: dict[str, Any], out: Path) -> None:
    """The final attention of one run with every CoT position padded, each node's true children marked."""
    plt = pyplot()
    report = run["attention"]
    layers = sorted({node["layer"] for node in report["nodes"]})
    fig, axes = plt.subplots(1, len(layers), figsize=(4.2 * len(layers), 3.6), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        nodes = [node for node in report["nodes"] if node["layer"] == layer]
        width = max(max(node["children"]) for node in report["nodes"]) + 1
        grid = [[abs(v) for v in report["maps"][layer - 1][node["node"]][:width]] for node in nodes]
        image = ax.imshow(grid, aspect="auto", cmap="viridis")
        for row, node in enumerate(nodes):
            ax.scatter(node["children"], [row, row], marker="x", color="red", s=18)
        ax.set_yticks(range(len(nodes)), [str(node["node"]) for node in nodes])
        found = sum(node["found"] for node in nodes)
        ax.set(title=f"layer {layer}: {found}/{len(nodes)} nodes on their children", xlabel="attended position",
               ylabel="node (position)")  # fmt: skip
        fig.colorbar(image, ax=ax, label="|attention weight|")
    axes[0][0].scatter([], [], marker="x", color="red", label="true children")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{run['name']}: final attention, every CoT position padded")
    save_figure(fig, out / f"attention_{run['name']}.png", dpi=110)
