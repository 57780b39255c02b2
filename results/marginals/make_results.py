"""Tables, plots and the ledger's verdicts of results/marginals/ from the run records the harness keeps.

    python -m hf_icot.studies run results/marginals     # the runs of runs.yaml still missing
    python -m results.marginals.make_results --runs results/marginals/runs --out results/marginals

Every folder under ``--runs`` holding ``run.json`` is one run (``results/marginals/train.py``); what it was
(direction, K, n_b, optimiser and its schedule, seed, set-up) is read from its records, never from its name. Writes:

* ``runs.csv`` / ``.md`` — one row per run (``marginals_runs.summarise``): τ (candidate loss crossing 0.5 log K,
  interpolated between measurements; ``tau_resolution`` the interval it lies in), the plateau's candidate loss against
  log K (ratio and difference, C1) and the drop's width, onsets, switches, the steps to a training loss of 0.05;
* ``points.csv`` / ``.md`` — one row per sweep point: its seeds and each figure's mean ± 95% t-interval and range;
* ``tau_fit.csv`` / ``.md`` — τ ∝ D^δ over every run of the D sweep with a bootstrap interval over the runs;
* ``schedules.csv`` / ``.md`` — τ under the constant lr and the study's warm-up + cosine + clipping;
* ``c5_routing.csv`` / ``.md`` — per run, the layer-0 head that routes z first, its onset / τ, the earliest head of
  any layer, and the routing head's zero-ablation cost after the transition (``marginals_mechanism``);
* ``c5_ablation.csv`` / ``.md`` — per run trained with a head zeroed: the head, from which step, τ with and without;
* ``c8_collective.csv`` / ``.md`` — per run, the share of measured bases at 80% accuracy at τ/2, τ and 1.5 τ;
* ``hessian.csv`` / ``.md`` — every Hessian measurement (top, bottom eigenvalue, escape curvature) against τ;
* the plots (``marginals_plots``) and, with ``--ledger``, the verdict columns of ``claims.csv`` for C1-C8
  (``marginals_claims``, ``marginals_mechanism``; the claims and rules stay as committed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import write_table
from results.marginals.marginals_claims import (
    c1_plateau,
    c2_tau_flat_in_k,
    c3_exponent,
    c4_noise,
    c7_direction,
    schedules,
    select,
)
from results.marginals.marginals_mechanism import (
    ablation_table,
    c5_claim,
    c6_claim,
    c8_claim,
    collective_table,
    hessian_table,
    routing_table,
)
from results.marginals.marginals_plots import (
    plot_collective,
    plot_direction,
    plot_dz_attention,
    plot_group_heatmap,
    plot_hessian,
    plot_loss_curves,
    plot_noise,
    plot_routing,
    plot_schedules,
    plot_setup,
    plot_tau_vs_d,
    plot_tau_vs_k,
    plot_training_ablation,
)
from results.marginals.marginals_runs import load_run, point_cells, points, summarise

#: the figures ``points.csv`` aggregates over seeds
POINT_FIGURES = ("tau", "plateau_candidate_over_log_k", "plateau_candidate_minus_log_k", "drop_width_over_tau",
                 "steps_to_train_loss_0.05", "attn_onset_over_tau", "switch_iqr_over_tau", "bases_at_80pct_half_tau",
                 "bases_at_80pct_tau")  # fmt: skip


def mechanism_tables(rows: list[dict], runs: dict[str, dict]) -> dict[str, list[dict]]:
    """The tables of C5, C6 and C8 (``marginals_mechanism``), by the name they are written under."""
    return {"c5_routing": routing_table(rows, runs), "c5_ablation": ablation_table(rows, runs),
            "c8_collective": collective_table(rows, runs), "hessian": hessian_table(rows, runs)}  # fmt: skip


def verdicts(rows: list[dict], runs: dict[str, dict], tables: dict) -> tuple[dict[str, dict], dict | None]:
    """The ledger's result columns of every claim (pending ones left out), and the D^δ fit."""
    c3, fit = c3_exponent(rows)
    results = {"C1": c1_plateau(rows), "C2": c2_tau_flat_in_k(rows), "C3": c3, "C4": c4_noise(rows),
               "C5": c5_claim(rows, runs), "C6": c6_claim(tables["hessian"]), "C7": c7_direction(rows),
               "C8": c8_claim(tables["c8_collective"])}  # fmt: skip
    return {claim: result for claim, result in results.items() if result.get("verdict") != "pending"}, fit


def plots(rows: list[dict], runs: dict[str, dict], fit: dict | None, tables: dict, out: Path) -> None:
    plot_tau_vs_d(rows, fit, out)
    plot_tau_vs_k(rows, out)
    plot_noise(rows, out)
    plot_loss_curves(rows, runs, out)
    if select(rows, direction="a_to_b") or select(rows, direction="az_to_b"):
        plot_direction(rows, runs, out)
    if select(rows, schedule="cosine"):
        plot_schedules(rows, runs, out)
    if len({r["setup"] for r in rows}) > 1:
        plot_setup(rows, runs, out)
    base = sorted(select(rows, K=10, n_b=200), key=lambda r: r["seed"])
    if base:
        run = runs[base[0]["run"]]
        plot_dz_attention(run, out, "dz_attention.png")
        if run["groups"]:
            plot_group_heatmap(run, out, "group_heatmap.png")
    if tables["c5_routing"]:
        plot_routing(rows, runs, tables["c5_routing"], out)
    if tables["c5_ablation"]:
        plot_training_ablation(runs, tables["c5_ablation"], out)
    if tables["c8_collective"]:
        plot_collective(rows, runs, tables["c8_collective"], out)
    if tables["hessian"]:
        plot_hessian(tables["hessian"], out)
    largest = sorted(select(rows, K=10), key=lambda r: (-r["D"], r["seed"]))
    if largest and largest[0]["D"] != 2000:  # the longest plateau, the study's own size where the sweep reaches it
        run = runs[largest[0]["run"]]
        plot_dz_attention(run, out, "dz_attention_largest_d.png")
        if run["groups"]:
            plot_group_heatmap(run, out, "group_heatmap_largest_d.png")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, help="Folder of run records (results/marginals/runs) or run folders.")
    parser.add_argument("--out", required=True, help="Where the tables and plots go.")
    parser.add_argument("--ledger", default=None, help="claims.csv whose verdict columns to fill (default: none).")
    args = parser.parse_args(argv)
    folders = sorted(p.parent for p in Path(args.runs).glob("*/run.json"))
    if not folders:
        raise SystemExit(
            f"error: {args.runs} holds no run folders with run.json; run `python -m hf_icot.studies run results/marginals`."
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {folder.name: load_run(folder) for folder in folders}
    rows = [summarise(run) for run in runs.values()]
    write_table(rows, out, "runs")
    write_table(point_cells(points(rows, POINT_FIGURES)), out, "points")
    tables = mechanism_tables(rows, runs)
    for name, table in tables.items():
        if table:
            write_table(table, out, name)
    results, fit = verdicts(rows, runs, tables)
    if fit:
        write_table([fit], out, "tau_fit")
    compared = schedules(rows)
    if compared:
        write_table(compared, out, "schedules")
    plots(rows, runs, fit, tables, out)
    if args.ledger:
        update_ledger(args.ledger, results)
    return rows


if __name__ == "__main__":
    main()
