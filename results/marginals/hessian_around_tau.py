"""The Hessian of the training loss around the transition τ of one marginals run (claim 4: the plateau is a saddle).

    python -m results.marginals.hessian_around_tau --run outputs/marginals/bz_k10_nb100_lr1e-3_bs128_s0

The run must have kept checkpoints (``--save_strategy steps``). At the checkpoints nearest each ``--points``
fraction of τ it measures, on a fixed batch of the run's diagnostic examples: the top and bottom Hessian
eigenvalues (Lanczos on Hessian-vector products, :func:`hf_icot.diagnostics.hessian_extremes`) and the curvature
``vᵀHv / |v|²`` along the escape direction ``v`` = (weights of the last checkpoint) − (weights at that point), i.e.
the direction training actually took out of the plateau. Writes ``hessian.csv`` into the run folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import torch
from tqdm import tqdm


def checkpoints(run: Path) -> dict[int, Path]:
    """The run's checkpoint folders by step."""
    found = {int(p.name.split("-")[1]): p for p in run.glob("checkpoint-*") if p.name.split("-")[1].isdigit()}
    if not found:
        raise ValueError(f"{run} holds no checkpoint-* folders; train the run with --save_strategy steps.")
    return dict(sorted(found.items()))


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="A run folder of results/marginals/train.py with checkpoints.")
    parser.add_argument(
        "--points", type=float, nargs="+", default=[0.25, 0.5, 0.75, 0.9, 1.0, 1.1], help="Fractions of τ."
    )
    parser.add_argument("--examples", type=int, default=64, help="Diagnostic examples in the fixed batch.")
    parser.add_argument("--tol", type=float, default=1e-2, help="Lanczos relative tolerance.")
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from datasets_builder import build_dataset
    from hf_icot.data.answer_only import encode_answer_only
    from hf_icot.diagnostics import hessian_curvature_along, hessian_extremes
    from hf_icot.diagnostics.candidates import diagnostic_rows

    run = Path(args.run)
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    if record["tau"] is None:
        raise ValueError(f"{run} has no transition step τ (run.json); there is nothing to measure around.")
    tau, saved = record["tau"], checkpoints(run)
    task_args = {key: value for key, value in record["task"].items() if key != "config"}
    tokenizer = AutoTokenizer.from_pretrained(run)
    train = encode_answer_only(build_dataset("ambiguity", task_args)[0]["train"], tokenizer)
    rows = diagnostic_rows(train, args.examples, record["k"]).to_list()[: args.examples]

    def load(step: int) -> torch.nn.Module:
        return AutoModelForCausalLM.from_pretrained(saved[step]).eval()

    last = max(saved)
    final = dict(load(last).named_parameters())
    results = []
    steps = sorted({min(saved, key=lambda s: abs(s - fraction * tau)) for fraction in args.points} - {last})
    for step in tqdm(steps, desc="Hessian around tau"):
        model = load(step)
        extremes = hessian_extremes(model, rows, pad_token_id=tokenizer.pad_token_id, k=1, tol=args.tol)
        direction = {name: (final[name] - p).detach() for name, p in model.named_parameters()}
        along = hessian_curvature_along(model, rows, direction, pad_token_id=tokenizer.pad_token_id)
        top, bottom = float(extremes.top[0]), float(extremes.bottom[0])
        results.append(
            {
                "step": step,
                "fraction_of_tau": step / tau,
                "top": top,
                "bottom": bottom,
                "escape_curvature": along,
                "top_over_escape": top / abs(along) if along else math.inf,
                "escape_step": last,
            }
        )
    with open(run / "hessian.csv", "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    return results


if __name__ == "__main__":
    try:
        for row in main():
            print(row)
    except ValueError as error:
        sys.exit(f"error: {error}")
