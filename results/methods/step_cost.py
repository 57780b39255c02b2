"""P2 of results/methods/claims.csv: PCCoT's training step against Coconut's at the league's shape, measured quietly.

    python -m results.methods.step_cost            # 3 quiet runs of the bench below; writes step_cost.json
    python -m results.methods.make_results ...      # reads step_cost.json for P2 (pending while it is absent)

Each run is a fresh process of ``bench/bench_latent_cost.py`` at parity4's league shape (:data:`COMMAND`: the
quickstart's 4-layer, 64-wide GPT-2, batches of 64 questions, 3 thoughts, PCCoT's 2 Jacobi iterations as
``recipes/configs/pccot_quickstart.yaml``, one thread), which times Coconut's, CODI's and PCCoT's training steps
alternately on the same batches (Coconut at its last stage: every CoT step a thought). The figure P2's rule reads is
each run's ``Coconut/PCCoT`` column: Coconut's median seconds per step over PCCoT's. Run it with nothing else
running (the file records the machine, and the load average before each run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from hf_icot.studies.runner import machine
from results.methods.rules import RULES

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULT = HERE / "step_cost.json"
COMMAND = ["bench/bench_latent_cost.py", "--thoughts", "3", "--iterations", "2", "--n-layer", "4", "--n-embd", "64",
           "--batch-size", "64", "--steps", "20", "--repeats", "5", "--threads", "1"]  # fmt: skip
CLAIM = "P2-parity4"


def ratio_of(output: str) -> dict[str, float]:
    """The seconds per step and the Coconut/PCCoT ratio from the bench's table row for 3 thoughts."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0] == "3":
            return {"coconut_s": float(cells[2]), "codi_s": float(cells[3]), "pccot_s": float(cells[4]),
                    "ratio": float(cells[5].rstrip("x"))}  # fmt: skip
    raise ValueError(f"no row for 3 thoughts in the bench's output:\n{output}")


def measure(runs: int) -> dict:
    """``runs`` fresh processes of :data:`COMMAND`, one after another."""
    rows = []
    for index in range(runs):
        load = os.getloadavg()[0]
        done = subprocess.run([sys.executable, *COMMAND], cwd=REPO, capture_output=True, text=True, check=True)
        rows.append({**ratio_of(done.stdout), "load_before": round(load, 2), "output": done.stdout})
        print(f"run {index + 1}/{runs}: Coconut / PCCoT {rows[-1]['ratio']:.2f}x, load before {load:.2f}", flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {"command": ["python", *COMMAND], "git_commit": commit, "machine": machine(), "runs": rows}


def verdict(path: Path | None = RESULT) -> dict:
    """P2's ledger cells: pending while ``path`` is None or absent, else its rule on the runs' ratios."""
    if path is None or not path.exists():
        return {"verdict": "pending", "flag": "", "seeds": "0",
                "ours": f"not measured yet: python -m results.methods.step_cost writes {RESULT.name}"}  # fmt: skip
    record = json.loads(path.read_text())
    ratios = [row["ratio"] for row in record["runs"]]
    steps = "; ".join(f"{r['coconut_s'] * 1000:.1f} / {r['pccot_s'] * 1000:.1f} ms ({r['ratio']:.2f}x)"
                      for r in record["runs"])  # fmt: skip
    ours = f"Coconut / PCCoT seconds per training step at 3 thoughts, {len(ratios)} quiet runs ({record['machine']['cpu']}): {steps}"
    decision = RULES[CLAIM]({"ratios": ratios})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": f"{len(ratios)} runs", "ours": ours}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="quiet runs of the bench (default: 3, as P2's rule reads)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"where to write (default: {RESULT.name} here)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs {args.runs} must be at least 1.")
    record = measure(args.runs)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}; P2: {verdict(args.out)['verdict']}")


if __name__ == "__main__":
    main()
