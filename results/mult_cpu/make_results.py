"""Issue 22 part 2's screens on 3x3 multiplication and M2's 4x4 attempt, from the committed run records (no training).

python -m results.mult_cpu.make_results [--runs results/mult_cpu/runs] [--out results/mult_cpu]
                                        [--ledger results/mult_cpu/claims.csv] [--readme results/mult_cpu/README.md]

The runs are named like the league's (``mult3x3_<curriculum>_s<seed>``, ``mult4x4_...``) and read by its kit
(:mod:`hf_icot.studies.league`, which ``results/curricula/make_results.py`` uses too), so the table and the curves of
implicit accuracy against examples (``curves_<task>.png``) are the league's. Beside them it writes where each run
stalls:

* ``stall.md`` / ``stall.csv``: per run, the final test and the best held-out implicit exact match (with the examples
  seen then), the CoT tokens removed at the end, and the removal that raised the training loss most: the CoT token
  (by its place in the chain ``p1 + p2 ( s1 ) + p3 ...``: ``pk`` the k-th partial product, ``sk`` the running sum
  after it) and the stage's mean loss before and after;
* ``stall_<task>.png``: the training loss at the end of each count of removed CoT tokens, one line per run, the tokens
  named. The loss is the mean over the labelled tokens, the CoT still kept and the answer, so part of its rise as the
  CoT goes is the answer's growing share; a rise far above its neighbours' is a token the model did not absorb;
* M1's and M2's verdicts in the ledger (``--ledger``): M1 needs a 3x3 setting with 3 seeds to agree and stays
  pending until then; M2 reads the 4x4 runs trained for the steps a quiet hour here allows (named
  ``..._hour``) and reports every 4x4 setting at its budget.
"""

from __future__ import annotations

from pathlib import Path

from hf_icot.studies import league
from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import fill_section, pyplot, save_figure, write_table
from hf_icot.studies.statistics import difference, summarize
from results.mult_cpu.rules import M1_BAR, M1_FLOOR, RULES

HERE = Path(__file__).resolve().parent
TASKS = {"mult3x3": "3x3 multiplication", "mult4x4": "4x4 multiplication"}


def cot_tokens(a_digits: int, b_digits: int) -> list[str]:
    """What each token of the ``a_digits`` x ``b_digits`` chain ``p1 + p2 ( s1 ) + ... + pb`` is (digits least
    significant first): the k-th partial product ``pk`` has ``a_digits + k`` digits, and the running sum ``sk``
    after it as many as the next partial product (3x3: 24 tokens, 4x4: 46)."""
    names = [f"p1[{i}]" for i in range(1, a_digits + 2)]
    for k in range(2, b_digits + 1):
        names += ["+", *(f"p{k}[{i}]" for i in range(1, a_digits + k + 1))]
        if k < b_digits:
            names += ["(", *(f"s{k - 1}[{i}]" for i in range(1, a_digits + k + 1)), ")"]
    return names


#: the chain's tokens per task (the task is the run name's first part, e.g. ``mult4x4``)
COT_TOKENS = {f"mult{n}x{n}": cot_tokens(n, n) for n in (3, 4)}
M2_BUDGET = "_hour"  # M2's runs end in _hour: the steps a quiet hour here allows


def end_losses(run: dict) -> dict[float, float]:
    """The training loss last logged at each count of removed CoT tokens (``inf``: the whole CoT gone), by count."""
    losses: dict[float, float] = {}
    for row in run["log"]:
        if "loss" in row and row.get("cot/removed_tokens") is not None:
            losses[float(row["cot/removed_tokens"])] = row["loss"]
    return dict(sorted(losses.items()))


def _removal(removed: float, tokens: list[str]) -> str:
    """The removal that made the count ``removed``, with the CoT token (of the chain ``tokens``) it took."""
    if removed == float("inf"):
        return f"removing the last token ({tokens[-1]})"
    token = tokens[int(removed) - 1] if 0 < removed <= len(tokens) else f"#{removed:g}"
    return f"removing token {removed:g} ({token})"


def best_held_out(run: dict) -> str:
    """``run``'s best held-out implicit exact match and the examples seen then (``""`` when never measured)."""
    examples, em = max(league.curve(run), key=lambda point: point[1], default=(None, None))
    return "" if examples is None else f"{em:.3f} ({examples:,.0f})"


def stall(run: dict) -> dict:
    """Where ``run`` got stuck: its best held-out implicit score, and the removal after which the loss stayed
    highest above the one before (the loss at the end of each count of removed tokens, after its training)."""
    ends = end_losses(run)
    last = max(ends, default=0.0)
    tokens = COT_TOKENS[run["task"]]
    if league.family(run["curriculum"]) == "e2e":
        removed = "— (no CoT)"
    elif last == float("inf"):
        removed = f"all {len(tokens)}"
    else:
        removed = f"{last:g} tokens"
    row = {
        "run": run["run"],
        "test implicit EM": f"{league.final_test(run):.3f}",
        "best held-out implicit EM (examples)": best_held_out(run),
        "CoT removed at the end": removed,
        "largest rise of the end-of-stage loss": "no removal",
    }
    rises = [(ends[b] - ends[a], a, b) for a, b in zip(ends, list(ends)[1:], strict=False)]
    if rises and league.family(run["curriculum"]) != "e2e":
        _, before, after = max(rises)
        row["largest rise of the end-of-stage loss"] = (
            f"{_removal(after, tokens)}: {ends[before]:.3f} -> {ends[after]:.3f}"
        )
    return row


def plot_stalls(runs: list[dict], task: str, out: Path) -> Path:
    """``stall_<task>.png``: the loss at the end of each count of removed tokens for ``task``'s ``runs``."""
    tokens = COT_TOKENS[task]
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(12 if len(tokens) < 30 else 16, 5.5))
    for index, run in enumerate(runs):
        ends = {len(tokens) if removed == float("inf") else removed: loss for removed, loss in end_losses(run).items()}
        if len(ends) > 1:
            axis.plot(list(ends), list(ends.values()), marker="o", markersize=3, color=f"C{index % 10}",
                      label=f"{league.label(run['curriculum'])}, seed {run['seed']}")  # fmt: skip
    axis.set_xticks(range(len(tokens) + 1), ["none", *tokens], rotation=90, fontsize=7)
    axis.set_yscale("log")
    axis.set_xlabel("CoT tokens removed so far (the last one removed; p: partial products, s: running sums)")
    axis.set_ylabel("training loss at the end of that count (log)")
    axis.set_title(f"{task[4:]} multiplication: where each run's loss rises as the CoT is removed (one seed per line)")
    axis.legend(fontsize=7, loc="upper left")
    return save_figure(figure, out / f"stall_{task}.png")


def verdict_m1(rows: list[dict]) -> dict:
    """M1 from the league rows of mult3x3: the best setting with 3 seeds and end to end at the same budget (the
    end-to-end row whose training examples are nearest the best setting's)."""
    settings = [row for row in rows if league.family(row["curriculum"]) != "e2e"]
    best = max(settings, key=lambda row: row["final"].mean, default=None)
    if best is None:
        return {"verdict": "pending", "seeds": 0, "ours": "no curriculum run recorded yet"}
    e2e_rows = [row for row in rows if league.family(row["curriculum"]) == "e2e"]
    e2e = min(e2e_rows, key=lambda row: abs(row["trained"] - best["trained"]), default=None)
    scores = [league.final_test(run) for run in best["runs"]]
    ours = f"best: {league.label(best['curriculum'])} {best['final'].text(3)}"
    if e2e is not None:
        e2e_scores = [league.final_test(run) for run in e2e["runs"]]
        ours += f"; end to end {summarize(e2e_scores).text(3)}"
        if len(e2e_scores) > 1 and len(scores) > 1:
            ours += f"; gap {difference(scores, e2e_scores).text(3)}"
    decision = RULES["M1"]({"scores": scores, "best": best["final"], "e2e": None if e2e is None else e2e_scores})
    verdict = decision.verdict
    if decision.branch == "inconclusive" and len(scores) < 3:
        settled = _m1_settled(settings)
        verdict = "inconclusive" if settled else "pending"
        ours += "; settled before every seed: the seeds still to come cannot change it" if settled else ""
    return {
        "verdict": verdict,
        "seeds": len(scores),
        "ours": ours,
        "flag": "" if verdict == "pending" else decision.flag,
    }


def _m1_settled(settings: list[dict]) -> bool:
    """No seed still to come (up to 3 per setting) can make M1 agree (every seed of one setting >= 0.90) or disagree
    (the best setting's mean < 0.50: each setting's lowest mean has its missing seeds at 0)."""
    finals = [[league.final_test(run) for run in row["runs"]] for row in settings]
    can_agree = any(min(scores) >= M1_BAR for scores in finals if scores)
    lowest_best = max((sum(scores) / max(3, len(scores)) for scores in finals if scores), default=0.0)
    return not can_agree and lowest_best >= M1_FLOOR


def verdict_m2(rows: list[dict]) -> dict:
    """M2 from the league rows of mult4x4: the runs named ``..._hour`` trained for the steps a quiet hour of this
    machine allows (runs.yaml says how that count was measured); every 4x4 setting is reported at its budget."""
    budgets = "; ".join(
        f"{league.label(row['curriculum'])}: test implicit EM {row['final'].text(3)} after "
        f"{max(league.trained_examples(run) for run in row['runs']):,.0f} examples"
        for row in rows
    )
    runs = [run for row in rows if row["curriculum"].endswith(M2_BUDGET) for run in row["runs"]]
    if not runs:
        return {"verdict": "pending", "seeds": 0, "ours": f"no run over the whole hour yet; {budgets or 'no 4x4 run'}"}
    scores = [league.final_test(run) for run in runs]
    best = ", ".join(best_held_out(run) for run in runs)
    ours = f"over the hour: test implicit EM {summarize(scores).text(3)}, best held-out {best}; by budget: {budgets}"
    decision = RULES["M2"]({"scores": scores})
    verdict = "pending" if decision.branch == "inconclusive" and len(scores) < 3 else decision.verdict
    return {
        "verdict": verdict,
        "flag": "" if verdict == "pending" else decision.flag,
        "seeds": len(scores),
        "ours": ours,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    args, runs = league.arguments_and_runs(argv, __doc__, HERE, "M1's and M2's verdicts", "the tables and the plots")
    rows = league.points(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    table = write_table(league.table_rows(rows), args.out, "table")
    stalls = write_table([stall(run) for row in rows for run in row["runs"]], args.out, "stall")
    tasks = dict.fromkeys(row["task"] for row in rows)
    stall_plots = [plot_stalls([run for row in rows if row["task"] == task for run in row["runs"]], task, args.out)
                   for task in tasks]  # fmt: skip
    written = [*league.plot(rows, args.out, TASKS), *stall_plots]
    if args.readme is not None:
        images = "\n\n".join(f"![{path.stem}]({path.name})" for path in written)
        fill_section(args.readme, "table", f"{table}\nWhere each run stalls:\n\n{stalls}\n{images}\n")
    if args.ledger is not None:
        update_ledger(
            args.ledger,
            {
                "M1": verdict_m1([row for row in rows if row["task"] == "mult3x3"]),
                "M2": verdict_m2([row for row in rows if row["task"] == "mult4x4"]),
            },
        )
    print(table)
    print(stalls)
    print("wrote", ", ".join(str(p) for p in [args.out / "table.md", args.out / "stall.md", *written]))
    return rows


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
