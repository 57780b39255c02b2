"""ICoTTrainer against the stepwise-ICoT reference's training loop: steps/s, non-pad tokens/s, peak RSS, their ratio.

    nice -n 10 python bench/bench_vs_reference.py [--train-size 20000] [--epochs 1] [--threads 1] [--compile]
    python bench/bench_vs_reference.py --variants reference,trainer,trainer+full_logits --max-steps 200
    python bench/bench_vs_reference.py --n-embd 768 --max-steps 30 --warmup 5 --vocab-size 50257

Both train the same GPT-2 (4 layers, 128 wide, GPT-2's 50,257-token vocabulary, same initial weights) with a
byte-level BPE built here from the data (its few hundred ids are a subset of the vocabulary, as the 4x4 lines use a
few dozen of GPT-2's tokens), on the same 4x4 multiplication lines (``datasets_builder`` multiplication task), with
the reference's flags: batch 32, lr 5e-5, 8 CoT tokens removed per epoch, removal smoothing λ = 4, left side,
optimizer reset on each removal, gradient clipping at 1.0, AdamW with weight decay 0.01 on every parameter, constant
learning rate. ICoTTrainer runs in the reference's sequence format, so both see the same token ids.

The baseline ``reference`` is the reference's ``train.py`` loop re-implemented from its description (not copied):
examples tokenized once into id tensors, a shuffled DataLoader that pads to the batch maximum with ``<eos>``, then per
step the scheduled count (its step counter), per-example offsets from ``torch.multinomial``, the separator positions
and the truncation found row by row in Python (``torch.cat`` per example, padded again to the new maximum), a forward
without attention mask, the token accuracy from the argmax, cross entropy, backward, clipping, fused AdamW where torch
has it, and a fresh optimizer at each removal unless the previous batch had no CoT left.

Levers, each a variant measured on its own (every variant runs in a fresh process, so peak RSS is its own):

* ``reference+vectorised`` — the truncation on the pre-tokenized ids with tensor ops, no per-example Python;
* ``reference+labelled`` — the bare loop with the output layer and the loss at labelled positions only;
* ``trainer`` — ICoTTrainer with the reference's choices (eager attention, fused AdamW, shuffled batches) and its
  default ``labelled_logits_only`` (logits where a label is; the printed ``logits`` column says how);
* ``trainer+full_logits`` — ``labelled_logits_only=False``: logits at every position, as the reference;
* ``trainer+grouped`` — ``train_sampling_strategy="group_by_length"``: batches of like lengths;
* ``trainer+foreach`` — the plain (foreach) AdamW instead of the fused one, to see what fusing gives;
* ``trainer+sdpa`` — PyTorch's scaled-dot-product attention instead of the eager one;
* ``trainer+workers`` — 2 data-loader worker processes;
* ``trainer+compile`` — ``torch_compile`` (only with ``--compile``, as the two below; compile time reported);
* ``trainer+compile_dynamic`` — ``torch_compile`` with dynamic shapes from the start (``dynamic=True``);
* ``trainer+compile_padded`` — ``torch_compile`` on batches all padded to the longest full-CoT sequence (one shape);
* ``trainer+padded`` — the same padding without compiling, to tell the padding's cost from the compiler's gain;
* ``trainer+all`` — grouped, SDPA, fused, workers (and compile with ``--compile``).

Printed: a row per variant (steps/s, non-pad tokens/s, padding efficiency = non-pad / all tokens, peak RSS, the ratio
of non-pad tokens/s to the reference's, where the logits were computed), padding efficiency per stage (per scheduled
count), and the check of equal results: the scheduled removal count at every step (identical, or the first difference)
and the loss per logging window of every variant beside the reference's. Timing leaves the first ``--warmup`` steps
out.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

VARIANTS = {
    "reference": {},
    "reference+vectorised": {"vectorised": True},
    "reference+labelled": {"labelled": True},
    "trainer": {},
    "trainer+full_logits": {"labelled": False},
    "trainer+grouped": {"grouped": True},
    "trainer+foreach": {"fused": False},
    "trainer+sdpa": {"attention": "sdpa"},
    "trainer+workers": {"workers": 2},
    "trainer+compile": {"compile": True},
    "trainer+compile_dynamic": {"compile": True, "dynamic": True},
    "trainer+compile_padded": {"compile": True, "padded": True},
    "trainer+padded": {"padded": True},
    "trainer+all": {"grouped": True, "attention": "sdpa", "workers": 2},
}
COMPILE_LEVERS = ("trainer+compile", "trainer+compile_dynamic", "trainer+compile_padded", "trainer+padded")
DEFAULT = [name for name in VARIANTS if name not in COMPILE_LEVERS]


# -- data, tokenizer, model (built once, shared by every variant) --------------------------------------------------


def build_data(options, folder: Path) -> None:
    """The 4x4 lines and a byte-level BPE trained on them, saved under ``folder``."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    from datasets_builder.registry import build_dataset

    splits, _ = build_dataset(
        "multiplication", {"train_size": options.train_size, "validation_size": 1, "test_size": 1, "seed": 0}
    )
    train = splits["train"]
    texts = [f"{q} {' '.join(c)} #### {a}" for q, c, a in zip(train["question"], train["cot"], train["answer"])]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
    bpe.save_model(str(folder))
    eos = "<|endoftext|>"
    tokenizer = GPT2TokenizerFast(
        vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), eos_token=eos, bos_token=eos,
        unk_token=eos,
    )  # fmt: skip
    tokenizer.save_pretrained(folder / "tokenizer")
    train.save_to_disk(str(folder / "train"))


def make_model(options, vocab_size: int, eos: int, attention: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=max(vocab_size, options.vocab_size), n_positions=256, n_embd=options.n_embd,
        n_layer=options.n_layer, n_head=4, bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    config._attn_implementation = attention
    return GPT2LMHeadModel(config)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class Recorder:
    """Per step: the scheduled count, non-pad and all tokens; the loss per logging window; wall clock marks."""

    def __init__(self, options) -> None:
        self.options, self.counts, self.nonpad, self.total, self.losses = options, [], [], [], []
        self.start = self.first_step_end = self.timed_start = self.end = None

    def step(self, count: float, nonpad: int, total: int) -> None:
        self.counts.append(count)
        self.nonpad.append(nonpad)
        self.total.append(total)

    def mark(self, steps_done: int) -> None:
        now = time.perf_counter()
        if steps_done == 1:
            self.first_step_end = now
        if steps_done == self.options.warmup:
            self.timed_start = now
        self.end = now

    def result(self, longest_cot: int) -> dict:
        timed = slice(self.options.warmup, None)
        seconds = self.end - self.timed_start
        steps = len(self.counts[timed])
        stages: dict[str, list[int]] = {}
        for count, nonpad, total in zip(self.counts, self.nonpad, self.total):
            key = str(int(min(count, longest_cot)))
            stages.setdefault(key, [0, 0])
            stages[key][0] += nonpad
            stages[key][1] += total
        return {
            "steps_per_s": steps / seconds,
            "nonpad_tokens_per_s": sum(self.nonpad[timed]) / seconds,
            "padding_efficiency": sum(self.nonpad) / sum(self.total),
            "stages": stages,
            "counts": [min(count, longest_cot) for count in self.counts],
            "losses": self.losses,
            "first_step_s": self.first_step_end - self.start,
            "median_step_s": seconds / steps,
            "peak_rss_mib": peak_rss_mib(),
        }


# -- the reference loop ----------------------------------------------------------------------------------------------


def reference_ids(example: dict, eos_token: str, tokenizer) -> list[int]:
    """The reference's sequence: ``' {question} {eos} ' + cot + ' {eos} ' + '#### answer' + ' {eos}'``, tokenized
    with special tokens (none for GPT-2)."""
    answer = ("#### " + example["answer"]).strip().replace(",", "")
    text = f" {example['question']} {eos_token} " + " ".join(example["cot"]) + f" {eos_token} " + answer
    return tokenizer(text + f" {eos_token}", add_special_tokens=True)["input_ids"]


def separator_positions_row_by_row(input_ids: torch.Tensor, eos: int, skip: int) -> torch.Tensor:
    """The position of the ``skip``-th ``<eos>`` (0-based) of each row, found per row as the reference does."""
    positions = input_ids.new_zeros(input_ids.shape[0])
    for row in range(input_ids.shape[0]):
        mask = input_ids[row].eq(eos)
        position = mask.nonzero()[0, -1].item()
        for _ in range(skip):
            mask[position] = False
            position = mask.nonzero()[0, -1].item()
        positions[row] = position
    return positions


def truncate_row_by_row(input_ids, labels, eos, to_remove):
    """Left removal of ``to_remove[i]`` CoT tokens of row i, per example in Python; (ids, labels, no CoT left)."""
    first = separator_positions_row_by_row(input_ids, eos, 0)
    second = separator_positions_row_by_row(input_ids, eos, 1)
    last = separator_positions_row_by_row(input_ids, eos, 2)
    ids, labs, without_cot = [], [], True
    for row in range(input_ids.shape[0]):
        start, stop = first[row] + 1, first[row] + 1 + to_remove[row]
        without_cot = without_cot and bool(stop >= second[row])
        stop = min(stop, second[row])
        ids.append(torch.cat((input_ids[row, :start], input_ids[row, stop : last[row] + 1])))
        labs.append(torch.cat((labels[row, :start], labels[row, stop : last[row] + 1])))
    return pad_rows(ids, eos), pad_rows(labs, -100), without_cot


def pad_rows(rows: list[torch.Tensor], value: int) -> torch.Tensor:
    out = torch.full((len(rows), max(len(row) for row in rows)), value, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index, : len(row)] = row
    return out


def truncate_vectorised(input_ids, labels, eos, to_remove):
    """The same truncation with tensor ops: each kept position reads its source column through one gather."""
    is_eos = input_ids.eq(eos)
    seen = is_eos.cumsum(dim=1)  # (B, T): separators up to and including each position
    first, second, last = (((seen == k) & is_eos).long().argmax(dim=1) for k in (1, 2, 3))
    start = first + 1
    removed = torch.minimum(start + to_remove, second) - start  # (B,)
    columns = torch.arange(input_ids.shape[1], device=input_ids.device)
    source = columns[None] + (columns[None] >= start[:, None]) * removed[:, None]  # (B, T)
    lengths = last + 1 - removed
    keep = columns[None] < lengths[:, None]
    source = source.clamp(max=input_ids.shape[1] - 1)
    width = int(lengths.max())
    ids = torch.where(keep, input_ids.gather(1, source), eos)[:, :width]
    labs = torch.where(keep, labels.gather(1, source), -100)[:, :width]
    return ids, labs, bool((removed >= second - start).all())


def run_reference(options, variant: dict, tokenizer, train) -> dict:
    eos, eos_token = tokenizer.eos_token_id, tokenizer.eos_token
    examples = []
    for example in train:
        ids = reference_ids(example, eos_token, tokenizer)
        labels = list(ids)
        cut = labels.index(eos) + 1
        labels[:cut] = [-100] * cut
        examples.append((torch.tensor(ids), torch.tensor(labels)))
    separators = [[i for i, token in enumerate(ids.tolist()) if token == eos] for ids, _ in examples]
    longest_cot = max(second - first - 1 for first, second, _ in separators)

    def collate(batch):
        return pad_rows([ids for ids, _ in batch], eos), pad_rows([labels for _, labels in batch], -100)

    generator = torch.Generator().manual_seed(options.seed)
    loader = torch.utils.data.DataLoader(
        examples, batch_size=options.batch_size, shuffle=True, collate_fn=collate, generator=generator, drop_last=True
    )
    model = make_model(options, len(tokenizer), eos, variant.get("attention", "eager"))
    model.train()
    fused = {"fused": True} if "fused" in inspect.signature(torch.optim.AdamW).parameters else {}

    def new_optimizer():
        return torch.optim.AdamW(model.parameters(), lr=options.lr, **fused)  # weight decay 0.01, every parameter

    optimizer = new_optimizer()
    offsets = torch.tensor(smoothing(options.removal_lambda), dtype=torch.float)
    truncate = truncate_vectorised if variant.get("vectorised") else truncate_row_by_row
    recorder = Recorder(options)
    steps_per_epoch = len(loader)
    period = int(round(steps_per_epoch / options.remove_per_epoch))
    scheduled, counter, previous_without_cot, step, window = 0, 0, False, 0, []
    torch.manual_seed(options.seed)
    recorder.start = time.perf_counter()
    for _ in range(options.epochs):
        for input_ids, labels in loader:
            if step >= options.max_steps:
                break
            before = scheduled
            if counter == period or period == 0:
                scheduled, counter = scheduled + 1, 0
            counter += 1
            if scheduled > before and not previous_without_cot:
                optimizer.zero_grad(set_to_none=True)
                optimizer = new_optimizer()
            to_remove = scheduled + torch.multinomial(offsets, input_ids.shape[0], replacement=True)
            input_ids, labels, previous_without_cot = truncate(input_ids, labels, eos, to_remove)
            if variant.get("labelled"):  # the output layer only where the next token is labelled
                hidden = model.transformer(input_ids=input_ids).last_hidden_state  # (B, T, H)
                targets = labels[:, 1:][labels[:, 1:] != -100]  # (N,)
                logits = model.lm_head(hidden[:, :-1][labels[:, 1:] != -100])  # (N, V)
                _token_accuracy = (logits.argmax(-1) == targets).sum()
                loss = torch.nn.functional.cross_entropy(logits, targets)
            else:
                logits = model(input_ids=input_ids).logits
                _token_accuracy = (logits.argmax(-1)[:, :-1] == labels[:, 1:]).sum()  # the reference computes it
                loss = torch.nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
                )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            window.append(loss.item())
            if len(window) == options.log_every:
                recorder.losses.append(sum(window) / len(window))
                window = []
            recorder.step(scheduled, int(input_ids.ne(eos).sum()) + 3 * input_ids.shape[0], input_ids.numel())
            step += 1
            recorder.mark(step)
    result = recorder.result(longest_cot)
    result["full_cot_tokens"] = sum(len(ids) for ids, _ in examples) / len(examples)
    result["logits"] = "labelled (gather)" if variant.get("labelled") else "every position"
    return result


def smoothing(removal_lambda: float) -> list[float]:
    from hf_icot.curriculum.removal import smoothing_offset_probabilities

    return smoothing_offset_probabilities(removal_lambda).tolist()  # the reference's distribution, 100 offsets


# -- ICoTTrainer -----------------------------------------------------------------------------------------------------


def run_trainer(options, variant: dict, tokenizer, train, folder: Path) -> dict:
    from transformers import TrainerCallback

    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    recorder = Recorder(options)

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            recorder.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            recorder.mark(state.global_step)

    steps_per_epoch = len(train) // options.batch_size
    args = ICoTConfig(
        output_dir=str(folder / "trainer-run"), schedule="stepwise", sequence_format="reference",
        remove_per_epoch=options.remove_per_epoch, removal_smoothing_lambda=options.removal_lambda,
        removal_side="left", reset_optimizer=True, per_device_train_batch_size=options.batch_size,
        learning_rate=options.lr, lr_scheduler_type="constant", max_grad_norm=1.0, weight_decay=0.01,
        decay_all_parameters=True, optim="adamw_torch_fused" if variant.get("fused", True) else "adamw_torch",
        train_sampling_strategy="group_by_length" if variant.get("grouped") else "random",
        dataloader_num_workers=variant.get("workers", 0), torch_compile=bool(variant.get("compile")),
        num_train_epochs=options.epochs, max_steps=min(options.max_steps, steps_per_epoch * options.epochs),
        dataloader_drop_last=True, logging_steps=options.log_every, save_strategy="no", report_to="none",
        use_cpu=True, disable_tqdm=True, keep_stage_checkpoints=False, evaluate_each_stage=False, seed=options.seed,
        labelled_logits_only=variant.get("labelled", True),
    )  # fmt: skip
    model = make_model(options, len(tokenizer), tokenizer.eos_token_id, variant.get("attention", "eager"))
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer, callbacks=[Clock()])
    fetch = trainer.get_batch_samples
    full_length = max(trainer.train_dataset["length"])  # the untruncated sequence, in the run's format

    def counted(*fetch_args, **kwargs):  # one sum per batch: what each step carried
        step = trainer.state.global_step
        batches, items = fetch(*fetch_args, **kwargs)
        if variant.get("padded"):
            batches = [pad_batch(batch, full_length, tokenizer.eos_token_id) for batch in batches]
        nonpad = sum(int(batch["attention_mask"].sum()) for batch in batches)
        total = sum(batch["attention_mask"].numel() for batch in batches)
        recorder.step(trainer.schedule.removed_count(step), nonpad, total)
        return batches, items

    trainer.get_batch_samples = counted
    trainer.train()
    recorder.losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    result = recorder.result(trainer._max_cot_tokens)
    result["full_cot_tokens"] = sum(trainer.train_dataset["length"]) / len(trainer.train_dataset)
    strategy = trainer.labelled_logits_strategy
    result["logits"] = f"labelled ({strategy})" if strategy not in (None, "undecided") else "every position"
    return result


def pad_batch(batch: dict, length: int, pad: int) -> dict:
    """``batch`` right-padded to ``length`` columns (padding: ``pad``, no attention, no label, position 0)."""
    fill = {"input_ids": pad, "labels": -100, "attention_mask": 0, "position_ids": 0}
    width = batch["input_ids"].shape[1]
    if width > length:
        raise ValueError(f"a batch of {width} tokens is longer than the full-CoT length {length}")
    return {
        name: torch.nn.functional.pad(value, (0, length - width), value=fill[name]) if name in fill else value
        for name, value in batch.items()
    }


# -- driver ----------------------------------------------------------------------------------------------------------


def worker(options) -> None:
    """Run one variant in this (fresh) process and print its result as one JSON line."""
    import datasets
    from transformers import AutoTokenizer

    torch.set_num_threads(options.threads)
    folder = Path(options.worker_folder)
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    train = datasets.load_from_disk(str(folder / "train"))
    variant = VARIANTS[options.worker]
    if variant.get("dynamic"):  # read by accelerate's TorchDynamoPlugin, which the Trainer builds
        os.environ["ACCELERATE_DYNAMO_USE_DYNAMIC"] = "true"
    if options.worker.startswith("reference"):
        result = run_reference(options, variant, tokenizer, train)
    else:
        result = run_trainer(options, variant, tokenizer, train, folder)
    print("RESULT " + json.dumps(result))


def launch(options, name: str, folder: Path) -> dict:
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in vars(options).items() if key in FORWARDED]
    flags += ["--compile"] if options.compile else []
    command = [sys.executable, __file__, *flags, f"--worker={name}", f"--worker-folder={folder}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


FORWARDED = (
    "train_size", "epochs", "max_steps", "warmup", "batch_size", "lr", "remove_per_epoch", "removal_lambda",
    "n_layer", "n_embd", "vocab_size", "threads", "log_every", "seed",
)  # fmt: skip


def report(options, results: dict[str, dict]) -> None:
    base = results["reference"]
    print(
        f"4x4 multiplication, {options.train_size} lines, batch {options.batch_size}, GPT-2 {options.n_layer}x"
        f"{options.n_embd}, {len(base['counts'])} steps ({options.warmup} warm-up), {options.threads} thread(s); "
        f"full-CoT tokens per example: reference {base['full_cot_tokens']:.2f}, ICoTTrainer "
        f"{next((r['full_cot_tokens'] for n, r in results.items() if n.startswith('trainer')), float('nan')):.2f}"
    )
    header = f"{'variant':24} {'steps/s':>9} {'non-pad tok/s':>14} {'pad eff':>8} {'peak RSS MiB':>13} {'ratio':>7}"
    print(f"{header}  logits")
    for name, result in results.items():
        ratio = result["nonpad_tokens_per_s"] / base["nonpad_tokens_per_s"]
        print(
            f"{name:24} {result['steps_per_s']:9.2f} {result['nonpad_tokens_per_s']:14.1f} "
            f"{result['padding_efficiency']:8.3f} {result['peak_rss_mib']:13.1f} {ratio:7.3f}  {result['logits']}"
        )
    plain = results.get("trainer", base)
    for name in [name for name in COMPILE_LEVERS if name in results and VARIANTS[name].get("compile")]:
        compiled = results[name]
        extra = compiled["first_step_s"] - plain["first_step_s"]
        print(f"{name}: first step {compiled['first_step_s']:.2f} s vs {plain['first_step_s']:.2f} s uncompiled "
              f"(compile time ~{extra:.2f} s)")  # fmt: skip
    print("padding efficiency per stage (scheduled count: non-pad / all tokens)")
    for name, result in results.items():
        cells = " ".join(
            f"{k}:{n / t:.3f}" for k, (n, t) in sorted(result["stages"].items(), key=lambda kv: int(kv[0]))
        )
        print(f"  {name:22} {cells}")
    for name, result in results.items():
        if name == "reference":
            continue
        differing = [step for step, (a, b) in enumerate(zip(base["counts"], result["counts"])) if a != b]
        same_length = len(base["counts"]) == len(result["counts"])
        verdict = "identical" if not differing and same_length else f"differ from step {differing[:1] or 'end'}"
        print(f"removal counts per step, {name} vs reference: {verdict}")
    print(f"loss per {options.log_every}-step window (reference first):")
    for name, result in results.items():
        print(f"  {name:22} " + " ".join(f"{loss:.3f}" for loss in result["losses"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-size", type=int, default=20_000, help="4x4 training lines")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of every variant")
    parser.add_argument("--max-steps", type=int, default=10**9, help="stop every variant after this many steps")
    parser.add_argument("--warmup", type=int, default=10, help="first steps left out of the timing")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per step (the reference's 32)")
    parser.add_argument("--lr", type=float, default=5e-5, help="learning rate (the reference's 5e-5)")
    parser.add_argument("--remove-per-epoch", type=float, default=8, help="CoT tokens removed per epoch")
    parser.add_argument("--removal-lambda", type=float, default=4.0, help="removal smoothing λ (inf: off)")
    parser.add_argument("--n-layer", type=int, default=4, help="GPT-2 layers")
    parser.add_argument("--n-embd", type=int, default=128, help="GPT-2 width (4 heads: a multiple of 4)")
    parser.add_argument(
        "--vocab-size", type=int, default=50257, help="model vocabulary (at least the local BPE's; GPT-2's 50,257)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads of each variant")
    parser.add_argument("--log-every", type=int, default=50, help="steps per loss window")
    parser.add_argument("--seed", type=int, default=0, help="seed of initial weights, shuffling and offsets")
    parser.add_argument(
        "--variants", default=",".join(DEFAULT), help=f"comma-separated, from {', '.join(VARIANTS)}; reference always"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help=f"add the torch.compile levers ({', '.join(COMPILE_LEVERS)}) to the variants",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-folder", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    names = ["reference"] + [name for name in options.variants.split(",") if name and name != "reference"]
    if options.compile:
        names += [name for name in COMPILE_LEVERS if name not in names]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        parser.error(f"variant(s) {', '.join(unknown)} unknown; choose from {', '.join(VARIANTS)}.")
    if options.compile:
        VARIANTS["trainer+all"] = {**VARIANTS["trainer+all"], "compile": True}
    for name in ("train_size", "epochs", "max_steps", "batch_size", "n_layer", "threads", "log_every"):
        if getattr(options, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(options, name)} is not allowed; it must be >= 1.")
    if not 1 <= options.warmup < min(options.max_steps, options.epochs * options.train_size // options.batch_size):
        parser.error(f"--warmup {options.warmup} must be >= 1 and below the number of steps of a run.")
    if options.n_embd < 4 or options.n_embd % 4:
        parser.error(f"--n-embd {options.n_embd} is not a positive multiple of 4, the number of heads.")
    if options.worker is not None:
        worker(options)
        return
    with tempfile.TemporaryDirectory() as folder:
        build_data(options, Path(folder))
        results = {name: launch(options, name, Path(folder)) for name in names}
    report(options, results)


if __name__ == "__main__":
    main()
