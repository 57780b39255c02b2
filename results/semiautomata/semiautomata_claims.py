"""The second round's claims A1 and A3-A8 at the regime rule R chose (``semiautomata_regime.chosen``), over seeds,
each by the rule ``claims.csv`` fixed before the runs, and the plot that shows each one with 95% intervals.

A run belongs to this part when the harness named it ``claim_...`` (``runs.yaml``); A1 and A8's end-to-end runs are
the regime sweep's own runs at the chosen point. What each run was (automaton, T, regime, depth, learning rate, seed)
comes from its records. A claim whose groups have fewer than three seeds stays ``pending``, with its figures so far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hf_icot.studies.report import error_bars, pyplot, save_figure
from hf_icot.studies.statistics import Summary, difference
from results.semiautomata.rules import RULES
from results.semiautomata.semiautomata_runs import accuracy, chance, mean, ood_splits, select, summary_of

PREFIX = "claim_"
#: exploratory runs (``pilot_...``): tabled beside the claims, never read by a rule
PILOT_PREFIX = "pilot_"
MIN_SEEDS = 3
#: A5's learning-rate grid and the base learning rate (the base config's): the left curriculum at depth 4 and 1e-3 is
#: A3's run, shared by A4-A8
LEARNING_RATES = (3e-4, 1e-3, 3e-3)
BASE_LR = 1e-3
DEPTHS = (4, 16)
#: A6: the paper's pairs, as groups acting on themselves
PRIMES, COMPOSITES = (13, 17), (14, 15)


def claim_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run for run in runs if run["sweep_run"].startswith(PREFIX)]


def pilot_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run for run in runs if run["sweep_run"].startswith(PILOT_PREFIX)]


def label(point: dict[str, Any]) -> str:
    """The point's automaton as a reader knows it: ``C7`` alone is the counter {stay, +1}."""
    automaton = point["automaton"]
    return f"the counter {automaton}" if automaton.startswith("C") and " " not in automaton else automaton


def _text(summary: Summary | None) -> str:
    return summary.text() if summary is not None else "none"


def _ood(run: dict[str, Any], mode: str | None = None) -> float | None:
    return mean([accuracy(run, split, mode) for split in ood_splits(run)])


def _ids(group: list[dict[str, Any]], mode: str | None = None) -> list[float]:
    return [v for v in (accuracy(run, "test", mode) for run in group) if v is not None]


def _oods(group: list[dict[str, Any]], mode: str | None = None) -> list[float]:
    return [v for v in (_ood(run, mode) for run in group) if v is not None]


def _diff(first: list[float], second: list[float]) -> Summary | None:
    return difference(first, second) if first and second else None


def _short(groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [f"{name} ({len(group)} seeds)" for name, group in groups.items() if len(group) < MIN_SEEDS]


def _result(verdict: str, groups: dict[str, list[dict[str, Any]]], ours: str, flag: str = "") -> dict[str, Any]:
    short = _short(groups)
    if short:
        verdict, ours, flag = "pending", f"{ours}; short of {MIN_SEEDS} seeds: {', '.join(short)}", ""
    return {"verdict": verdict, "seeds": sum(len(g) for g in groups.values()), "ours": ours, "flag": flag}


def groups_at(runs: list[dict[str, Any]], regime_runs: list[dict[str, Any]], point: dict[str, Any]) -> dict:
    """Every group a claim reads at the chosen (automaton, T), depth 4 and the base learning rate unless named."""
    at = {"automaton": point["automaton"], "T": point["T"]}
    base = [r for r in select(runs, **at, depth=DEPTHS[0]) if r.get("lr") in (None, BASE_LR)]
    groups = {
        "full CoT": select(regime_runs, **at, regime="full CoT"),
        "end to end": select(regime_runs, **at, regime="end to end"),
        **{
            name: select(base, regime=name) for name in ("left curriculum", "right curriculum", "inductive curriculum")
        },
        "mixture (hints)": select(base, regime="mixture (hints)"),
    }
    left_all = select(runs, **at, regime="left curriculum")
    for depth in DEPTHS:
        for lr in LEARNING_RATES:
            groups[f"depth {depth}, lr {lr:g}"] = [r for r in select(left_all, depth=depth) if r.get("lr") == lr]
    kind = " group" if point["automaton"].endswith(" group") else ""  # A6's moduli as the point's kind of automaton
    for modulus in PRIMES + COMPOSITES:
        at_modulus = select(runs, automaton=f"C{modulus}{kind}", T=point["T"], regime="left curriculum", depth=4)
        groups[f"C{modulus}"] = [r for r in at_modulus if r.get("lr") in (None, BASE_LR)]
    return groups


def a1(groups: dict) -> dict[str, Any]:
    cot = groups["full CoT"]
    splits = ["test", *sorted({s for run in cot for s in ood_splits(run)})]
    found = {split: summary_of([accuracy(run, split, "explicit") for run in cot]) for split in splits}
    found = {split: s for split, s in found.items() if s is not None}
    if not found:
        return _result("pending", {"full CoT": cot}, "no full-CoT run at the chosen regime yet")
    decision = RULES["A1"]({"splits": found})
    ours = "; ".join(f"{split} {_text(s)}" for split, s in found.items())
    return _result(decision.verdict, {"full CoT": cot}, f"full CoT, explicit: {ours}", decision.flag)


def a3(groups: dict) -> dict[str, Any]:
    left = groups["left curriculum"]
    ids, oods = _ids(left), _oods(left)
    if not ids:
        return _result("pending", {"left curriculum": left}, "no left-curriculum run yet")
    drop = _diff(ids, oods)
    above_chance = summary_of([_above_chance(run) for run in left])
    decision = RULES["A3"]({"ids": ids, "oods": oods})
    ours = (f"left curriculum implicit ID {_text(summary_of(ids))}, mean OOD {_text(summary_of(oods))}, ID - OOD "
            f"{_text(drop)}; OOD - majority chance {_text(above_chance)}")  # fmt: skip
    return _result(decision.verdict, {"left curriculum": left}, ours, decision.flag)


def _above_chance(run: dict[str, Any]) -> float | None:
    """Mean over the OOD splits of the accuracy above that split's own majority-answer share."""
    gaps = [(accuracy(run, split), chance(run, split)) for split in ood_splits(run)]
    return mean([a - c for a, c in gaps if a is not None and c is not None])


def a4(groups: dict) -> dict[str, Any]:
    left, right, inductive = (groups[f"{s} curriculum"] for s in ("left", "right", "inductive"))
    figures = {"first": _ids(left), "second": _ids(right), "first_ood": _oods(left), "second_ood": _oods(right)}
    decision = RULES["A4"](figures)
    ours = "; ".join(
        f"{name} ID {_text(summary_of(_ids(g)))}, OOD {_text(summary_of(_oods(g)))}"
        for name, g in (("left", left), ("right", right), ("inductive", inductive))
    )
    ours += f"; left - right ID {_text(_diff(_ids(left), _ids(right)))}"
    # the inductive one is reported, not required
    return _result(decision.verdict, {"left": left, "right": right}, ours, decision.flag)


def best_learning_rate(groups: dict, depth: int, seed: int | None = None) -> float | None:
    """The learning rate of the grid with the best mean implicit ID at ``depth`` over the seeds, or over ``seed``'s
    runs alone (a screen); the first on a tie."""

    def score(lr: float) -> float | None:
        group = groups[f"depth {depth}, lr {lr:g}"]
        return mean(_ids([run for run in group if seed is None or run["seed"] == seed]))

    scored = [(score(lr), lr) for lr in LEARNING_RATES]
    scored = [(value, lr) for value, lr in scored if value is not None]
    return max(scored, key=lambda pair: (pair[0], -LEARNING_RATES.index(pair[1])))[1] if scored else None


def a5(groups: dict, screen_seed: int | None = None) -> dict[str, Any]:
    """A5: each shape at its best learning rate, chosen over all the grid's seeds or, with ``screen_seed``, on that
    seed's runs alone (A5-counter: only each shape's chosen rate needs the other seeds)."""
    grid = {name: g for name, g in groups.items() if name.startswith("depth ")}
    if screen_seed is not None:
        unscreened = [name for name, g in grid.items() if not any(run["seed"] == screen_seed for run in g)]
        if unscreened:
            return _result("pending", {}, f"no seed-{screen_seed} run yet at: {', '.join(unscreened)}")
    best = {depth: best_learning_rate(groups, depth, screen_seed) for depth in DEPTHS}
    if None in best.values():
        return _result("pending", grid, "no run of one of the shapes yet")
    chosen = {f"depth {d}, lr {best[d]:g}": groups[f"depth {d}, lr {best[d]:g}"] for d in DEPTHS}
    shallow, deep = (_ids(group) for group in chosen.values())
    decision = RULES["A5-counter"]({"first": shallow, "second": deep, "first_ood": [], "second_ood": []})
    ours = "; ".join(f"depth {d} best at lr {best[d]:g}: ID {_text(summary_of(ids))}"
                     for d, ids in zip(DEPTHS, (shallow, deep), strict=True))  # fmt: skip
    ours += f"; difference {_text(_diff(shallow, deep))}"
    if screen_seed is not None:
        ours += f" (learning rates chosen on seed {screen_seed})"
    return _result(decision.verdict, grid if screen_seed is None else chosen, ours, decision.flag)


def a6(groups: dict) -> dict[str, Any]:
    primes = [run for m in PRIMES for run in groups[f"C{m}"]]
    composites = [run for m in COMPOSITES for run in groups[f"C{m}"]]
    decision = RULES["A6-counter"]({"first": _ids(composites), "second": _ids(primes), "first_ood": _oods(composites),
                                    "second_ood": _oods(primes)})  # fmt: skip
    ours = (f"composite (C14, C15) ID {_text(summary_of(_ids(composites)))}, OOD {_text(summary_of(_oods(composites)))}; "
            f"prime (C13, C17) ID {_text(summary_of(_ids(primes)))}, OOD {_text(summary_of(_oods(primes)))}; composite - "
            f"prime ID {_text(_diff(_ids(composites), _ids(primes)))}, OOD "
            f"{_text(_diff(_oods(composites), _oods(primes)))}")  # fmt: skip
    return _result(decision.verdict, {f"C{m}": groups[f"C{m}"] for m in PRIMES + COMPOSITES}, ours, decision.flag)


def a7(groups: dict, length: int) -> dict[str, Any]:
    left, mixture = groups["left curriculum"], groups["mixture (hints)"]
    on_id = _diff(_ids(mixture, "hint=0"), _ids(left))
    on_ood = _diff(_oods(mixture, f"hint={length}"), _oods(left))
    if on_id is None or on_ood is None:
        return _result("pending", {"left": left, "mixture": mixture}, "no mixture or left-curriculum run yet")
    decision = RULES["A7"]({"id": on_id, "ood": on_ood})
    ours = (f"mixture hint=0 ID {_text(summary_of(_ids(mixture, 'hint=0')))} vs left {_text(summary_of(_ids(left)))} "
            f"(difference {_text(on_id)}); mixture full CoT (hint={length}) OOD "
            f"{_text(summary_of(_oods(mixture, f'hint={length}')))} vs left {_text(summary_of(_oods(left)))} "
            f"(difference {_text(on_ood)})")  # fmt: skip
    return _result(decision.verdict, {"left": left, "mixture": mixture}, ours, decision.flag)


def probe_score(run: dict[str, Any]) -> float | None:
    """The best block's held-out probe accuracy, averaged over the steps (the layer whose mean is highest; layer 0,
    the embeddings, left out: it sees one input symbol, not what the blocks computed)."""
    probes = run.get("probes") or {}
    rows = (probes.get("accuracy") or [])[1:]
    return max((mean(row) for row in rows if row), default=None)


#: A8's and part 3's models: the left curriculum, end to end and the mixture (read without CoT)
PROBED = (("left curriculum", None), ("end to end", None), ("mixture (hints)", "hint=0"))


def plot_probe_maps(
    runs: list[dict[str, Any]], regime_runs: list[dict[str, Any]], point: dict, out: Path, stem: str
) -> None:
    """Part 3: the layer x step probe map of every seed of the left-curriculum, end-to-end and mixture models."""
    import numpy as np

    groups = groups_at(runs, regime_runs, point)
    rows = [(name, mode, sorted((r for r in groups[name] if r.get("probes")), key=lambda r: r["seed"]))
            for name, mode in PROBED]  # fmt: skip
    columns = max((len(group) for _, _, group in rows), default=0)
    if not columns:
        return
    plt = pyplot()
    fig, axes = plt.subplots(3, columns, figsize=(4.2 * columns, 9), squeeze=False, layout="constrained")
    image = None
    for row_axes, (name, mode, group) in zip(axes, rows, strict=True):
        for ax in row_axes[len(group) :]:
            ax.axis("off")
        for ax, run in zip(row_axes, group):
            probes = run["probes"]
            image = ax.imshow(np.array(probes["accuracy"]), origin="lower", aspect="auto", vmin=0, vmax=1)
            ax.set_xticks(range(len(probes["steps"])), probes["steps"], fontsize=6)
            ax.set_yticks(range(len(probes["layers"])), probes["layers"], fontsize=6)
            ax.set_xlabel("step t", fontsize=8)
            ax.set_ylabel("layer (0 = embeddings)", fontsize=8)
            ood, score = _ood(run, mode), probe_score(run)
            ax.set_title(f"{name}, seed {run['seed']}: ID {_fmt(accuracy(run, 'test', mode))}, OOD {_fmt(ood)}\n"
                         f"probe score {_fmt(score)}", fontsize=8)  # fmt: skip
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="held-out probe accuracy")
    fig.suptitle(f"Where did the reasoning go, {label(point)} at T = {point['T']}: a linear probe for the state "
                 "after step t, read from each layer at the t-th input symbol")  # fmt: skip
    fig.savefig(out / f"{stem}.png", dpi=90)
    plt.close(fig)


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def a8(groups: dict) -> dict[str, Any]:
    from scipy import stats

    named = {name: groups[name] for name, _ in PROBED}
    pairs = [(probe_score(run), _ood(run, mode)) for name, mode in PROBED for run in groups[name]]
    pairs = [(p, o) for p, o in pairs if p is not None and o is not None]
    if len(pairs) < 3:
        return _result("pending", named, f"{len(pairs)} runs with probes")
    decision = RULES["A8"]({"pairs": pairs})
    if len({p for p, _ in pairs}) < 2 or len({o for _, o in pairs}) < 2:
        return _result(decision.verdict, named, f"{len(pairs)} runs; one side is constant, no rank correlation")
    rho, p_value = stats.spearmanr([p for p, _ in pairs], [o for _, o in pairs])
    return _result(decision.verdict, named, f"Spearman rho {rho:.3f} (p = {p_value:.3g}) over {len(pairs)} runs",
                   decision.flag)  # fmt: skip


#: the claims read at a chosen point (R's, and R2's with the suffix ``-counter``), in the ledger's order
POINT_CLAIMS = ("A1", "A3", "A4", "A5", "A6", "A7", "A8")


def verdicts(
    runs: list[dict[str, Any]],
    regime_runs: list[dict[str, Any]],
    point: dict | None,
    suffix: str = "",
    a5_screen_seed: int | None = None,
    claims: tuple[str, ...] = POINT_CLAIMS,
) -> dict[str, dict]:
    """``claims`` (by default A1, A3-A8) at ``point`` for the ledger, each id followed by ``suffix`` (``-counter``: at
    rule R2's point, ``-counter64``: the counter at T = 64; A5 chooses the learning rates on ``a5_screen_seed``);
    ``{}`` until the rule has chosen the point."""
    if point is None:
        return {}
    groups = groups_at(runs, regime_runs, point)
    found = {"A1": a1(groups), "A3": a3(groups), "A4": a4(groups), "A5": a5(groups, a5_screen_seed), "A6": a6(groups),
             "A7": a7(groups, point["T"]), "A8": a8(groups)}  # fmt: skip
    where = f"{point['automaton']} at T = {point['T']}: "
    # A6 reads the moduli C13-C17 of the point's kind of automaton, not the point's own automaton
    kind = "groups" if point["automaton"].endswith(" group") else "counters"
    moduli = ", ".join(f"C{m}" for m in sorted(PRIMES + COMPOSITES))
    places = {"A6": f"the {kind} {moduli} at T = {point['T']}: "}
    return {
        claim + suffix: {**found[claim], "ours": places.get(claim, where) + found[claim]["ours"]} for claim in claims
    }


def table_rows(runs: list[dict[str, Any]], regime_runs: list[dict[str, Any]], point: dict) -> list[dict]:
    """One row per group: seeds, implicit (or the group's own mode) ID and mean OOD, each mean ± 95% interval."""
    rows = []
    for name, group in groups_at(runs, regime_runs, point).items():
        mode = {"full CoT": "explicit", "mixture (hints)": "hint=0"}.get(name)
        row = {"group": name, "seeds": len(group), "mode": mode or "implicit",
               "ID": _text(summary_of(_ids(group, mode))), "mean OOD": _text(summary_of(_oods(group, mode)))}  # fmt: skip
        if name == "mixture (hints)":
            full = f"hint={point['T']}"
            row["mode"] = (f"hint=0 (full CoT {full}: ID {_text(summary_of(_ids(group, full)))}, "
                           f"OOD {_text(summary_of(_oods(group, full)))})")  # fmt: skip
        rows.append(row)
    return rows


def plot(runs: list[dict[str, Any]], regime_runs: list[dict[str, Any]], point: dict, out: Path, stem: str) -> None:
    """Four panels: the regimes (A1, A3, A4, A7), A5's learning-rate grid per shape, A6's moduli, A8's scatter."""
    groups = groups_at(runs, regime_runs, point)
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
    full = f"hint={point['T']}"
    columns = [("full CoT\n(explicit)", "full CoT", "explicit"), ("end to end", "end to end", None),
               ("left\ncurriculum", "left curriculum", None), ("right\ncurriculum", "right curriculum", None),
               ("inductive\ncurriculum", "inductive curriculum", None), ("mixture\nhint=0", "mixture (hints)", "hint=0"),
               (f"mixture\n{full}", "mixture (hints)", full)]  # fmt: skip
    x = list(range(len(columns)))
    error_bars(axes[0], x, [summary_of(_ids(groups[name], mode)) for _, name, mode in columns], label="ID (test)",
               linestyle="none")  # fmt: skip
    error_bars(axes[0], [v + 0.15 for v in x], [summary_of(_oods(groups[name], mode)) for _, name, mode in columns],
               label="mean OOD (biased inputs)", marker="s", linestyle="none")  # fmt: skip
    axes[0].set_xticks(x, [label for label, _, _ in columns], fontsize=7)
    axes[0].set(title="A1, A3, A4, A7: each regime", ylabel="answer exact match", ylim=(0, 1.05))
    for depth, marker in zip(DEPTHS, "os", strict=True):
        error_bars(axes[1], list(LEARNING_RATES),
                   [summary_of(_ids(groups[f"depth {depth}, lr {lr:g}"])) for lr in LEARNING_RATES],
                   label=f"depth {depth}", marker=marker)  # fmt: skip
    axes[1].set(title="A5: one budget, two shapes (left, implicit ID)", xlabel="learning rate", xscale="log",
                ylabel="implicit ID exact match", ylim=(0, 1.05))  # fmt: skip
    axes[1].set_xticks(list(LEARNING_RATES), [f"{lr:g}" for lr in LEARNING_RATES])
    axes[1].set_xlim(LEARNING_RATES[0] / 1.6, LEARNING_RATES[-1] * 1.6)  # the grid's own span, runs in or not
    axes[1].minorticks_off()
    moduli = PRIMES + COMPOSITES
    places = list(range(len(moduli)))  # one slot per modulus, so the labels do not crowd
    error_bars(axes[2], places, [summary_of(_ids(groups[f"C{m}"])) for m in moduli], label="ID", linestyle="none")
    error_bars(axes[2], [x + 0.15 for x in places], [summary_of(_oods(groups[f"C{m}"])) for m in moduli],
               label="mean OOD", marker="s", linestyle="none")  # fmt: skip
    axes[2].set_xticks(places, [f"C{m}\n{'prime' if m in PRIMES else 'composite'}" for m in moduli])
    axes[2].set_xlim(-0.5, len(moduli) - 0.35)
    axes[2].set(title="A6: prime vs composite moduli (left, implicit)", ylabel="answer exact match", ylim=(0, 1.05))
    for (name, mode), marker in zip(PROBED, "ox^", strict=True):
        points = [(probe_score(r), _ood(r, mode)) for r in groups[name]]
        points = [p for p in points if None not in p]
        axes[3].scatter([p for p, _ in points], [o for _, o in points], marker=marker, label=name)
    axes[3].set(title="A8: probes vs OOD (a point per seed)", ylim=(0, 1.05),
                xlabel="best block's probe accuracy, mean over steps", ylabel="mean OOD answer exact match")  # fmt: skip
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"Claims at {label(point)}, T = {point['T']} (mean, 95% interval over seeds)")
    save_figure(fig, out / f"{stem}.png", dpi=100)
