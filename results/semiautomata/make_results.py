"""Tables, plots and the README of results/semiautomata/ from the run records the harness keeps.

    python -m hf_icot.studies run results/semiautomata   # the runs of runs.yaml still missing
    python -m results.semiautomata.make_results --runs results/semiautomata/runs --out results/semiautomata

Every folder under ``--runs`` holding ``eval_results.json`` is one run; what it was (automaton, T, regime, depth,
width, seed) is read from the records recipes/semiautomata.py leaves (``task_args.json``, ``schedule.json``,
``model_size.json``), never from its name. Writes ``results.csv`` / ``results.md`` (one row per run), one CSV per claim
(``claim<i>.csv``), the plots ``curriculum_stages.png``, ``id_vs_ood.png``, ``prime_vs_composite.png``,
``width_vs_depth.png``, ``end_to_end_vs_T.png``, ``probes.png`` and ``probe_profiles.png``, ``README.md`` (the
current rounds) and ``HISTORY.md`` (the superseded ones), whose verdicts follow the rules stated in them
(:data:`MARGIN`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE
from hf_icot.studies.claims import WITHDRAWN, update_ledger
from hf_icot.studies.claims_index import write_readme_verdicts
from hf_icot.studies.report import fmt, read_json, write_table
from results.semiautomata import semiautomata_claims as second_claims
from results.semiautomata import semiautomata_regime as regime
from results.semiautomata.semiautomata_plots import (
    plot_curriculum_stages,
    plot_end_to_end,
    plot_groups,
    plot_id_vs_ood,
    plot_probe_profiles,
    plot_probes,
)
from results.semiautomata.semiautomata_runs import (
    BASE,
    COMPOSITES,
    GOOD,
    HIGH,
    MARGIN,
    PRIMES,
    REGIME_ORDER,
    chance,
    group_accuracy,
    is_base,
    load_run,
    mean,
    ood_splits,
    result_row,
    seeds_of,
    select,
)


def _verdict(agree: bool | None, disagree: bool | None) -> str:
    if agree is None or disagree is None:
        return "inconclusive (runs missing)"
    return "agree" if agree else "disagree" if disagree else "inconclusive"


def regime_rows(groups: dict[str, list[dict[str, Any]]], modes: dict[str, str] | None = None) -> list[dict]:
    """One row per group of runs: its mode, seeds, and mean accuracy and chance per split."""
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


def claim_full_cot(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    cot = by["full CoT"]
    values = [group_accuracy(cot, split) for split in ["test", *ood_splits(cot[0])]] if cot else []
    worst = min((v for v in values if v is not None), default=None)
    return (
        "full CoT is near-perfect in distribution and on biased inputs",
        regime_rows({"full CoT": cot}),
        f"worst split (explicit answer accuracy): {fmt(worst)}",
        _verdict(None if worst is None else worst >= HIGH, None if worst is None else worst < GOOD - MARGIN * 2),
    )


def claim_end_to_end(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
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
    e2e, cot_id = group_accuracy(by["end to end"], "test"), group_accuracy(by["full CoT"], "test")
    by_length = [row["end to end (implicit) test"] for row in rows]
    falls = len(by_length) < 2 or all(a >= b - MARGIN for a, b in zip(by_length, by_length[1:]))
    gap = None if e2e is None or cot_id is None else cot_id - e2e
    return (
        "end to end is much harder than full CoT and fails as T grows",
        rows,
        f"at T={BASE['T']}: end to end {fmt(e2e)} vs full CoT {fmt(cot_id)} (gap {fmt(gap)}); "
        f"end to end by T {', '.join(f'{t}: {fmt(a)}' for t, a in zip(lengths, by_length))}",
        _verdict(None if gap is None else gap >= 4 * MARGIN and falls, None if gap is None else gap < MARGIN),
    )


def claim_left_ood(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    left = by["left curriculum"]
    left_id, left_ood = group_accuracy(left, "test"), group_accuracy(left, "ood")
    left_all = select(runs, regime="left curriculum", T=BASE["T"], depth=BASE["depth"])
    drop = None if left_id is None or left_ood is None else left_id - left_ood
    verdict = _verdict(
        None if drop is None else left_id >= GOOD and drop >= 2 * MARGIN,
        None if drop is None else left_id >= GOOD and drop < MARGIN,
    )
    return (
        "the left curriculum keeps ID accuracy high while OOD accuracy drops (to chance for prime counters)",
        regime_rows({run_label(g): g for g in _by_automaton(left_all)}),
        f"{BASE['automaton']}: ID {fmt(left_id)}, OOD mean {fmt(left_ood)} (drop {fmt(drop)})",
        verdict
        if left_id is None or left_id >= GOOD
        else "inconclusive (the left curriculum did not reach high ID accuracy at this scale)",
    )


def claim_left_vs_right(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    groups = {r: by[r] for r in ("left curriculum", "right curriculum", "inductive curriculum")}
    left_id, left_ood = group_accuracy(by["left curriculum"], "test"), group_accuracy(by["left curriculum"], "ood")
    right_id = group_accuracy(by["right curriculum"], "test")
    return (
        "the left curriculum works better than the right one",
        regime_rows(groups),
        f"ID: left {fmt(left_id)}, right {fmt(right_id)}, inductive "
        f"{fmt(group_accuracy(by['inductive curriculum'], 'test')) or 'not run'}; OOD mean: left "
        f"{fmt(left_ood)}, right {fmt(group_accuracy(by['right curriculum'], 'ood'))}",
        _verdict(
            None if left_id is None or right_id is None else left_id > right_id + MARGIN,
            None if left_id is None or right_id is None else right_id > left_id + MARGIN,
        ),
    )


def claim_width_vs_depth(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    depths = sorted(
        {r["depth"] for r in select(runs, regime="left curriculum", automaton=BASE["automaton"], T=BASE["T"])}
    )
    groups = {
        f"depth {d}": select(runs, regime="left curriculum", automaton=BASE["automaton"], T=BASE["T"], depth=d)
        for d in depths
    }
    rows = regime_rows(groups)
    for row, group in zip(rows, groups.values()):
        row["width"], row["parameters"] = group[0]["width"], group[0]["parameters"]
    shallow = group_accuracy(groups.get(f"depth {min(depths)}", []), "test") if depths else None
    deep = group_accuracy(groups.get(f"depth {max(depths)}", []), "test") if len(depths) > 1 else None
    return (
        "at an equal parameter budget, wide and shallow internalizes better than deep and narrow",
        rows,
        "; ".join(
            f"depth {d}: ID {fmt(group_accuracy(group, 'test'))}, OOD {fmt(group_accuracy(group, 'ood'))}"
            for d, group in zip(depths, groups.values())
        ),
        _verdict(
            None if shallow is None or deep is None else shallow > deep + MARGIN,
            None if shallow is None or deep is None else deep > shallow + MARGIN,
        ),
    )


def claim_primes(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    left_all = select(runs, regime="left curriculum", T=BASE["T"], depth=BASE["depth"])
    primes = [r for r in left_all if r["automaton"] in PRIMES]
    composites = [r for r in left_all if r["automaton"] in COMPOSITES]
    p_id, c_id = group_accuracy(primes, "test"), group_accuracy(composites, "test")
    p_ood, c_ood = group_accuracy(primes, "ood"), group_accuracy(composites, "ood")
    return (
        f"prime-order counters ({', '.join(PRIMES)}) are much harder to internalize than composite ones "
        f"({', '.join(COMPOSITES)})",
        regime_rows({f"prime ({', '.join(PRIMES)})": primes, f"composite ({', '.join(COMPOSITES)})": composites}),
        f"left curriculum, ID: prime {fmt(p_id)} vs composite {fmt(c_id)}; OOD: prime {fmt(p_ood)} vs composite "
        f"{fmt(c_ood)}",
        _verdict(
            None if p_id is None or c_id is None else c_id > p_id + MARGIN or (c_ood or 0) > (p_ood or 0) + MARGIN,
            None if p_id is None or c_id is None else p_id > c_id + MARGIN,
        ),
    )


def claim_mixture(runs: list[dict[str, Any]], by: dict[str, list]) -> tuple:
    left, mixture = by["left curriculum"], by["mixture (hints)"]
    left_id, left_ood = group_accuracy(left, "test"), group_accuracy(left, "ood")
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
    return (
        "a mixture with length hints replaces the curriculum with similar success, and asked for the full CoT it is "
        "more robust OOD than curriculum-trained models",
        rows,
        f"ID without CoT: mixture {fmt(m_id)} vs left curriculum {fmt(left_id)}; OOD: mixture asked for the full "
        f"CoT {fmt(m_full_ood)} vs left curriculum {fmt(left_ood)}",
        _verdict(
            None if similar is None or better_ood is None else similar and better_ood,
            None if similar is None or better_ood is None else not similar and not better_ood,
        ),
    )


CLAIMS = (claim_full_cot, claim_end_to_end, claim_left_ood, claim_left_vs_right, claim_width_vs_depth,
          claim_primes, claim_mixture)  # fmt: skip


def claims(runs: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """One record per claim, in :data:`CLAIMS` order: ``title``, ``table`` (Markdown, also ``claim<i>.csv``/``.md``),
    ``numbers`` and ``verdict``."""
    base = [run for run in runs if is_base(run)]
    by = {regime: select(base, regime=regime) for regime in REGIME_ORDER}
    found = []
    for index, claim in enumerate(CLAIMS, start=1):
        title, rows, numbers, verdict = claim(runs, by)
        table = write_table(rows, out, f"claim{index}", cell=fmt)
        found.append({"title": title, "table": table, "numbers": numbers, "verdict": verdict})
    return found


def _by_automaton(runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    names = sorted({r["automaton"] for r in runs}, key=lambda a: (len(a), a))
    return [[r for r in runs if r["automaton"] == name] for name in names]


def run_label(group: list[dict[str, Any]]) -> str:
    return f"{group[0]['regime']}, {group[0]['automaton']}"


def regime_facts(found: list[dict[str, Any]], table: str, verdicts: dict[str, Any]) -> dict[str, str]:
    """The README's second-round placeholders: the regime table, rule R's choice and A2."""
    point = regime.chosen(found)
    cost = read_json(Path(__file__).parent / "paper" / "cost_estimate.json")
    if cost:
        steps = "; ".join(f"{c['cpu_s_per_step']:.1f} s per step at depth {c['depth']}" for c in cost["shapes"])
        cpu_step = f"{steps} ({cost['threads']} threads, timed at batch {cost['timed_batch']} and scaled to 256)"
        cpu_hours = " / ".join(f"{c['cpu_hours_per_run']:,.0f}" for c in cost["shapes"])
    else:
        cpu_step, cpu_hours = "(not measured yet)", "(not measured yet)"
    return {
        "paper_cpu_step": cpu_step,
        "paper_cpu_hours": cpu_hours,
        "regime_table": table,
        "regime_runs": str(sum(p["cot_seeds"] + p["e2e_seeds"] for p in found)),
        "regime_chosen": f"{point['automaton']} at T = {point['T']}" if point else "none yet",
        "regime_r": f"**{verdicts['R']['verdict']}**: {verdicts['R']['ours']}",
        "regime_a2": f"**{verdicts['A2']['verdict']}**: {verdicts['A2']['ours']}"
        if verdicts["A2"]
        else "pending (no regime chosen yet)",
    }


def _verdict_lines(verdicts: dict[str, Any], claims: tuple[str, ...]) -> str:
    """One bullet per claim of ``claims`` (A1, A3-A8 at one point): its verdict and figures (pending until its runs
    are in)."""
    lines = [f"* **{claim}: {verdicts[claim]['verdict']}** — {verdicts[claim]['ours']}" for claim in claims
             if verdicts.get(claim) is not None]  # fmt: skip
    return "\n".join(lines) or "* pending: no regime chosen yet."


COUNTER = "-counter"
#: the claims read again at the counter's T = 64, our choice of length (runs.yaml's T = 64 block; the seed names none)
COUNTER64, T64_CLAIMS = "-counter64", ("A1", "A3", "A5", "A6")


def point_results(
    claim_runs: list[dict[str, Any]], regime_runs: list[dict[str, Any]], point: dict | None, out: Path, stem: str
) -> str:
    """The claims' table at ``point`` (``<stem>.csv``/``.md``) and its plots (``<stem>_claims.png``,
    ``<stem>_probes.png``); the Markdown table, or a line saying the point is not chosen yet."""
    if point is None:
        return "(no regime chosen yet)"
    table = write_table(second_claims.table_rows(claim_runs, regime_runs, point), out, stem, cell=fmt)
    second_claims.plot(claim_runs, regime_runs, point, out, f"{stem}_claims")
    second_claims.plot_probe_maps(claim_runs, regime_runs, point, out, f"{stem}_probes")
    return table


def write_readme(
    runs: list[dict[str, Any]], found: list[dict[str, Any]], table: str, out: Path, second: dict[str, str]
) -> None:
    """README.md from readme_template.md (the prose: the command, the current verdicts, the setting) and HISTORY.md
    from history_template.md (the superseded rounds), with every number, table and verdict filled in from the runs
    (``second``: the second round's)."""
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
        "margin": MARGIN,
        "high": HIGH,
        "good": GOOD,
        **second,
    }
    for index, claim in enumerate(found, start=1):
        facts[f"claim{index}_table"] = claim["table"]
        facts[f"claim{index}_numbers"] = claim["numbers"]
        facts[f"claim{index}_verdict"] = claim["verdict"]
    for template, target in (("readme_template.md", "README.md"), ("history_template.md", "HISTORY.md")):
        text = (Path(__file__).parent / template).read_text(encoding="utf-8")
        (out / target).write_text(text.format(**facts), encoding="utf-8")
    if (out / "claims.csv").exists():  # the verdict table, as `python -m hf_icot.studies claims` writes it
        write_readme_verdicts(out / "README.md", out / "claims.csv")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="results/semiautomata/runs", help="folder of run records (the harness's)")
    parser.add_argument("--out", default="results/semiautomata", help="where tables, plots and README go")
    args = parser.parse_args(argv)
    runs_dir, out = Path(args.runs), Path(args.out)
    folders = sorted(p.parent for p in runs_dir.glob(f"*/{EVAL_RESULTS_FILE}"))
    if not folders:
        raise SystemExit(f"error: no run folder with eval_results.json under {runs_dir}; run the sweep first.")
    runs = sorted(
        (load_run(folder) for folder in folders),
        key=lambda r: (REGIME_ORDER.index(r["regime"]) if r["regime"] in REGIME_ORDER else 99, r["automaton"],
                       r["T"], r["depth"], r["seed"]),
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    second, claim_runs = regime.sweep_runs(runs), second_claims.claim_runs(runs)
    pilots = second_claims.pilot_runs(runs)
    runs = [run for run in runs if run not in second + claim_runs + pilots]  # the first round reads its own
    found = regime.points(second)
    regime_table = write_table(regime.table_rows(found), out, "regime", cell=fmt)
    regime.plot(found, out)
    point, point2 = regime.chosen(found), regime.second(found)
    verdicts = {"R": regime.verdict_r(found), "A2": regime.verdict_a2(found, point),
                **second_claims.verdicts(claim_runs, second, point),
                "R2": regime.verdict_r2(found), f"A2{COUNTER}": regime.verdict_a2(found, point2),
                **second_claims.verdicts(claim_runs, second, point2, suffix=COUNTER, a5_screen_seed=0)}  # fmt: skip
    point64 = {**point2, "T": 64} if point2 else None
    verdicts.update(second_claims.verdicts(claim_runs, second, point64, suffix=COUNTER64, a5_screen_seed=0,
                                           claims=T64_CLAIMS))  # fmt: skip
    claims_table = point_results(claim_runs, second, point, out, "second_round")
    counter_table = point_results(claim_runs, second, point2, out, "counter_round")
    counter64_table = point_results(claim_runs, second, point64, out, "counter64_round")
    if (out / "claims.csv").exists():
        ledger = update_ledger(out / "claims.csv", {claim: v for claim, v in verdicts.items() if v is not None})
        # a claim withdrawn by hand reads as withdrawn in the README too, with the ledger's reason
        verdicts.update({row["id"]: {"verdict": WITHDRAWN, "ours": row["why"]} for row in ledger
                         if row["verdict"] == WITHDRAWN})  # fmt: skip
    table = write_table([result_row(run) for run in runs], out, "results", cell=fmt)
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
    pilot_rows = [{**result_row(run), "run": run["sweep_run"]} for run in pilots]
    pilot_table = write_table(pilot_rows, out, "pilots", cell=fmt) if pilots else "(no pilot run yet)"
    facts = {**regime_facts(found, regime_table, verdicts), "second_table": claims_table, "second_pilots": pilot_table,
             "second_verdicts": _verdict_lines(verdicts, second_claims.POINT_CLAIMS), "counter_table": counter_table,
             "counter_verdicts": _verdict_lines(verdicts, ("R2", f"A2{COUNTER}", *(c + COUNTER for c in second_claims.POINT_CLAIMS))),
             "counter64_table": counter64_table,
             "counter64_verdicts": _verdict_lines(verdicts, tuple(c + COUNTER64 for c in T64_CLAIMS))}  # fmt: skip
    write_readme(runs, claims(runs, out), table, out, facts)


if __name__ == "__main__":
    main()
