"""Model A after its first step, node by node: why a seed of the papers' algorithm fails (B1).

Trains each seed's first step exactly as ``a_paper_log_icot`` does (the same config, data and seed, ``--max_steps 1``,
so the single stage-0 step on the same batch) and reads the rounded W^KQ of every CoT node: the integer scores of its
two children and the highest score among the other positions it may attend to. A node is *exact* when both children
share the top score and every other position is at least ``margin`` below; a *split* node has its two children at
different scores (the attention between them is uneven, so its output is not their product); a *wrong* node has
another position at or above a child. Writes ``first_step.csv`` / ``.md`` (one row per seed and node that is not
exact, plus a summary row per seed).

    python -m results.parity.first_step --seeds 0 1 2 3 --out results/parity
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIG = HERE / "configs" / "parity_log_icot_paper.yaml"
#: the secret support is a function of (seed, n_bits, k) alone; tiny split sizes keep the task's size checks quiet
SIZES = {"train_size": 1, "validation_size": 1, "test_size": 1}


def train_first_step(seed: int, folder: Path) -> Path:
    """The recipe's first step for ``seed`` into ``folder`` (its saved model)."""
    command = [sys.executable, str(HERE / "train.py"), "--config", str(CONFIG), "--task_args",
               f'{{"seed": {seed}}}', "--seed", str(seed), "--max_steps", "1", "--eval_strategy", "no",
               "--output_dir", str(folder), "--disable_tqdm", "true"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO)
    return folder


def node_rows(model: Any, seed: int, margin: float = 2.0) -> list[dict[str, Any]]:
    """One row per CoT node that is not exact after the step (see the module docstring)."""
    import torch

    from datasets_builder import registry
    from datasets_builder.tasks.parity import secret_support
    from results.parity.theory.inspection import node_children
    from results.parity.theory.log_icot_parity import level_mask, tree_levels

    config = model.config
    levels = tree_levels(config.n_bits, config.k)
    allowed = level_mask(levels)
    support = secret_support(registry.make_params("parity", n_bits=config.n_bits, k=config.k, seed=seed, **SIZES))
    tree = node_children(config.model_type, config.n_bits, config.k, support)
    rows = []
    for level, layer in enumerate(model.layers, start=1):
        scores = layer.w_kq_pos.detach()
        for node in torch.nonzero(levels == level).flatten().tolist():
            children = tree[node]
            others = [j for j in torch.nonzero(allowed[node]).flatten().tolist() if j not in children]
            child_scores = [float(scores[node, j]) for j in children]
            other = max((float(scores[node, j]) for j in others), default=float("-inf")) + 0.0  # no "-0"
            if child_scores[0] != child_scores[1]:
                kind = "split"
            elif other >= min(child_scores):
                kind = "wrong"
            elif min(child_scores) - other < margin:
                kind = "weak"
            else:
                continue
            rows.append({"seed": seed, "layer": level, "node": node, "kind": kind,
                         "child scores": " ".join(f"{s:g}" for s in child_scores),
                         "best other score": f"{other:g}"})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="the seeds of a_paper_log_icot to read")
    parser.add_argument("--out", type=Path, default=HERE, help="where first_step.csv / .md go")
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM

    import results.parity.theory  # noqa: F401  (registers the theory models)
    from hf_icot.studies.report import write_table

    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            model = AutoModelForCausalLM.from_pretrained(train_first_step(seed, Path(folder) / "run"))
        found = node_rows(model, seed)
        rows.extend(found)
        kinds = sorted({row["kind"] for row in found})
        rows.append({"seed": seed, "layer": "all", "node": "", "kind": ", ".join(kinds) or "every node exact",
                     "child scores": f"{len(found)} nodes not exact", "best other score": ""})  # fmt: skip
        print(f"seed {seed}: {len(found)} nodes not exact ({', '.join(kinds) or 'none'})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_table(rows, args.out, "first_step")


if __name__ == "__main__":
    main()
