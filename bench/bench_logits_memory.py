"""Peak memory of ICoTTrainer's training steps with logits at every position and at labelled positions only.

    python bench/bench_logits_memory.py                      # a tiny Llama with Llama 3's 128,256-token vocabulary
    python bench/bench_logits_memory.py --schedule no_cot       # the curriculum's end: question and answer only
    python bench/bench_logits_memory.py --vocab-size 50257 --batch-size 64 --steps 5

ICoTTrainer trains a Llama built from a config (``--n-layer`` layers, ``--hidden-size`` wide, untied output layer) on
4x4 multiplication lines with their full CoT (``--schedule no_cot``: none, as at a curriculum's end), batch
``--batch-size``, once with ``labelled_logits_only=False`` (logits at every position) and once with its default (logits
where the next token is labelled); the word-level tokenizer built from the data has a few dozen ids, a subset of the
``--vocab-size`` rows. Each variant runs in a fresh process. Printed per variant: the RSS when training begins (model
and data, no gradients or optimizer state yet), the peak RSS over the steps, the difference (what the steps add:
activations, logits and their gradient, the parameters' gradients, AdamW's moments), and the ratio of the two
differences; then one batch's float32 ``(B, T, V)`` logits for scale, and the loss of every step of both (the same
computation gives the same losses).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

VARIANTS = {"every position": False, "labelled only": True}


def rss_mib() -> float:
    """This process's resident memory now (Linux ``/proc``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status (not Linux?)")


def worker(options, labelled: bool, folder: Path) -> dict:
    import datasets
    from transformers import LlamaConfig, LlamaForCausalLM, TrainerCallback

    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    torch.set_num_threads(options.threads)
    train = datasets.load_from_disk(str(folder / "train"))
    tokenizer = build_word_level_tokenizer(train)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=max(options.vocab_size, len(tokenizer)), hidden_size=options.hidden_size,
        intermediate_size=2 * options.hidden_size, num_hidden_layers=options.n_layer, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    args = ICoTConfig(
        output_dir=str(folder / f"run-{labelled}"), schedule=options.schedule,
        per_device_train_batch_size=options.batch_size, max_steps=options.steps, learning_rate=1e-3, logging_steps=1,
        save_strategy="no", report_to="none",
        use_cpu=True, disable_tqdm=True, keep_stage_checkpoints=False, evaluate_each_stage=False, seed=0,
        labelled_logits_only=labelled, dataloader_drop_last=True,
    )  # fmt: skip
    marks: dict[str, float] = {}

    class Memory(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            marks["start"] = rss_mib()

    trainer = ICoTTrainer(
        model=model, args=args, train_dataset=train, processing_class=tokenizer, callbacks=[Memory()]
    )
    trainer.train()
    share, width = first_batch(trainer)
    return {
        "start_mib": marks["start"],
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux reports KiB
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "logits_mib": options.batch_size * width * config.vocab_size * 4 / 2**20,
        "labelled_share": share,
        "strategy": trainer.labelled_logits_strategy,
    }


def first_batch(trainer) -> tuple[float, int]:
    """The first batch's share of (B, T) positions that predict a labelled token, and its length T."""
    batch, _ = trainer._render(next(iter(trainer.get_train_dataloader())), 0, training=True)
    labels = batch["labels"]
    return float((labels[:, 1:] != -100).sum()) / labels.numel(), labels.shape[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=128_256, help="model vocabulary (Llama 3's 128,256)")
    parser.add_argument("--hidden-size", type=int, default=64, help="Llama width (4 heads: a multiple of 4)")
    parser.add_argument("--n-layer", type=int, default=2, help="Llama layers")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per step")
    parser.add_argument("--steps", type=int, default=3, help="training steps of each variant")
    parser.add_argument(
        "--schedule", default="full_cot", choices=["full_cot", "no_cot"], help="CoT kept: all (full_cot) or none"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads of each variant")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-folder", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    for name in ("vocab_size", "n_layer", "batch_size", "steps", "threads"):
        if getattr(options, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(options, name)} is not allowed; it must be >= 1.")
    if options.hidden_size < 4 or options.hidden_size % 4:
        parser.error(f"--hidden-size {options.hidden_size} is not a positive multiple of 4, the number of heads.")
    if options.worker is not None:
        result = worker(options, options.worker == "labelled", Path(options.worker_folder))
        print("RESULT " + json.dumps(result))
        return
    from datasets_builder.registry import build_dataset

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        size = {"train_size": options.batch_size * options.steps, "validation_size": 1, "test_size": 1, "seed": 0}
        build_dataset("multiplication", size)[0]["train"].save_to_disk(str(Path(folder) / "train"))
        flags = [f"--{key.replace('_', '-')}={value}" for key, value in vars(options).items() if "worker" not in key]
        for name, labelled in VARIANTS.items():
            worker_flags = [f"--worker={'labelled' if labelled else 'full'}", f"--worker-folder={folder}"]
            done = subprocess.run([sys.executable, __file__, *flags, *worker_flags], capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"variant {name} failed:\n{done.stderr[-3000:]}")
            line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
            results[name] = json.loads(line[len("RESULT ") :])
    report(options, results)


def report(options, results: dict[str, dict]) -> None:
    full, ours = results["every position"], results["labelled only"]
    print(
        f"Llama {options.n_layer}x{options.hidden_size}, vocabulary {options.vocab_size:,}, {options.schedule}, "
        f"batch {options.batch_size}, {options.steps} steps, {options.threads} thread(s); "
        f"one batch's float32 logits {full['logits_mib']:,.1f} MiB; "
        f"{ours['labelled_share']:.1%} of the positions predict a labelled token"
    )
    print(f"{'logits at':16} {'RSS at start MiB':>17} {'peak RSS MiB':>13} {'step adds MiB':>14}  computed")
    for name, result in results.items():
        added = result["peak_mib"] - result["start_mib"]
        how = "every position" if result["strategy"] in (None, "undecided") else result["strategy"]
        print(f"{name:16} {result['start_mib']:17,.1f} {result['peak_mib']:13,.1f} {added:14,.1f}  {how}")
    ratio = (ours["peak_mib"] - ours["start_mib"]) / (full["peak_mib"] - full["start_mib"])
    print(f"memory the steps add, labelled only / every position: {ratio:.3f}")
    print("loss per step (every position, labelled only):")
    for name, result in results.items():
        print(f"  {name:16} " + " ".join(f"{loss:.4f}" for loss in result["losses"]))


if __name__ == "__main__":
    main()
