"""A5-counter64's learning-rate screen, read as the rule says: each shape's rate is the one of {3e-4, 1e-3, 3e-3}
with the best seed-0 implicit ID on test (the first of the grid on a tie); seeds 1 and 2 of it are added to
runs.yaml (a comment with the screen's scores above the entry), and the harness patterns of those runs are printed.

    python -m results.semiautomata.choose_t64_rates results/semiautomata

A shape whose three screen runs are not all recorded gets no choice (said on stderr). ``gpu_t64.sh`` calls this
between its two phases.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

RATES = ("3e-4", "1e-3", "3e-3")
DEPTHS = (16, 4)
NAME = "claim_counter7_t64_left_d{depth}_lr{rate}"


def screen(runs: Path, depth: int) -> list[tuple[float, str]] | None:
    """(seed-0 implicit ID on test, rate) for each rate of the grid; None unless all three are recorded."""
    scores = []
    for rate in RATES:
        found = runs / f"{NAME.format(depth=depth, rate=rate)}_s0" / "eval_results.json"
        if not found.is_file():
            return None
        scores.append((json.loads(found.read_text(encoding="utf-8"))["test/implicit/answer_em"], rate))
    return scores


def chosen(scores: list[tuple[float, str]]) -> str:
    return max(scores, key=lambda pair: (pair[0], -RATES.index(pair[1])))[1]


def add_seeds(runs_yaml: str, name: str, scores: list[tuple[float, str]]) -> str:
    """runs.yaml's text with ``name``'s ``seeds: [0]`` made ``[0, 1, 2]`` under a comment giving the screen's scores;
    unchanged where the entry already has its seeds.

    Raises:
        ValueError: ``name`` is not an entry of runs.yaml.
    """
    if f"  - name: {name}\n" not in runs_yaml:
        raise ValueError(f"runs.yaml has no run named {name!r}; the screen's names are {NAME} with rates {RATES}.")
    entry = re.compile(rf"(  - name: {re.escape(name)}\n(?:    (?!seeds:).*\n|           .*\n)*)    seeds: \[0\]\n")
    scored = ", ".join(f"{rate} {score:.3f}" for score, rate in scores)
    note = f"  # the screen's choice for this depth (seed 0, implicit ID on test: {scored}): seeds 1-2 added\n"
    return entry.sub(lambda match: note + match.group(1) + "    seeds: [0, 1, 2]\n", runs_yaml, count=1)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="the study folder (runs.yaml, runs/)")
    args = parser.parse_args(argv)
    path = args.study / "runs.yaml"
    text, patterns = path.read_text(encoding="utf-8"), []
    for depth in DEPTHS:
        scores = screen(args.study / "runs", depth)
        if scores is None:
            print(f"depth {depth}: the screen is not all recorded; no choice", file=sys.stderr)
            continue
        rate = chosen(scores)
        print(f"depth {depth}: {scores} -> {rate}", file=sys.stderr)
        name = NAME.format(depth=depth, rate=rate)
        text = add_seeds(text, name, scores)
        patterns.append(f"{name}_s[12]")
    path.write_text(text, encoding="utf-8")
    print(" ".join(patterns))
    return patterns


if __name__ == "__main__":
    main()
