"""How much slower is ICoTTrainer than a bare PyTorch loop on the same batches?

    nice -n 10 python bench/bench_trainer_overhead.py [--schedule stepwise] [--steps 150] [--repeats 3]

Both train the same tiny GPT-2 (same initial weights, AdamW, clipping at 1.0) on the stepwise-ICoT reference's own
4x4 multiplication lines (``shared/anchor-data``), with a word-level tokenizer. The bare loop is what the reference
script does per batch — forward, loss, backward, clip, step — on batches rendered *before* timing (the exact batches
the trainer renders at each step, via the same schedule), so every cost of collation, curriculum, logging and the
Trainer machinery counts against ICoTTrainer. Each repeat times both, alternating, after a few warm-up steps; the
script prints throughput (examples/s) and the ratio ICoTTrainer / bare — by wall time and by this process's CPU
time, the steadier measure when other jobs share the machine — and the medians over repeats.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback

from hf_icot.cot import parse_line
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer

DATA = Path(__file__).resolve().parents[2] / "shared" / "anchor-data" / "internalize_cot_step_by_step"


def clocks() -> tuple[float, float]:
    """(wall time, this process's CPU time): CPU time is what to compare on a machine other jobs are loading."""
    return time.perf_counter(), time.process_time()


class StepClock(TrainerCallback):
    """Wall and CPU time from the end of the warm-up steps to the end of training."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.end = warmup, None, None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.warmup:
            self.start = clocks()
        self.end = clocks()


def make_model(vocab_size: int, n_layer: int, n_embd: int) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=256, n_embd=n_embd, n_layer=n_layer, n_head=4, bos_token_id=1,
        eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def run_trainer(options, dataset, tokenizer, folder: str, capture: list | None = None) -> tuple[float, float]:
    """Train with ICoTTrainer; return the timed (wall, CPU) seconds. With ``capture``, append every batch trained on."""
    args = ICoTConfig(
        output_dir=folder,
        schedule=options.schedule,
        remove_per_epoch=8,
        removal_smoothing_lambda=4.0,
        max_steps=options.steps,
        per_device_train_batch_size=options.batch_size,
        learning_rate=5e-5,
        lr_scheduler_type="constant",
        max_grad_norm=1.0,
        optim="adamw_torch",  # the same torch AdamW (foreach) as the bare loop
        logging_steps=50,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        keep_stage_checkpoints=False,
        dataloader_drop_last=True,
        seed=0,
    )
    clock = StepClock(options.warmup)
    model = make_model(len(tokenizer), options.n_layer, options.n_embd)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=[clock])
    if capture is not None:
        fetch = trainer.get_batch_samples

        def fetch_and_keep(*args, **kwargs):
            batches, num_items = fetch(*args, **kwargs)
            capture.extend(batches)
            return batches, num_items

        trainer.get_batch_samples = fetch_and_keep
    trainer.train()
    return clock.end[0] - clock.start[0], clock.end[1] - clock.start[1]


def run_bare(options, batches, vocab_size: int) -> tuple[float, float]:
    model = make_model(vocab_size, options.n_layer, options.n_embd)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    start = None
    for step, batch in enumerate(batches):
        if step == options.warmup:
            start = clocks()
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    end = clocks()
    return end[0] - start[0], end[1] - start[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--schedule", default="stepwise", choices=["full_cot", "stepwise"], help="ICoTTrainer's curriculum"
    )
    parser.add_argument("--steps", type=int, default=150, help="training steps of each run, warm-up included")
    parser.add_argument("--warmup", type=int, default=10, help="first steps of each run left out of the timing")
    parser.add_argument("--repeats", type=int, default=3, help="timed (bare, ICoTTrainer) pairs; medians reported")
    parser.add_argument("--batch_size", type=int, default=32, help="examples per step")
    parser.add_argument("--n_layer", type=int, default=2, help="GPT-2 layers")
    parser.add_argument("--n_embd", type=int, default=128, help="GPT-2 width (4 heads, so a multiple of 4)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    options = parser.parse_args()
    if not 1 <= options.warmup < options.steps:
        parser.error(f"--warmup {options.warmup} must be >= 1 and below --steps {options.steps}.")
    for name in ("repeats", "batch_size", "n_layer", "threads"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} {getattr(options, name)} is not allowed; it must be >= 1.")
    if options.n_embd < 4 or options.n_embd % 4:
        parser.error(f"--n_embd {options.n_embd} is not a positive multiple of 4, the number of heads.")
    torch.set_num_threads(options.threads)

    valid = DATA / "4_by_4_mult" / "valid.txt"
    if not valid.is_file():
        parser.error(f"{valid} is missing; the bench trains on the reference's lines, kept in ../shared/anchor-data.")
    lines = valid.read_text().splitlines()
    examples = [parse_line(line, number) for number, line in enumerate(lines, 1)]
    import datasets  # after torch, as the Trainer imports it anyway

    dataset = datasets.Dataset.from_list(examples)
    tokenizer = build_word_level_tokenizer(dataset)
    measured_examples = (options.steps - options.warmup) * options.batch_size
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        batches: list[dict[str, torch.Tensor]] = []
        run_trainer(
            options, dataset, tokenizer, folder, capture=batches
        )  # warms caches; its batches feed the bare loop
        print(
            f"{len(examples)} examples of 4x4 multiplication, schedule {options.schedule}, batch {options.batch_size}, "
            f"GPT-2 {options.n_layer}x{options.n_embd}, {options.steps} steps ({options.warmup} warm-up), "
            f"{options.threads} thread(s); mean sequence length {statistics.mean(b['input_ids'].shape[1] for b in batches):.1f}"
        )
        for repeat in range(options.repeats):
            bare = [measured_examples / seconds for seconds in run_bare(options, batches, len(tokenizer))]
            ours = [measured_examples / seconds for seconds in run_trainer(options, dataset, tokenizer, folder)]
            ratios.append([o / b for o, b in zip(ours, bare)])
            print(
                f"repeat {repeat}: wall ex/s bare {bare[0]:7.1f} ICoTTrainer {ours[0]:7.1f} ratio {ratios[-1][0]:.3f} | "
                f"CPU-time ex/s bare {bare[1]:7.1f} ICoTTrainer {ours[1]:7.1f} ratio {ratios[-1][1]:.3f}"
            )
    wall, cpu = (statistics.median(r[i] for r in ratios) for i in (0, 1))
    print(f"median ratio ICoTTrainer / bare loop: wall {wall:.3f}, CPU time {cpu:.3f} (target >= 0.90)")


if __name__ == "__main__":
    main()
