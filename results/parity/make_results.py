"""Tables, plots and verdicts of results/parity/ (second round) from the run records the harness keeps.

    python -m hf_icot.studies run results/parity     # the runs of runs.yaml still missing
    python -m results.parity.make_results            # this folder's tables, plots and claims.csv, from runs/

A run's group is its name without the seed (``a_paper_log_icot_s3`` -> ``a_paper_log_icot``). Writes ``seeds.csv`` /
``.md`` (per group: seeds, successes, implicit and explicit answer EM with 95% intervals), ``children.csv`` / ``.md``
(per theory-transformer group and layer: nodes attending to their children, over seeds), ``stages.csv`` / ``.md``
(per stage change of model A: the transient spike and the drop, seeds with each), ``mlp.csv`` / ``.md`` (the MLPs'
accuracy with no CoT shown per (n, k)), ``loss_a_paper.png`` (validation and training loss of model A per step, mean
and interval over seeds, stage boundaries marked), ``attention_<run>.png`` (the final attention of one seed), and the
verdict columns of ``claims.csv`` (rules fixed in it before the runs); B5's ``budget.csv`` / ``.md`` and
``budget.png`` come from ``parity_budget.py``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, STAGES_FILE, TRAINING_LOG_FILE
from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import (
    fmt,
    read_json,
    record_folders,
    write_table,
)
from hf_icot.studies.statistics import summarize
from hf_icot.studies.sweep import RECORD_FILE
from results.parity.parity_budget import GROUPS as BUDGET_GROUPS
from results.parity.parity_budget import budget_rows, plot_budget, verdict_b5
from results.parity.parity_plots import plot_attention, plot_losses
from results.parity.rules import RULES, fisher_p

HERE = Path(__file__).resolve().parent
SUCCESS = 0.99  # test implicit answer EM of a successful seed (B1, A8-parity)
ATTENTION_FILE = "attention.json"
SEED = re.compile(r"_s\d+$")
Groups = dict[str, list[dict[str, Any]]]


def load_runs(folder: Path) -> list[dict[str, Any]]:
    """Every recorded run that finished: its group, seed, metrics, log, stages and attention report."""
    runs = []
    for path in record_folders(folder):
        record = read_json(path / RECORD_FILE) or {}
        metrics = read_json(path / EVAL_RESULTS_FILE)
        if record.get("status") != "ok" or metrics is None:
            continue
        runs.append(
            {
                "name": path.name,
                "group": SEED.sub("", path.name),
                "seed": record.get("seed"),
                "metrics": metrics,
                "log": read_json(path / TRAINING_LOG_FILE) or [],
                "stages": read_json(path / STAGES_FILE) or [],
                "attention": read_json(path / ATTENTION_FILE),
                "model_type": (read_json(path / "config.json") or {}).get("model_type"),
            }
        )
    return runs


def grouped(runs: list[dict[str, Any]]) -> Groups:
    groups: Groups = {}
    for run in runs:
        groups.setdefault(run["group"], []).append(run)
    return groups


#: GPT-2 trained with placeholders in the removed positions is asked ``question <eos> <eos>`` by the implicit
#: generation eval (no padded prompt), so its implicit EM is 0 by construction; its accuracy with every CoT position
#: padded is the trainer's teacher-forced one on validation at the last evaluation (``eval_answer_acc_no_cot``)
PADDED_BY_TEACHER_FORCING = ("gpt2_",)


def implicit(run: dict[str, Any]) -> float | None:
    """Accuracy with no CoT: test implicit answer EM (theory transformers), the MLP's test accuracy with 0 steps
    shown, or for GPT-2 the last teacher-forced validation answer accuracy with every CoT position padded."""
    if run["group"].startswith(PADDED_BY_TEACHER_FORCING):
        padded = [e["eval_answer_acc_no_cot"] for e in run["log"] if "eval_answer_acc_no_cot" in e]
        return padded[-1] if padded else None
    metrics = run["metrics"]
    return metrics.get("test/implicit/answer_em", metrics.get("test/shown=0/answer_acc"))


def explicit(run: dict[str, Any]) -> float | None:
    metrics = run["metrics"]
    shown = [key for key in metrics if key.startswith("test/shown=")]
    if shown:  # the MLP with every step shown
        return metrics[max(shown, key=lambda key: int(key.split("=")[1].split("/")[0]))]
    return metrics.get("test/explicit/answer_em")


def succeeded(run: dict[str, Any]) -> bool:
    return (implicit(run) or 0) >= SUCCESS


def successes(group: list[dict[str, Any]]) -> int:
    return sum(succeeded(run) for run in group)


def seed_rows(groups: Groups) -> list[dict[str, Any]]:
    rows = []
    for name, group in groups.items():
        values = [implicit(run) for run in group if implicit(run) is not None]
        shown = [explicit(run) for run in group if explicit(run) is not None]
        rows.append(
            {
                "group": name,
                "seeds": len(group),
                f"successes (implicit >= {SUCCESS})": f"{successes(group)}/{len(group)}",
                "test implicit EM": summarize(values).text() if values else "",
                "test explicit EM (MLP: all shown)": summarize(shown).text() if shown else "",
            }
        )
    return rows


def children_rows(groups: Groups) -> list[dict[str, Any]]:
    """Per theory-transformer group and layer: nodes found per seed (and the share over every seed)."""
    rows = []
    for name, group in groups.items():
        reports = [run for run in group if run["attention"]]
        if not reports:
            continue
        for layer in reports[0]["attention"]["layers"]:
            per_seed = [next(x for x in r["attention"]["layers"] if x["layer"] == layer["layer"]) for r in reports]
            found, total = sum(x["found"] for x in per_seed), sum(x["nodes"] for x in per_seed)
            rows.append(
                {
                    "group": name,
                    "layer": layer["layer"],
                    "nodes": layer["nodes"],
                    "found per seed": " ".join(f"{x['found']}" for x in per_seed),
                    "share over seeds": fmt(found / total),
                }
            )
    return rows


def node_share(group: list[dict[str, Any]]) -> float | None:
    """The share of every seed's nodes that attend to their children (B2)."""
    layers = [x for run in group if run["attention"] for x in run["attention"]["layers"]]
    total = sum(x["nodes"] for x in layers)
    return sum(x["found"] for x in layers) / total if total else None


def stage_changes(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per stage change of a run logged every step: the training loss of the stage's first step (new layout, before
    its update), the previous stage's last validation loss, and the stage's validation loss after its step."""
    train = {entry["step"]: entry["loss"] for entry in run["log"] if "loss" in entry}
    valid = {entry["step"]: entry["eval_loss"] for entry in run["log"] if "eval_loss" in entry}
    changes = []
    for stage in run["stages"][1:]:
        first, last = stage["start_step"] + 1, stage["end_step"]  # logged steps count from 1
        if first in train and first - 1 in valid and last in valid:
            changes.append(
                {
                    "stage": stage["index"],
                    "spike": train[first] > valid[first - 1],
                    "drop": valid[last] < train[first],
                }
            )
    return changes


def stage_rows(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_stage: dict[int, list[dict[str, Any]]] = {}
    for run in group:
        for change in stage_changes(run):
            by_stage.setdefault(change["stage"], []).append(change)
    return [
        {
            "stage": stage,
            "seeds": len(changes),
            "spike (first-step training loss > last validation loss)": sum(c["spike"] for c in changes),
            "drop (validation loss after the step < its training loss)": sum(c["drop"] for c in changes),
        }
        for stage, changes in sorted(by_stage.items())
    ]


def per_seed_rows(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per seed of a model-A group logged every step: the validation loss and the no-CoT validation accuracy
    after each step (the curve in numbers), the children found per layer, the test result."""
    rows = []
    for run in sorted(group, key=lambda r: r["seed"]):
        log = sorted(
            (e for e in run["log"] if "eval_loss" in e or "eval_answer_acc_no_cot" in e), key=lambda e: e["step"]
        )
        losses = " ".join(fmt(e["eval_loss"]) for e in log if "eval_loss" in e)
        no_cot = " ".join(fmt(e["eval_answer_acc_no_cot"]) for e in log if "eval_answer_acc_no_cot" in e)
        layers = (run["attention"] or {}).get("layers", [])
        rows.append(
            {
                "seed": run["seed"],
                "test implicit EM": fmt(implicit(run)),
                "success": succeeded(run),
                "validation loss after each step": losses,
                "no-CoT validation accuracy after each step": no_cot,
                "children found per layer": " ".join(f"{x['found']}/{x['nodes']}" for x in layers),
            }
        )
    return rows


def mlp_rows(groups: Groups) -> list[dict[str, Any]]:
    rows = []
    for name, group in groups.items():
        point = re.match(r"c_(e2e|mixture|curriculum)_n(\d+)_k(\d+)$", name)
        if point:
            values = [implicit(run) for run in group if implicit(run) is not None]
            summary = summarize(values).text() if values else ""
            rows.append(
                {
                    "schedule": point[1],
                    "n": int(point[2]),
                    "k": int(point[3]),
                    "seeds": len(group),
                    "no CoT shown": summary,
                }
            )
    return sorted(rows, key=lambda row: (row["n"], row["k"], row["schedule"]))


def rate(groups: Groups, name: str) -> tuple[int, int]:
    """(successful seeds, seeds) of a group; (0, 0) when it has no run."""
    group = groups.get(name, [])
    return successes(group), len(group)


def mean_of(groups: Groups, name: str) -> float:
    values = [implicit(run) for run in groups.get(name, []) if implicit(run) is not None]
    return summarize(values).mean if values else float("nan")


def _result(claim: str, figures: dict[str, Any], **columns: Any) -> dict[str, Any]:
    """The ledger columns of ``claim`` by its rule (``rules.py``) on ``figures``: verdict and flag, and ``columns``."""
    decision = RULES[claim](figures)
    return {"verdict": decision.verdict, "flag": decision.flag, **columns}


def verdict_b1(groups: Groups, group: str = "a_paper_log_icot", claim: str = "B1") -> dict[str, Any] | None:
    won, n = rate(groups, group)
    if not n:
        return None
    values = summarize([implicit(run) for run in groups[group]]).text()
    return _result(claim, {"successes": won, "seeds": n}, seeds=n, ours=f"{won}/{n} seeds >= {SUCCESS}; test implicit "
                   f"{values}")  # fmt: skip


def verdict_b2(groups: Groups, group: str = "a_paper_log_icot", claim: str = "B2") -> dict[str, Any] | None:
    share = node_share(groups.get(group, []))
    if share is None:
        return None
    seeds = len(groups[group])
    shares = [value for value in (node_share([run]) for run in groups[group]) if value is not None]  # per seed
    return _result(claim, {"share": share, "per_seed": shares}, seeds=seeds,
                   ours=f"{fmt(share)} of the nodes of {seeds} seeds (children.md)")  # fmt: skip


def verdict_b3(groups: Groups) -> dict[str, Any] | None:
    """B3 over both groups of each curriculum at n^3 (``a_paper_*``, seeds 0-9, and ``a_b3_*``, seeds 10-19)."""
    log_icot = [run for name in B3_LOG_ICOT for run in groups.get(name, [])]
    stepwise = [run for name in B3_STEPWISE for run in groups.get(name, [])]
    if not (log_icot and stepwise):
        return None
    figures = {"log_icot": [float(succeeded(run)) for run in log_icot],
               "stepwise": [float(succeeded(run)) for run in stepwise]}  # fmt: skip
    won, step_won = successes(log_icot), successes(stepwise)
    gpt2 = [f"{name} {w}/{t}" for name in ("gpt2_log_icot", "gpt2_stepwise") for w, t in [rate(groups, name)] if t]
    ours = (f"Log-ICoT {won}/{len(log_icot)}, token by token {step_won}/{len(stepwise)} at equal samples (Fisher's "
            f"exact two-sided p = {fisher_p(figures):.3g}); GPT-2 (Adam): ")  # fmt: skip
    return _result(
        "B3", figures, seeds=f"{len(log_icot)} + {len(stepwise)}", ours=ours + (", ".join(gpt2) or "not run")
    )


def verdict_b4(groups: Groups) -> dict[str, Any] | None:
    runs = groups.get("a_paper_log_icot", [])
    if not runs:
        return None
    clean = sum(
        bool(changes) and all(c["spike"] and c["drop"] for c in changes) for changes in map(stage_changes, runs)
    )
    ours = f"spike and drop at every stage change in {clean}/{len(runs)} seeds (stages.md)"
    return _result("B4", {"successes": clean, "seeds": len(runs)}, seeds=len(runs), ours=ours)


def verdict_a8(groups: Groups) -> dict[str, Any] | None:
    model_b = groups.get("b_paper_stepwise", [])
    if not model_b:
        return None
    won = sum(succeeded(run) and (explicit(run) or 0) >= SUCCESS for run in model_b)
    (e2e, e2e_n), (zero, zero_n) = rate(groups, "b_paper_no_cot"), rate(groups, "b_paper_zero_reads")
    ours = (
        f"{won}/{len(model_b)} seeds internalize; end to end {e2e}/{e2e_n}; "
        f"removed steps reading 0 instead: {zero}/{zero_n}"
    )
    # the seed leaves open what a removed position holds: the rule's reading agrees under it
    return _result("A8-parity", {"successes": won, "seeds": len(model_b)}, seeds=len(model_b), ours=ours)


def verdict_a9(groups: Groups) -> dict[str, Any] | None:
    """At the first (n, k) where the end-to-end MLP fails (mean < 0.60 over >= 3 seeds)."""
    table = {(row["schedule"], row["n"], row["k"]): row for row in mlp_rows(groups)}
    failing = sorted(
        (n, k)
        for (kind, n, k) in table
        if kind == "e2e" and len(groups[f"c_e2e_n{n}_k{k}"]) >= 3 and mean_of(groups, f"c_e2e_n{n}_k{k}") < 0.6
    )
    if not failing:
        return None
    n, k = failing[0]
    point = f"n{n}_k{k}"
    mixture, curriculum = groups.get(f"c_mixture_{point}", []), groups.get(f"c_curriculum_{point}", [])
    if len(mixture) < 5 or not curriculum:
        return None
    values = {name: [implicit(run) for run in groups[f"c_{name}_{point}"] if implicit(run) is not None]
              for name in ("mixture", "e2e")}  # fmt: skip
    figures = {**values, "curriculum_mean": mean_of(groups, f"c_curriculum_{point}")}
    shown = [
        f"{kind} {table[(kind, n, k)]['no CoT shown']}"
        for kind in ("e2e", "curriculum", "mixture")
        if (kind, n, k) in table
    ]
    return _result("A9", figures, seeds=len(mixture), ours=f"n = {n}, k = {k}: " + "; ".join(shown))


def verdict_a10(groups: Groups) -> dict[str, Any] | None:
    """End to end against CoT then removal, for every model with both groups run (model A at B = n^4 once both its
    groups have every seed); model B alone reaching 80% agrees under our reading (A8-parity's)."""
    pairs = [(cot, e2e) for cot, e2e in PAIRS if groups.get(cot) and groups.get(e2e)]
    complete = [(cot, e2e) for cot, e2e in PAIRS_N4 if min(len(groups.get(cot, [])), len(groups.get(e2e, []))) >= 10]
    pairs += complete
    if not pairs:
        return None
    counts = [(cot, successes(groups[cot]), len(groups[cot]), successes(groups[e2e]), len(groups[e2e]))
              for cot, e2e in pairs]  # fmt: skip
    ours = "; ".join(
        f"{cot}: {successes(groups[cot])}/{len(groups[cot])} vs end to end {successes(groups[e2e])}/{len(groups[e2e])}"
        for cot, e2e in pairs
    )
    if not any(pair in pairs for pair in PAIRS_N4):
        ours += "; model A at n^4 end to end not yet run (a_budget_no_cot_b810000)"
    seeds = ", ".join(str(len(groups[cot])) for cot, _ in pairs)
    return _result("A10", {"pairs": counts, "model_b": MODEL_B}, seeds=seeds, ours=ours)


VERDICTS = {
    "B1": verdict_b1, "B2": verdict_b2, "B3": verdict_b3, "B4": verdict_b4,
    "B1-n4": lambda groups: verdict_b1(groups, FRESH_N4, "B1-n4"),
    "B2-n4": lambda groups: verdict_b2(groups, FRESH_N4, "B2-n4"),
    "B5": lambda groups: verdict_b5(groups, succeeded), "A8-parity": verdict_a8, "A9": verdict_a9,
    "A10": verdict_a10,
}  # fmt: skip
# CoT-then-removal groups and their end-to-end baselines at the same budget (A10)
PAIRS = [("a_paper_log_icot", "a_paper_no_cot"), ("b_paper_stepwise", "b_paper_no_cot"),
         ("c_curriculum_n30_k8", "c_e2e_n30_k8"), ("c_mixture_n30_k8", "c_e2e_n30_k8"),
         ("gpt2_log_icot", "gpt2_no_cot"), ("gpt2_stepwise", "gpt2_no_cot")]  # fmt: skip
# model A at B = n^4 (issue 40): counted by A10 once both groups have every seed, never holding it pending;
# FRESH_N4: B1-n4's and B2-n4's Log-ICoT at B = n^4 on fresh seeds 10-19
PAIRS_N4, MODEL_B = [("a_budget_log_icot_b810000", "a_budget_no_cot_b810000")], "b_paper_stepwise"
FRESH_N4 = "a_fresh_log_icot_b810000"
#: B3's groups at n^3 (re-registered 2026-12-07, issue 54: 20 seeds a curriculum, the a_b3_* groups seeds 10-19)
B3_LOG_ICOT, B3_STEPWISE = ("a_paper_log_icot", "a_b3_log_icot"), ("a_paper_stepwise", "a_b3_stepwise")


# the groups each claim's rule reads, with the seeds it asks for (A9 checks its own counts)
DECIDING = {
    "B1": ["a_paper_log_icot"], "B2": ["a_paper_log_icot"], "B4": ["a_paper_log_icot"],
    "B1-n4": [FRESH_N4], "B2-n4": [FRESH_N4],
    "B3": [*B3_LOG_ICOT, *B3_STEPWISE], "A8-parity": ["b_paper_stepwise"],
    "A10": [group for pair in PAIRS for group in pair], "B5": BUDGET_GROUPS,
}  # fmt: skip
RULE_SEEDS = 10
#: groups whose rule asks fewer seeds than RULE_SEEDS: the MLP's (3 end to end, 5 each curriculum) and GPT-2's (3)
GROUP_SEEDS = {"c_curriculum_n30_k8": 5, "c_mixture_n30_k8": 5, "c_e2e_n30_k8": 3,
               "gpt2_log_icot": 3, "gpt2_stepwise": 3, "gpt2_no_cot": 3}  # fmt: skip


def verdicts(groups: Groups) -> dict[str, dict[str, Any]]:
    """The claims with runs in: id -> verdict, seeds, ours. A claim whose rule's seeds are not all in stays
    ``pending``, its figures so far in ``ours``; a claim with no deciding run yet is left out."""
    found = {}
    for claim, rule in VERDICTS.items():
        result = rule(groups)
        if result is None:
            continue
        asked = {name: GROUP_SEEDS.get(name, RULE_SEEDS) for name in DECIDING.get(claim, [])}
        short = [
            f"{name} {len(groups.get(name, []))}/{n}" for name, n in asked.items() if len(groups.get(name, [])) < n
        ]
        if short:
            result = {**result, "verdict": "pending", "flag": "",
                      "ours": f"so far ({', '.join(short)} seeds): {result['ours']}"}  # fmt: skip
        found[claim] = result
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=HERE / "runs", help="folder of run records (the harness's)")
    parser.add_argument("--out", type=Path, default=HERE, help="where the tables, plots and claims.csv go")
    args = parser.parse_args(argv)
    runs = load_runs(args.runs)
    if not runs:
        raise SystemExit(f"error: no finished run records under {args.runs}; run the sweep first.")
    args.out.mkdir(parents=True, exist_ok=True)
    groups = grouped(runs)
    write_table(seed_rows(groups), args.out, "seeds")
    write_table(children_rows(groups), args.out, "children")
    write_table(mlp_rows(groups), args.out, "mlp")
    if any(groups.get(group) for group in BUDGET_GROUPS):
        write_table(budget_rows(groups, succeeded, implicit), args.out, "budget")
        plot_budget(groups, succeeded, args.out)
    if "a_paper_log_icot" in groups:
        group = groups["a_paper_log_icot"]
        write_table(stage_rows(group), args.out, "stages")
        write_table(per_seed_rows(group), args.out, "a_paper_log_icot_seeds")
        plot_losses(group, [run for run in group if succeeded(run)], args.out, "a_paper_log_icot")
    for name in ("a_paper_log_icot", "b_paper_stepwise"):
        first = min(groups.get(name, []), key=lambda run: run["seed"], default=None)
        if first and first["attention"]:
            plot_attention(first, args.out)
    if (args.out / "claims.csv").exists():
        update_ledger(args.out / "claims.csv", verdicts(groups))


if __name__ == "__main__":
    main()
