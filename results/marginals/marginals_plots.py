"""The plots of results/marginals/: every axis titled, a legend where there is more than one series, and error bars
(95% t-interval of the mean over seeds; a point of one seed has none) wherever a point stands for several seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hf_icot.studies.report import error_bars, pyplot, save_figure
from hf_icot.studies.statistics import summarize
from results.marginals.marginals_claims import select, values
from results.marginals.marginals_runs import SOLVED_LOSS, series, share_switched_at, switch_steps, variant

plt = pyplot()


def _tau_points(rows: list[dict], key: str, **fixed) -> tuple[list, list]:
    """The swept values of ``key`` and τ's summary over seeds at each, for the rows matching ``fixed``."""
    chosen = [r for r in select(rows, **fixed) if r["tau"] not in ("", None)]
    xs = sorted({r[key] for r in chosen})
    return xs, [summarize(values([r for r in chosen if r[key] == x], "tau")) for x in xs]


def plot_tau_vs_d(rows: list[dict], fit: dict | None, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for schedule, marker in (("constant", "o"), ("cosine", "s")):
        xs, pts = _tau_points(rows, "D", K=10, schedule=schedule)
        if xs:
            error_bars(ax, xs, pts, marker=marker, linestyle="-", label=f"τ, {schedule} lr (mean, 95% CI over seeds)")
    if fit:
        grid = np.linspace(1000, 10000, 50)
        ax.plot(grid, fit["prefactor"] * grid ** fit["exponent_b"], "--",
                label=f"fit τ ∝ D^{fit['exponent_b']} (95% CI {fit['ci95_low']}–{fit['ci95_high']})")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="D = K · n_b (K = 10)", ylabel="τ (steps)",
           title="τ against dataset size")  # fmt: skip
    ax.legend(fontsize=8)
    save_figure(fig, out / "tau_vs_d.png")


def plot_tau_vs_k(rows: list[dict], out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    xs, pts = _tau_points([r for r in rows if r["D"] == 2000], "K")
    error_bars(ax, xs, pts, linestyle="-", label="D = 2,000 (n_b = 2,000 / K)")
    xs, pts = _tau_points([r for r in rows if r["n_b"] == 200], "K")
    error_bars(ax, xs, pts, marker="s", linestyle="--", label="n_b = 200 (D = 200 K)")
    ax.set(xscale="log", yscale="log", xlabel="K", ylabel="τ (steps)", title="τ against K (mean, 95% CI over seeds)")
    ax.legend(fontsize=8)
    save_figure(fig, out / "tau_vs_k.png")


def plot_noise(rows: list[dict], out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, label, other in ((axes[0], "lr", "learning rate", {"batch": 128}),
                                  (axes[1], "batch", "batch size", {"lr": 0.001})):  # fmt: skip
        xs, pts = _swept(rows, key, other)
        error_bars(ax, xs, pts, linestyle="-", label="τ (mean, 95% CI over seeds)")
        ax.set(xscale="log", xlabel=label, ylabel="τ (steps)", title=f"gradient noise at D = 2,000: {label}")
        ax.legend(fontsize=8)
    save_figure(fig, out / "tau_vs_noise.png")


def _swept(rows: list[dict], key: str, other: dict) -> tuple[list, list]:
    """τ over seeds at each value of ``key`` (lr or batch) at K = 10, D = 2,000, the other one at its base."""
    base = {"direction": "bz_to_a", "schedule": "constant", "setup": "study", "K": 10, "D": 2000, **other}
    chosen = [r for r in rows if all(r[k] == v for k, v in base.items()) and r["tau"] not in ("", None)]
    xs = sorted({r[key] for r in chosen})
    return xs, [summarize(values([r for r in chosen if r[key] == x], "tau")) for x in xs]


def plot_loss_curves(rows: list[dict], runs: dict[str, dict], out: Path) -> None:
    """Candidate loss / log K of every seed at the K-sweep points (D = 2,000 and n_b = 200) and the largest D."""
    largest = max((r["D"] for r in select(rows, K=10)), default=None)
    panels = [("K at fixed D = 2,000", lambda r: r["D"] == 2000), ("K at fixed n_b = 200", lambda r: r["n_b"] == 200),
              (f"K = 10, D = {largest}", lambda r: r["K"] == 10 and r["D"] == largest)]  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    colours: dict[int, str] = {}
    for ax, (title, keep) in zip(axes, panels, strict=True):
        labelled = set()
        for row in sorted((r for r in select(rows) if keep(r)), key=lambda r: (r["K"], r["seed"])):
            run = runs[row["run"]]
            steps, cand = series(run, "candidate_loss")
            colour = colours.setdefault(row["K"], f"C{len(colours)}")
            label = None if row["K"] in labelled else f"K={row['K']}"
            labelled.add(row["K"])
            ax.plot(steps, cand / run["log_k"], color=colour, linewidth=1, label=label)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8, label="log K")
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=0.8, label="τ threshold 0.5 log K")
        ax.set(title=f"{title}: candidate loss (each seed)", xlabel="step", ylabel="candidate loss / log K")
        ax.legend(fontsize=8)
    save_figure(fig, out / "loss_curves.png")


def plot_direction(rows: list[dict], runs: dict[str, dict], out: Path) -> None:
    """Training loss per answer token of A -> B and (B, z) -> A at K = 10, each seed."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for direction, colour, name in (
        ("bz_to_a", "C0", "(B, z) -> A"),
        ("a_to_b", "C1", "A -> B"),
        ("az_to_b", "C2", "(A, z) -> B"),
    ):
        chosen = [r for r in select(rows, direction=direction, K=10) if r["n_b"] == 200]
        for index, row in enumerate(sorted(chosen, key=lambda r: r["seed"])):
            steps, losses = zip(*runs[row["run"]]["losses"], strict=True)
            ax.plot(steps, losses, color=colour, linewidth=1, label=name if index == 0 else None)
    ax.axhline(SOLVED_LOSS, color="grey", linestyle="--", linewidth=0.8, label=f"learned: loss {SOLVED_LOSS}")
    ax.set(yscale="log", xlabel="step", ylabel="training loss per answer token (nats)",
           title="direction at K = 10, D = 2,000 (each seed)")  # fmt: skip
    ax.legend(fontsize=8)
    save_figure(fig, out / "direction.png")


def plot_schedules(rows: list[dict], runs: dict[str, dict], out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, n_b in zip(axes, (200, 1000), strict=True):
        for schedule, colour in (("constant", "C0"), ("cosine", "C3")):
            chosen = sorted(select(rows, K=10, n_b=n_b, schedule=schedule), key=lambda r: r["seed"])
            for index, row in enumerate(chosen):
                run = runs[row["run"]]
                steps, cand = series(run, "candidate_loss")
                ax.plot(steps, cand / run["log_k"], color=colour, linewidth=1,
                        label=f"{schedule} (each seed)" if index == 0 else None)  # fmt: skip
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=0.8, label="τ threshold")
        ax.set(title=f"optimiser schedule, K = 10, D = {10 * n_b:,}", xlabel="step", ylabel="candidate loss / log K")
        ax.legend(fontsize=8)
    save_figure(fig, out / "schedules.png")


def plot_dz_attention(run: dict, out: Path, name: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    steps, dz = series(run, "z_shuffle_gap")
    ax.plot(steps, dz / run["log_k"], label="Δz / log K (z shuffled minus clean, first token)")
    steps, cand = series(run, "candidate_loss")
    ax.plot(steps, cand / run["log_k"], label="candidate loss / log K")
    ax2 = ax.twinx()
    for column in [c for c in run["diagnostics"][0] if c.startswith("attn_z_l0h")]:
        s, a = series(run, column)
        ax2.plot(s, a, linestyle="--", linewidth=1, label=f"selector attention {column.removeprefix('attn_z_')}")
    if run["tau"]:
        ax.axvline(run["tau"], color="black", linestyle=":", linewidth=1, label="τ")
        ax.axvline(run["tau"] / 2, color="grey", linestyle=":", linewidth=1, label="τ / 2")
    ax.set(title=f"{run['name']}: Δz and layer-0 selector attention", xlabel="step", ylabel="fraction of log K")
    ax2.set_ylabel("attention mass on z (layer 0, dashed)")
    lines, lines2 = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="center left")
    save_figure(fig, out / name)


def plot_group_heatmap(run: dict, out: Path, name: str) -> None:
    rows = run["groups"]
    groups = [c for c in rows[0] if c != "step"]
    steps = np.array([r["step"] for r in rows])
    matrix = np.array([[r[g] for r in rows] for g in groups])
    fig, ax = plt.subplots(figsize=(9, 5))
    image = ax.imshow(matrix[np.argsort(switch_steps(run))], aspect="auto", cmap="viridis", vmin=0, vmax=1,
                      extent=(steps[0], steps[-1], len(groups), 0), interpolation="nearest")  # fmt: skip
    if run["tau"]:
        ax.axvline(run["tau"], color="white", linestyle=":", linewidth=1, label="τ")
        ax.legend(loc="lower left", fontsize=8)
    ax.set(title=f"{run['name']}: per-base accuracy (bases sorted by switch step)", xlabel="step", ylabel="base")
    fig.colorbar(image, ax=ax, label="accuracy over the base's K rows (teacher forced)")
    save_figure(fig, out / name)


def plot_setup(rows: list[dict], runs: dict[str, dict], out: Path) -> None:
    # set-up changes of the study's setting; runs trained with a head removed are C5's, not set-ups
    chosen = [r for r in rows if r["direction"] == "bz_to_a" and r["K"] == 10 and r["D"] == 2000 and r["lr"] == 0.001
              and r["batch"] == 128 and r["schedule"] == "constant" and r["seed"] == 0
              and not r["setup"].startswith("ablate_")]  # fmt: skip
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in sorted(chosen, key=lambda r: r["setup"]):
        run = runs[row["run"]]
        steps, cand = series(run, "candidate_loss")
        ax.plot(steps, cand / run["log_k"], label=f"{variant(run)}: τ = {row['tau']}")
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=0.8, label="τ threshold")
    ax.set(
        title="candidate loss by set-up (K = 10, D = 2,000, seed 0)", xlabel="step", ylabel="candidate loss / log K"
    )
    ax.legend(fontsize=7)
    save_figure(fig, out / "setup.png")


# -- the mechanism claims (C5, C6, C8): each seed's curve, and the mean with its 95% interval over seeds -------------


def _over_seeds(curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> list:
    """Per grid point, the summary over the curves that reach it (each interpolated there)."""
    points = []
    for x in grid:
        at = [float(np.interp(x, xs, ys)) for xs, ys in curves if len(xs) and xs[0] <= x <= xs[-1]]
        points.append(summarize(at) if at else None)
    return points


def plot_routing(rows: list[dict], runs: dict[str, dict], routing: list[dict], out: Path) -> None:
    """C5's lead: each base-point seed's routing head's selector attention and its candidate loss against step / τ;
    the routing head's onset / τ of every run against D (mean, 95% interval over seeds), the study's 0.5 τ beside."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    sweep = [r for r in routing if r["setup"] == "study" and (r["lr"], r["batch"]) == (0.001, 128)]
    base = [r for r in sweep if (r["K"], r["D"], r["schedule"]) == (10, 2000, "constant")]
    for index, entry in enumerate(sorted(base, key=lambda r: r["seed"])):
        run, tau = runs[entry["run"]], float(entry["tau"])
        steps, attn = series(run, f"attn_z_{entry['routing_head']}")
        left.plot(steps / tau, attn, color=f"C{index}", marker=".", label=f"s{entry['seed']} {entry['routing_head']}")
        steps, cand = series(run, "candidate_loss")
        left.plot(steps / tau, cand / run["log_k"], color=f"C{index}", linestyle=":", linewidth=1,
                  label=f"s{entry['seed']} candidate loss / log K")  # fmt: skip
    left.axvline(0.5, color="black", linestyle="--", linewidth=0.8, label="study: onset ~0.5 τ")
    left.axvline(1.0, color="grey", linestyle=":", linewidth=0.8, label="τ")
    left.set(xlabel="step / τ", ylabel="attention mass on z (routing head) / candidate loss over log K",
             title="K = 10, D = 2,000: each seed's layer-0 routing head")  # fmt: skip
    left.legend(fontsize=7)
    for schedule, marker in (("constant", "o"), ("cosine", "s")):
        chosen = [r for r in sweep if r["K"] == 10 and r["schedule"] == schedule and r["onset_over_tau"] != ""]
        xs = sorted({r["D"] for r in chosen})
        pts = [summarize([float(r["onset_over_tau"]) for r in chosen if r["D"] == x]) for x in xs]
        if xs:
            error_bars(right, xs, pts, marker=marker, linestyle="-", label=f"K = 10, {schedule} lr (mean, 95% CI)")
    others = [r for r in sweep if r["K"] != 10 and r["onset_over_tau"] != ""]
    if others:
        right.scatter([r["D"] for r in others], [r["onset_over_tau"] for r in others], marker="^", color="C2",
                      label="K = 5, 20 (each run)")  # fmt: skip
    right.axhline(0.5, color="black", linestyle="--", linewidth=0.8, label="study: ~0.5 τ")
    right.axhline(1.0, color="grey", linestyle=":", linewidth=0.8, label="τ")
    right.set(xscale="log", ylim=(0, 1.2), xlabel="D = K · n_b", ylabel="routing head onset / τ",
              title="when the layer-0 routing head passes halfway")  # fmt: skip
    right.legend(fontsize=7)
    save_figure(fig, out / "c5_routing.png")


ABLATION_STYLE = {"base": ("-", "no head removed"), "from_start": ("--", "routing head zeroed from step 0"),
                  "from_quarter_tau": ("-.", "routing head zeroed from 0.25 τ"),
                  "control_from_start": (":", "control layer-0 head zeroed from step 0")}  # fmt: skip


def plot_training_ablation(runs: dict[str, dict], table: list[dict], out: Path) -> None:
    """C5's delay: per seed, the candidate loss with and without the head; τ of each (mean, 95% interval, seeds)."""
    seeds = sorted({r["seed"] for r in table})
    fig, axes = plt.subplots(1, len(seeds) + 1, figsize=(4.5 * (len(seeds) + 1), 4.2), squeeze=False)
    base_runs = {r["seed"]: r["base_run"] for r in table}
    for ax, seed in zip(axes[0], seeds, strict=False):
        entries = [("base", base_runs[seed], "")] + [(r["ablation"], r["run"], r["head"]) for r in table
                                                     if r["seed"] == seed]  # fmt: skip
        for kind, name, head in entries:
            run = runs[name]
            steps, cand = series(run, "candidate_loss")
            style, label = ABLATION_STYLE[kind]
            ax.plot(steps, cand / run["log_k"], linestyle=style, label=f"{label} {head}".strip())
        ax.axhline(0.5, color="grey", linewidth=0.8, label="τ threshold")
        ax.set(xlabel="step", ylabel="candidate loss / log K", title=f"seed {seed}: training with a head zeroed")
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    kinds = ["base", *[k for k in ABLATION_STYLE if k != "base" and any(r["ablation"] == k for r in table)]]
    for position, kind in enumerate(kinds):
        if kind == "base":
            taus = sorted({(r["seed"], r["tau_base"]) for r in table})
            values_ = [t for _, t in taus]
        else:
            values_ = [r["tau_ablated"] for r in table if r["ablation"] == kind]
        error_bars(
            ax, [position], [summarize(values_)], color="black", label="mean, 95% CI" if position == 0 else None
        )
        ax.scatter([position + 0.1] * len(values_), values_, color="C1", s=12,
                   label="each seed" if position == 0 else None)  # fmt: skip
    ax.set_xticks(range(len(kinds)), [ABLATION_STYLE[k][1].replace(" zeroed", "\nzeroed") for k in kinds], fontsize=7)
    ax.set(ylabel="τ (steps)", title="τ over the seeds")
    ax.legend(fontsize=7)
    save_figure(fig, out / "c5_ablation.png")


def plot_collective(rows: list[dict], runs: dict[str, dict], table: list[dict], out: Path) -> None:
    """C8: the share of measured bases at >= 80% accuracy against step / τ, each base-point seed and their mean with
    its 95% interval, and the largest D; the study's two figures (0 at τ/2, almost all at τ) as markers."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    grid = np.linspace(0, 2, 81)
    for (k, d), colour in (((10, 2000), "C0"), ((10, max((r["D"] for r in table if r["K"] == 10), default=0)), "C3")):
        chosen = [r for r in table if (r["K"], r["D"], r["schedule"], r["setup"], r["lr"], r["batch"])
                  == (k, d, "constant", "study", 0.001, 128)]  # fmt: skip
        if not chosen or (colour == "C3" and d == 2000):
            continue
        curves = []
        for entry in chosen:
            run, tau = runs[entry["run"]], float(entry["tau"])
            steps = np.array([g["step"] for g in run["groups"]])
            shares = np.array([share_switched_at(run, s) for s in steps])
            curves.append((steps / tau, shares))
            ax.plot(steps / tau, shares, color=colour, linewidth=0.6, alpha=0.5)
        kept = [(x, p) for x, p in zip(grid, _over_seeds(curves, grid), strict=True) if p is not None]
        xs, means = [x for x, _ in kept], [p.mean for _, p in kept]
        ax.plot(xs, means, color=colour, linewidth=1.8,
                label=f"K = {k}, D = {d:,}: mean over {len(chosen)} seed(s) (thin: each)")  # fmt: skip
        if len(chosen) > 1:
            low = [p.low if p.low is not None else p.mean for _, p in kept]
            high = [p.high if p.high is not None else p.mean for _, p in kept]
            ax.fill_between(xs, np.clip(low, 0, 1), np.clip(high, 0, 1), color=colour, alpha=0.2,
                            label="95% CI over the seeds")  # fmt: skip
    ax.scatter([0.5, 1.0], [0.0, 1.0], marker="*", s=150, color="black", zorder=5,
               label="study: 0% at τ/2, almost all at τ")  # fmt: skip
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=0.8)
    ax.set(xlabel="step / τ", ylabel="share of measured bases at >= 80% accuracy", ylim=(-0.05, 1.05),
           title="the collective switch: bases at 80% against step / τ")  # fmt: skip
    ax.legend(fontsize=7, loc="center left")
    save_figure(fig, out / "c8_collective.png")


def plot_hessian(table: list[dict], out: Path) -> None:
    """C6 over seeds: top / |escape curvature| against step / τ (the study's 500-1,000x band beside), and the top
    and bottom eigenvalues."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, seed in enumerate(sorted({r["seed"] for r in table})):
        mine = [r for r in table if r["seed"] == seed]
        x = [r["step_over_tau"] for r in mine]
        left.plot(x, [r["top_over_escape"] for r in mine], "o-", color=f"C{index}", label=f"seed {seed}")
        right.plot(x, [r["top"] for r in mine], "o-", color=f"C{index}", label=f"top eigenvalue, seed {seed}")
        right.plot(x, [r["bottom"] for r in mine], "s--", color=f"C{index}", label=f"bottom eigenvalue, seed {seed}")
    left.axhspan(500, 1000, color="grey", alpha=0.3, label="study: 500-1,000x")
    for ax in (left, right):
        ax.axvline(1.0, color="black", linestyle=":", linewidth=1, label="τ")
    right.axhline(0, color="black", linewidth=0.6)
    left.set(yscale="log", xlabel="step / τ", ylabel="top eigenvalue / |curvature along the escape direction|",
             title="how much flatter the escape direction is")  # fmt: skip
    right.set(yscale="symlog", xlabel="step / τ", ylabel="Hessian eigenvalue (symmetric log scale)",
              title="top and bottom eigenvalues (bottom < 0: a saddle)")  # fmt: skip
    left.legend(fontsize=7)
    right.legend(fontsize=6)
    save_figure(fig, out / "hessian.png")
