"""Tables and plots of results/marginals/ from the run records the harness keeps (results/marginals/runs.yaml).

    python results/marginals/make_results.py --runs outputs/marginals --out results/marginals

Every run folder holds ``run.json``, ``training_log.json``, ``diagnostics.csv`` and (bz_to_a) ``group_accuracy.csv``
and ``ablation.json`` (:mod:`recipes.marginals`); the base run may hold ``hessian.csv``
(``hessian_around_tau.py``). Writes:

* ``runs.csv`` / ``runs.md`` — one row per run: task, optimiser, τ (first measurement with candidate loss
  < 0.5·log K), the plateau's first-token loss against log K, the onsets of Δz and of layer-0 selector attention
  (as fractions of τ), how collectively the bases switch, the largest head-ablation
  loss increase; the steps until the first answer token's loss, and the training loss (mean over the answer's
  tokens, logged every ``logging_steps``), are below 0.05;
* ``tau_fit.csv`` / ``.md`` — the power law τ ∝ D^b over the D sweep, with a bootstrap 95% interval for b;
* ``loss_curves.png`` (first-token loss and candidate loss, log K marked, τ marked), ``dz_attention.png`` and
  ``group_heatmap.png`` of the base run (and ``*_largest_d.png`` of the largest D), ``tau_vs_d.png``,
  ``tau_vs_k.png``, ``tau_vs_noise.png`` (learning rate and batch size), ``hessian.png``, ``direction.png``,
  ``setup.png`` (the set-up ablation).

The sweeps are read from the runs' parameters around the base point (``--base``): the runs that differ from it
in one parameter form that parameter's sweep.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from hf_icot.publishing.run_files import TRAINING_LOG_FILE
from hf_icot.studies.report import pyplot, read_json, write_table

plt = pyplot()

#: a measured Δz counts as "on" above this fraction of log K; a series' onset is its first step past the midpoint
#: between its start and its final value.
DZ_ONSET_FRACTION = 0.1
SOLVED_LOSS = 0.05


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
    run["diagnostics"] = _read_csv(folder / "diagnostics.csv")
    run["groups"] = _read_csv(folder / "group_accuracy.csv")
    run["hessian"] = _read_csv(folder / "hessian.csv")
    history = json.loads((folder / TRAINING_LOG_FILE).read_text(encoding="utf-8"))
    run["losses"] = [(entry["step"], entry["loss"]) for entry in history if "loss" in entry]
    run["ablation"] = read_json(folder / "ablation.json")
    run["wall_s"] = (read_json(folder / "wall_time.json") or {}).get("wall_s")
    return run


def _series(run: dict, column: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in run["diagnostics"] if column in r and not math.isnan(r[column])]
    return np.array([r["step"] for r in rows]), np.array([r[column] for r in rows])


def midpoint_onset(steps: np.ndarray, values: np.ndarray) -> float:
    """The first step where a rising series passes halfway from its first to its last value."""
    if len(values) < 2 or values[-1] <= values[0]:
        return math.nan
    above = np.nonzero(values >= (values[0] + values[-1]) / 2)[0]
    return float(steps[above[0]])


def selector_head(run: dict) -> tuple[str, np.ndarray, np.ndarray]:
    """The layer-0 head whose attention to the selector grew most, and its series."""
    columns = [c for c in run["diagnostics"][0] if c.startswith("attn_z_l0h")]
    best = max(columns, key=lambda c: _series(run, c)[1][-1] - _series(run, c)[1][0])
    return best, *_series(run, best)


def switch_steps(run: dict, threshold: float = 0.8) -> np.ndarray:
    """Per base, the first measured step at which its accuracy reaches ``threshold`` (NaN if never)."""
    rows = run["groups"]
    if not rows:
        return np.array([])
    groups = [c for c in rows[0] if c != "step"]
    steps = np.array([r["step"] for r in rows])
    switches = []
    for group in groups:
        reached = np.nonzero(np.array([r[group] for r in rows]) >= threshold)[0]
        switches.append(float(steps[reached[0]]) if len(reached) else math.nan)
    return np.array(switches)


#: The study's setting (recipes/marginals.py STUDY_MODEL, distinct first characters); a run that differs is a
#: "setup" variant, named by what differs.
STUDY_SETTING = {"initializer_range": 0.0707, "tie_word_embeddings": False, "resid_pdrop": 0.0}


def variant(run: dict) -> str:
    """``study`` or the study settings this run changes (``gpt2_init``, ``dropout``, ``free_first_chars``)."""
    model = run.get("model", {})
    changed = []
    if model.get("initializer_range", 0.0707) != 0.0707 or model.get("tie_word_embeddings", False):
        changed.append("gpt2_init")
    if model.get("resid_pdrop", 0.0) > 0:
        changed.append("dropout")
    if not run["task"].get("distinct_first_chars", True):
        changed.append("free_first_chars")
    return "+".join(changed) or "study"


def summarise(run: dict) -> dict:
    """One row of ``runs.csv``."""
    tau, log_k = run["tau"], run["log_k"]
    steps, first = _series(run, "first_token_loss_clean")
    plateau = first[(steps >= 0.25 * tau) & (steps <= 0.75 * tau)] if tau else first[len(first) // 2 :]
    dz_steps, dz = _series(run, "z_shuffle_gap")
    dz_on = dz_steps[dz > DZ_ONSET_FRACTION * log_k]
    head, attn_steps, attn = selector_head(run)
    attn_onset = midpoint_onset(attn_steps, attn)
    switches = switch_steps(run)
    switched = switches[~np.isnan(switches)] if len(switches) else switches
    solved = steps[first < SOLVED_LOSS]
    row = {
        "run": run["name"],
        "direction": run["direction"],
        "setup": variant(run),
        "K": run["k"],
        "n_b": run["n_bases"],
        "D": run["dataset_size"],
        "lr": run["learning_rate"],
        "batch": run["batch_size"],
        "seed": run["seed"],
        "steps": run["max_steps"],
        "tau": tau if tau is not None else "",
        "log_K": round(log_k, 3),
        "plateau_first_token_loss": round(float(np.median(plateau)), 3) if len(plateau) else "",
        "dz_onset": int(dz_on[0]) if len(dz_on) else "",
        "dz_onset_over_tau": round(dz_on[0] / tau, 2) if len(dz_on) and tau else "",
        "selector_head_l0": head.removeprefix("attn_z_"),
        "attn_onset_over_tau": round(attn_onset / tau, 2) if tau and not math.isnan(attn_onset) else "",
        "bases_switched": f"{len(switched)}/{len(switches)}" if len(switches) else "",
        "switch_iqr_over_tau": round(float(np.subtract(*np.percentile(switched, [75, 25]))) / tau, 3)
        if tau and len(switched) > 1
        else "",
        "switch_within_20pct_of_tau": round(float(np.mean(np.abs(switched - tau) <= 0.2 * tau)), 2)
        if tau and len(switched)
        else "",
        "steps_to_first_token_loss_0.05": int(solved[0]) if len(solved) else "",
        "steps_to_train_loss_0.05": next((step for step, loss in run["losses"] if loss < SOLVED_LOSS), ""),
        "wall_s": run["wall_s"] if run["wall_s"] is not None else "",
    }
    if run["ablation"]:
        zero = np.array(run["ablation"]["zero"], dtype=float)
        layer, index = np.unravel_index(np.nanargmax(zero), zero.shape)
        row["max_zero_ablation"] = f"l{layer}h{index}: +{zero[layer, index]:.2f}"
    else:
        row["max_zero_ablation"] = ""
    return row


def sweeps(runs: list[dict], base: dict) -> dict[str, list[dict]]:
    """Runs that differ from the base point in exactly the swept parameters (seed 0, bz_to_a unless swept)."""

    def params(run: dict) -> dict:
        return {
            "K": run["k"],
            "n_b": run["n_bases"],
            "lr": run["learning_rate"],
            "batch": run["batch_size"],
            "seed": run["seed"],
            "direction": run["direction"],
            "setup": variant(run),
        }

    def varying(*free: str) -> list[dict]:
        return [r for r in runs if all(params(r)[key] == base[key] for key in base if key not in free)]

    base_d = base["K"] * base["n_b"]
    return {
        "seed": varying("seed"),
        "D": varying("n_b"),
        "K_fixed_n_b": varying("K"),
        "K_fixed_D": [r for r in varying("K", "n_b") if r["dataset_size"] == base_d],
        "lr": varying("lr"),
        "batch": varying("batch"),
        "direction": varying("direction"),
        "setup": varying("setup"),
    }


def fit_power_law(d: np.ndarray, tau: np.ndarray, seed: int = 0, n_boot: int = 2000) -> dict:
    """Least squares of log τ = a + b log D, with a bootstrap (resampling the runs) 95% interval for b."""
    x, y = np.log(d), np.log(tau)
    b, a = np.polyfit(x, y, 1)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(x), len(x))
        if len(set(x[pick])) > 1:
            boots.append(np.polyfit(x[pick], y[pick], 1)[0])
    low, high = np.percentile(boots, [2.5, 97.5])
    return {"exponent_b": round(float(b), 3), "ci95_low": round(float(low), 3), "ci95_high": round(float(high), 3),
            "prefactor": round(float(math.exp(a)), 4), "points": len(x)}  # fmt: skip


def _mark_tau(ax, tau, label: bool = True) -> None:
    if tau:
        ax.axvline(tau, color="black", linestyle=":", linewidth=1, label="τ" if label else None)


def plot_loss_curves(groups: dict[str, list[dict]], out: Path) -> None:
    panels = [("K_fixed_n_b", "K at fixed n_b"), ("K_fixed_D", "K at fixed D")]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for col, (key, title) in enumerate(panels):
        for run in sorted(groups[key], key=lambda r: r["k"]):
            steps, first = _series(run, "first_token_loss_clean")
            (line,) = axes[0, col].plot(steps, first, label=f"K={run['k']}, D={run['dataset_size']}")
            axes[0, col].axhline(run["log_k"], color=line.get_color(), linestyle="--", linewidth=0.8)
            steps, cand = _series(run, "candidate_loss")
            axes[1, col].plot(steps, cand / run["log_k"], color=line.get_color(), label=f"K={run['k']}")
            if run["tau"]:
                axes[1, col].axvline(run["tau"], color=line.get_color(), linestyle=":", linewidth=1)
        axes[0, col].set(
            title=f"{title}: first-target-token loss (dashed: log K)", xlabel="step", ylabel="loss (nats)"
        )
        axes[1, col].axhline(0.5, color="grey", linestyle="--", linewidth=0.8, label="τ threshold 0.5")
        axes[1, col].set(
            title=f"{title}: candidate loss / log K (dotted: τ)", xlabel="step", ylabel="fraction of log K"
        )
        for row in range(2):
            axes[row, col].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)
    plt.close(fig)


def plot_dz_attention(run: dict, out: Path, name: str = "dz_attention.png") -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    steps, dz = _series(run, "z_shuffle_gap")
    ax.plot(steps, dz / run["log_k"], label="Δz / log K (z shuffled minus clean, first token)")
    steps, first = _series(run, "first_token_loss_clean")
    ax.plot(steps, first / run["log_k"], label="first-token loss / log K")
    ax2 = ax.twinx()
    columns = [c for c in run["diagnostics"][0] if c.startswith("attn_z_l0h")]
    for column in columns:
        s, a = _series(run, column)
        ax2.plot(s, a, linestyle="--", linewidth=1, label=f"selector attention {column.removeprefix('attn_z_')}")
    _mark_tau(ax, run["tau"])
    if run["tau"]:
        ax.axvline(run["tau"] / 2, color="grey", linestyle=":", linewidth=1, label="τ / 2")
    ax.set(title=f"{run['name']}: Δz and layer-0 selector attention", xlabel="step", ylabel="fraction of log K")
    ax2.set_ylabel("attention mass on z (layer 0, dashed)")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="center left")
    fig.tight_layout()
    fig.savefig(out / name, dpi=120)
    plt.close(fig)


def plot_tau_vs(groups: dict, key: str, x_of, xlabel: str, title: str, path: Path, fit: dict | None = None) -> None:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    points = [(x_of(r), r["tau"]) for r in groups[key] if r["tau"]]
    missing = [x_of(r) for r in groups[key] if not r["tau"]]
    if points:
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, "o-", label="τ (measured)")
    for x in missing:
        ax.axvline(x, color="red", linestyle=":", label="no τ within the run")
    if fit:
        grid = np.linspace(min(xs), max(xs), 50)
        ax.plot(grid, fit["prefactor"] * grid ** fit["exponent_b"], "--",
                label=f"fit τ ∝ D^{fit['exponent_b']} (95% CI {fit['ci95_low']}–{fit['ci95_high']})")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="τ (steps)", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_noise(groups: dict, out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, xlabel in [(axes[0], "lr", "learning rate"), (axes[1], "batch", "batch size")]:
        field = "learning_rate" if key == "lr" else "batch_size"
        for run in sorted(groups[key], key=lambda r: r[field]):
            steps, cand = _series(run, "candidate_loss")
            (line,) = ax.plot(steps, cand / run["log_k"], label=f"{xlabel} {run[field]}: τ = {run['tau']}")
            if run["tau"]:
                ax.axvline(run["tau"], color=line.get_color(), linestyle=":", linewidth=1)
        ax.axhline(0.5, color="grey", linestyle="--", linewidth=0.8)
        ax.set(title=f"gradient noise: {xlabel} (dotted: τ)", xlabel="step", ylabel="candidate loss / log K")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "tau_vs_noise.png", dpi=120)
    plt.close(fig)


def plot_group_heatmap(run: dict, out: Path, name: str = "group_heatmap.png") -> None:
    rows = run["groups"]
    groups = [c for c in rows[0] if c != "step"]
    steps = np.array([r["step"] for r in rows])
    matrix = np.array([[r[g] for r in rows] for g in groups])
    order = np.argsort(switch_steps(run))
    fig, ax = plt.subplots(figsize=(9, 5))
    image = ax.imshow(matrix[order], aspect="auto", cmap="viridis", vmin=0, vmax=1,
                      extent=(steps[0], steps[-1], len(groups), 0), interpolation="nearest")  # fmt: skip
    _mark_tau(ax, run["tau"])
    ax.set(title=f"{run['name']}: per-base accuracy (bases sorted by switch step)", xlabel="step", ylabel="base")
    fig.colorbar(image, ax=ax, label="accuracy over the base's K rows (teacher forced)")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / name, dpi=120)
    plt.close(fig)


def plot_hessian(run: dict, out: Path) -> None:
    rows = run["hessian"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = [r["fraction_of_tau"] for r in rows]
    ax.plot(x, [r["top"] for r in rows], "o-", label="top eigenvalue")
    ax.plot(x, [abs(r["bottom"]) for r in rows], "s-", label="|bottom eigenvalue|")
    ax.plot(x, [abs(r["escape_curvature"]) for r in rows], "^-", label="|curvature along the escape direction|")
    ax.axvline(1.0, color="black", linestyle=":", linewidth=1, label="τ")
    ax.set(yscale="log", xlabel="step / τ", ylabel="curvature (log scale)", title=f"{run['name']}: Hessian around τ")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "hessian.png", dpi=120)
    plt.close(fig)


def plot_direction(groups: dict, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in groups["direction"]:
        steps, first = _series(run, "first_token_loss_clean")
        ax.plot(steps, first, label=f"{run['direction']} (K={run['k']}, D={run['dataset_size']})")
    ax.axhline(SOLVED_LOSS, color="grey", linestyle="--", linewidth=0.8, label=f"solved: loss {SOLVED_LOSS}")
    ax.set(yscale="log", xlabel="step", ylabel="loss of the first answer token (nats)",
           title="(B, z) -> A against the reverse (A, z) -> B")  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "direction.png", dpi=120)
    plt.close(fig)


def plot_setup(groups: dict, out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in sorted(groups["setup"], key=variant):
        steps, first = _series(run, "first_token_loss_clean")
        (line,) = axes[0].plot(steps, first, label=f"{variant(run)}: τ = {run['tau']}")
        steps, cand = _series(run, "candidate_loss")
        axes[1].plot(steps, cand / run["log_k"], color=line.get_color(), label=variant(run))
    axes[0].axhline(math.log(36), color="grey", linestyle="--", linewidth=0.8, label="log 36 (unconditional)")
    axes[0].axhline(math.log(10), color="black", linestyle="--", linewidth=0.8, label="log K")
    axes[0].set(title="first-target-token loss by set-up", xlabel="step", ylabel="loss (nats)")
    axes[1].axhline(0.5, color="grey", linestyle="--", linewidth=0.8, label="τ threshold")
    axes[1].set(title="candidate loss / log K by set-up", xlabel="step", ylabel="fraction of log K")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "setup.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="Folder of run records (results/marginals/runs) or run folders.")
    parser.add_argument("--out", required=True, help="Where the tables and plots go.")
    parser.add_argument("--base", default="K=10,n_b=200,lr=0.001,batch=128", help="The base point of the sweeps.")
    args = parser.parse_args(argv)
    base = {"seed": 0, "direction": "bz_to_a", "setup": "study"}
    for item in args.base.split(","):
        key, value = item.split("=")
        base[key] = float(value) if key == "lr" else int(value)
    folders = sorted(p.parent for p in Path(args.runs).glob("*/run.json"))
    if not folders:
        raise SystemExit(
            f"error: {args.runs} holds no run folders with run.json; run `python -m hf_icot.studies run results/marginals`."
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [load_run(folder) for folder in folders]
    rows = [summarise(run) for run in runs]
    write_table(rows, out, "runs")

    groups = sweeps(runs, base)
    d_points = [(r["dataset_size"], r["tau"]) for r in groups["D"] if r["tau"]]
    fit = None
    if len({d for d, _ in d_points}) >= 2:
        fit = fit_power_law(np.array([d for d, _ in d_points], float), np.array([t for _, t in d_points], float))
        write_table([fit], out, "tau_fit")
    plot_loss_curves(groups, out)
    base_runs = [r for r in groups["seed"] if r["seed"] == 0]
    if base_runs:
        plot_dz_attention(base_runs[0], out)
        if base_runs[0]["groups"]:
            plot_group_heatmap(base_runs[0], out)
        largest = max(groups["D"], key=lambda r: r["dataset_size"])
        if largest is not base_runs[0]:  # the longest plateau, the study's own size where the sweep reaches it
            plot_dz_attention(largest, out, "dz_attention_largest_d.png")
            if largest["groups"]:
                plot_group_heatmap(largest, out, "group_heatmap_largest_d.png")
        if base_runs[0]["hessian"]:
            plot_hessian(base_runs[0], out)
            write_table([{k: round(v, 5) for k, v in r.items()} for r in base_runs[0]["hessian"]], out, "hessian")
    plot_tau_vs(groups, "D", lambda r: r["dataset_size"], "D = K · n_b", "τ against dataset size (K = base K)",
                out / "tau_vs_d.png", fit)  # fmt: skip
    fig_k = {**groups, "K_all": groups["K_fixed_n_b"] + groups["K_fixed_D"]}
    plot_tau_vs(fig_k, "K_fixed_D", lambda r: r["k"], "K", "τ against K at fixed D", out / "tau_vs_k.png")
    plot_noise(groups, out)
    if len(groups["direction"]) > 1:
        plot_direction(groups, out)
    if len(groups["setup"]) > 1:
        plot_setup(groups, out)
    return rows


if __name__ == "__main__":
    main()
