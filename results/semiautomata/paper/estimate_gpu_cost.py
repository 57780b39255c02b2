"""What the paper-scale sweep (runs.yaml beside this file) would cost on a GPU, as an ESTIMATE: the training step of
its model is timed here on the CPU, its FLOPs counted, and the sweep's FLOPs divided by a GPU throughput you state.

    python results/semiautomata/paper/estimate_gpu_cost.py                       # the paper config, 5 timed steps
    python results/semiautomata/paper/estimate_gpu_cost.py --steps 2 --gpu-tflops 5 20 100

The model is the one the recipe builds from ``recipes/configs/semiautomata_paper.yaml`` (depth and parameter budget
through ``hf_icot.modeling.sizing.width_for_budget``, the counter's vocabulary), trained by AdamW on random token ids
of the full-CoT length (the longest stage; later stages are shorter, so the estimate is an upper bound per step).
FLOPs per step: 6 x (parameters outside the embeddings) x tokens plus 12 x layers x width x length x tokens for the
attention scores and their use (forward and backward). The GPU time is FLOPs / (the throughput you state): small
models run far below a GPU's peak, so several throughputs are printed; none of them is measured.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "recipes" / "configs" / "semiautomata_paper.yaml"
#: what the last run measured, for the study's README (make_results.py reads it)
OUT = Path(__file__).parent / "cost_estimate.json"


def model_for(config: dict, vocab_size: int, depth: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    from hf_icot.modeling.sizing import width_for_budget

    fields = {k: v for k, v in config["scratch_model"].items() if k not in ("depth", "param_budget")}
    fields.update(vocab_size=vocab_size, bos_token_id=0, eos_token_id=0)
    width, _ = width_for_budget(depth, config["scratch_model"]["param_budget"], **fields)
    return GPT2LMHeadModel(GPT2Config(n_layer=depth, n_embd=width, **fields))


def step_flops(model, batch: int, length: int) -> float:
    c = model.config
    embeddings = (c.vocab_size + c.n_positions) * c.n_embd
    dense = model.num_parameters() - embeddings
    tokens = batch * length
    return 6.0 * dense * tokens + 12.0 * c.n_layer * c.n_embd * length * tokens


def time_steps(model, batch: int, length: int, steps: int) -> float:
    """Seconds per AdamW training step (the first, warm-up step left out)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (batch, length))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - start)
    return sum(times[1:]) / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed training steps (after one warm-up step)")
    parser.add_argument("--batch", type=int, default=None, help="batch for the timing (default: the config's)")
    parser.add_argument("--gpu-tflops", type=float, nargs="+", default=[10.0, 50.0, 200.0],
                        help="effective GPU throughputs (TFLOP/s) to divide the sweep's FLOPs by (not measured)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the figures go as JSON (default {OUT.name})")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps {args.steps} is not allowed; time at least 1 step.")
    import torch

    from hf_icot.studies.sweep import load_sweep

    if args.threads:
        torch.set_num_threads(args.threads)
    config = yaml.safe_load(CONFIG.read_text())
    task = config["task_args"]
    length = 2 * task["length"] + 4  # question, <eos>, every state, <eos>, ####, answer (the full-CoT layout)
    batch = args.batch or config["per_device_train_batch_size"]
    sweep = load_sweep(Path(__file__).parent)
    deep = sum('"depth": 25' in " ".join(run.command) for run in sweep.runs)
    print(f"paper sweep: {len(sweep.runs)} runs ({deep} at depth 25), {config['max_steps']:,} steps of "
          f"{config['per_device_train_batch_size']} each, sequences of {length} tokens (full CoT, the longest)")  # fmt: skip
    total, shapes = 0.0, []
    for depth, runs in ((config["scratch_model"]["depth"], len(sweep.runs) - deep), (25, deep)):
        model = model_for(config, vocab_size=task["modulus"] + 8, depth=depth)
        flops = step_flops(model, config["per_device_train_batch_size"], length)
        seconds = time_steps(model, batch, length, args.steps) * config["per_device_train_batch_size"] / batch
        cpu_rate = flops / seconds
        run_flops = flops * config["max_steps"]
        total += run_flops * runs
        shapes.append({"depth": depth, "width": model.config.n_embd, "parameters": model.num_parameters(),
                       "tflop_per_step": flops / 1e12, "cpu_s_per_step": seconds, "runs": runs,
                       "cpu_hours_per_run": seconds * config["max_steps"] / 3600})  # fmt: skip
        print(f"depth {depth}, width {model.config.n_embd}: {model.num_parameters():,} parameters, "
              f"{flops / 1e12:.3f} TFLOP per step; measured here {seconds:.2f} s per step "
              f"({cpu_rate / 1e9:.1f} GFLOP/s) -> {seconds * config['max_steps'] / 3600:.1f} CPU hours per run")  # fmt: skip
    print(f"sweep: {total / 1e15:.1f} PFLOP in all (estimate)")
    gpu = {f"{tflops:g}": total / (tflops * 1e12) / 3600 for tflops in args.gpu_tflops}
    record = {"shapes": shapes, "sweep_pflop": total / 1e15, "gpu_hours_at_tflops": gpu, "timed_batch": batch,
              "threads": torch.get_num_threads()}  # fmt: skip
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for tflops in args.gpu_tflops:
        hours = total / (tflops * 1e12) / 3600
        print(f"ESTIMATE at {tflops:g} TFLOP/s effective: {hours:.1f} GPU hours for the sweep, "
              f"{hours * 60 / len(sweep.runs):.0f} minutes per run")  # fmt: skip


if __name__ == "__main__":
    main()
