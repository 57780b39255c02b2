"""ICoT on one GPU: tokens/s, model FLOPs utilisation, peak memory of ICoTTrainer and of a bare loop, fp32 and bf16.

    python bench/bench_gpu_icot.py [--steps 20] [--warmup 5] [--peak-tflops 989] [--max-batch 4096]
    python bench/bench_gpu_icot.py --dry-run

GPT-2 small (12 layers, 768 wide, 12 heads, 50,257-token vocabulary) built from its config, random weights, no
downloads; a byte-level BPE built here from the data (the model's extra vocabulary rows stay unused, the LM head
still costs its full FLOPs). Data: 4x4 multiplication lines from ``datasets_builder``, in the stepwise reference's
sequence format; the curriculum is the reference's (8 tokens per epoch, λ = 4, left, optimizer reset).

For each precision (fp32 with TF32 matmuls off unless ``--tf32``; bf16 autocast) the script first finds the batch that
fills the GPU: it doubles the batch from ``--min-batch`` while a bare training step fits (no out-of-memory error and
peak memory under ``--memory-fraction`` of the device), up to ``--max-batch``. With that batch it times ``--steps``
steps after ``--warmup`` of

* the bare loop: batches truncated on the GPU with tensor ops (no per-example Python), SDPA attention, forward,
  backward, clipping, fused AdamW — the least a step can cost;
* ICoTTrainer: the same model and flags, fused AdamW, SDPA, length-grouped batches, 4 data-loader workers.

Printed per (loop, precision): batch, steps/s, non-pad tokens/s, MFU and peak memory. MFU = achieved model FLOPs /
peak, with model FLOPs per non-pad token = 6 N + 12 L d T (N parameters without the position table, L layers, d
width, T the mean padded sequence length: the PaLM / nanoGPT estimate) and the peak ``--peak-tflops`` (default 989,
the H200's dense bf16 figure; fp32 rows are measured against the same bf16 peak). The whole run stays well under 8
minutes on one H200. ``--dry-run`` runs the same code on the CPU with a 1-layer, 16-wide model, a few steps and
batches of 4 and 8 — a check that the script works, whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_vs_reference import pad_rows, reference_ids, truncate_vectorised  # a sibling: this folder


def build(options):
    """(tokenizer, schema train split, reference-format id tensors) for ``options.train_size`` 4x4 lines."""
    import tempfile

    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    from datasets_builder.registry import build_dataset

    splits, _ = build_dataset(
        "multiplication", {"train_size": options.train_size, "validation_size": 1, "test_size": 1, "seed": 0}
    )
    train = splits["train"]
    texts = [f"{q} {' '.join(c)} #### {a}" for q, c, a in zip(train["question"], train["cot"], train["answer"])]
    with tempfile.TemporaryDirectory() as folder:
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(texts[:20_000], vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
        bpe.save_model(folder)
        eos = "<|endoftext|>"
        tokenizer = GPT2TokenizerFast(
            vocab=f"{folder}/vocab.json", merges=f"{folder}/merges.txt", eos_token=eos, bos_token=eos, unk_token=eos
        )
    rows = [torch.tensor(reference_ids(example, tokenizer.eos_token, tokenizer)) for example in train]
    return tokenizer, train, rows


def make_model(options, eos: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=options.vocab_size, n_positions=256, n_embd=options.n_embd, n_layer=options.n_layer,
        n_head=options.n_head, bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    with torch.device(options.device):  # initialised where it trains: no host-to-device copy of the weights
        return GPT2LMHeadModel(config)


def flops_per_token(model, mean_length: float) -> float:
    config = model.config
    params = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    return 6 * params + 12 * config.n_layer * config.n_embd * mean_length


def autocast(options, precision: str):
    enabled = precision == "bf16"
    return torch.autocast(device_type=options.device.type, dtype=torch.bfloat16, enabled=enabled)


def sync(options) -> None:
    if options.device.type == "cuda":
        torch.cuda.synchronize()


def reset_memory(options) -> None:
    import gc

    gc.collect()  # a failed trial's model and optimizer
    if options.device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib(options) -> float:
    if options.device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # CPU: peak RSS


def bare_loop(options, precision: str, batch_size: int, rows, eos: int, steps: int, trial: bool = False) -> dict:
    """The least a stepwise-ICoT step costs: truncation by tensor ops on the device, forward, backward, clip, step.
    ``trial``: only ``steps`` untimed steps, for the peak memory."""
    from hf_icot.curriculum import Stepwise
    from hf_icot.curriculum.removal import smoothing_offset_probabilities

    device = options.device
    model = make_model(options, eos).to(device)
    model.train()
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, **fused)
    schedule = Stepwise(remove_per_epoch=8, removal_smoothing_lambda=4.0)
    schedule.bind(max(1, len(rows) // batch_size))
    offsets = torch.tensor(smoothing_offset_probabilities(4.0), dtype=torch.float, device=device)
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(rows), generator=generator)
    table = pad_rows(rows, eos).to(device)  # (N, T): every line padded once, so a batch is one index
    reset_memory(options)
    nonpad = total = 0
    start = None
    for step in range(steps):
        if step == options.warmup and not trial:
            sync(options)
            start, nonpad, total = time.perf_counter(), 0, 0
        chosen = order[(step * batch_size) % len(rows) :][:batch_size]
        input_ids = table[chosen.to(device)]
        labels = input_ids.clone()
        first = input_ids.eq(eos).long().argmax(dim=1)
        labels[torch.arange(labels.shape[1], device=device)[None] <= first[:, None]] = -100
        if schedule.resets_optimizer_at(step):
            optimizer.state.clear()
        to_remove = schedule.scheduled(step) + torch.multinomial(offsets, len(chosen), replacement=True)
        input_ids, labels, _ = truncate_vectorised(input_ids, labels, eos, to_remove)
        with autocast(options, precision):
            logits = model(input_ids=input_ids).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1)
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        nonpad += int(input_ids.ne(eos).sum()) + 3 * input_ids.shape[0]
        total += input_ids.numel()
    sync(options)
    if trial:
        return {"peak_gib": peak_memory_gib(options)}
    seconds = time.perf_counter() - start
    return measured(options, model, steps - options.warmup, seconds, nonpad, total, batch_size)


def measured(options, model, steps: int, seconds: float, nonpad: int, total: int, batch_size: int) -> dict:
    mean_length = total / (steps * batch_size)
    tokens_per_s = nonpad / seconds
    mfu = tokens_per_s * flops_per_token(model, mean_length) / (options.peak_tflops * 1e12)
    return {
        "batch": batch_size,
        "steps_per_s": steps / seconds,
        "tokens_per_s": tokens_per_s,
        "mfu": mfu,
        "peak_gib": peak_memory_gib(options),
    }


def trainer_loop(options, precision: str, batch_size: int, prepared, tokenizer, steps: int) -> dict:
    import tempfile

    from transformers import TrainerCallback

    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    marks: dict[str, float] = {}
    counts = {"nonpad": 0, "total": 0}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == options.warmup:
                sync(options)
                marks["start"] = time.perf_counter()
                counts["nonpad"] = counts["total"] = 0

    with tempfile.TemporaryDirectory() as folder:
        args = ICoTConfig(
            output_dir=folder, schedule="stepwise", sequence_format="reference", remove_per_epoch=8,
            removal_smoothing_lambda=4.0, reset_optimizer=True, per_device_train_batch_size=batch_size,
            learning_rate=5e-5, lr_scheduler_type="constant", max_grad_norm=1.0, weight_decay=0.01,
            decay_all_parameters=True, optim="adamw_torch_fused", train_sampling_strategy="group_by_length",
            dataloader_num_workers=0 if options.dry_run else 4, dataloader_pin_memory=not options.dry_run,
            bf16=precision == "bf16", tf32=options.tf32 if options.device.type == "cuda" else None,
            max_steps=steps, dataloader_drop_last=True, logging_steps=10**6, save_strategy="no", report_to="none",
            use_cpu=options.dry_run, disable_tqdm=True, keep_stage_checkpoints=False, evaluate_each_stage=False,
            seed=0,
        )  # fmt: skip
        model = make_model(options, tokenizer.eos_token_id)
        trainer = ICoTTrainer(
            model=model, args=args, train_dataset=prepared, processing_class=tokenizer, callbacks=[Clock()]
        )
        fetch = trainer.get_batch_samples

        def counted(*fetch_args, **kwargs):
            batches, items = fetch(*fetch_args, **kwargs)
            counts["nonpad"] += sum(int(batch["attention_mask"].sum()) for batch in batches)
            counts["total"] += sum(batch["attention_mask"].numel() for batch in batches)
            return batches, items

        trainer.get_batch_samples = counted
        reset_memory(options)
        trainer.train()
        sync(options)
        seconds = time.perf_counter() - marks["start"]
        nonpad, total = counts["nonpad"], counts["total"]  # the steps after the warm-up ones
        return measured(options, model, steps - options.warmup, seconds, nonpad, total, batch_size)


def fits(options, precision: str, batch_size: int, rows, eos: int) -> bool:
    """Whether a few bare steps of ``batch_size`` run within the memory bound."""
    try:
        result = bare_loop(options, precision, batch_size, rows, eos, steps=3, trial=True)  # 3: optimizer state too
    except torch.OutOfMemoryError:
        reset_memory(options)
        return False
    if options.device.type != "cuda":
        return True
    capacity = torch.cuda.get_device_properties(options.device).total_memory / 2**30
    reset_memory(options)
    return result["peak_gib"] <= options.memory_fraction * capacity


def search_batch(options, precision: str, rows, eos: int) -> int:
    best, batch = None, options.min_batch
    while batch <= options.max_batch and batch <= len(rows) and fits(options, precision, batch, rows, eos):
        best, batch = batch, batch * 2
    if best is None:
        raise SystemExit(f"not even --min-batch {options.min_batch} fits in {precision}; lower it.")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each run (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=5, help="steps of each run before the timing starts")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the MFU denominator (H200 dense bf16)")
    parser.add_argument("--min-batch", type=int, default=32, help="first batch of the search")
    parser.add_argument("--max-batch", type=int, default=4096, help="largest batch the search tries")
    parser.add_argument("--memory-fraction", type=float, default=0.9, help="peak memory a batch may use")
    parser.add_argument("--train-size", type=int, default=100_000, help="4x4 lines built (>= the largest batch)")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16")
    parser.add_argument("--tf32", action="store_true", help="let fp32 matmuls use TF32 (off: true fp32)")
    parser.add_argument("--dry-run", action="store_true", help="CPU, 1x16 model, batches 4 and 8, a few steps")
    options = parser.parse_args()
    options.n_layer, options.n_embd, options.n_head, options.vocab_size = 12, 768, 12, 50257
    if options.dry_run:
        options.n_layer, options.n_embd, options.n_head, options.vocab_size = 1, 16, 2, 512
        options.steps, options.warmup, options.min_batch, options.max_batch = 2, 1, 4, 8
        options.train_size = min(options.train_size, 64)
    precisions = [p for p in options.precisions.split(",") if p]
    if not precisions or any(p not in ("fp32", "bf16") for p in precisions):
        parser.error(f"--precisions {options.precisions!r} is not allowed; give fp32, bf16 or both.")
    if options.steps < 1 or options.warmup < 1 or options.min_batch < 1 or options.max_batch < options.min_batch:
        parser.error("--steps and --warmup must be >= 1, and 1 <= --min-batch <= --max-batch.")
    if not options.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device is visible; run on a GPU, or use --dry-run to check the script on the CPU.")
    options.device = torch.device("cpu" if options.dry_run else "cuda")
    if options.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = options.tf32
        torch.backends.cudnn.allow_tf32 = options.tf32
    began = time.perf_counter()
    tokenizer, train, rows = build(options)
    from hf_icot.curriculum.layout import SequenceLayout
    from hf_icot.data.collator import ICoTCollator

    layout = SequenceLayout(sequence_format="reference")
    prepared, _ = ICoTCollator(tokenizer, layout).prepare_dataset(train, layout=layout)
    eos = tokenizer.eos_token_id
    device_name = torch.cuda.get_device_name(options.device) if options.device.type == "cuda" else "CPU (dry run)"
    print(
        f"{device_name}; GPT-2 {options.n_layer}x{options.n_embd}, vocab {options.vocab_size}; {len(rows)} 4x4 lines "
        f"({sum(len(r) for r in rows) / len(rows):.1f} tokens each with the full CoT); MFU against "
        f"{options.peak_tflops:g} TFLOPs (bf16 dense peak); setup {time.perf_counter() - began:.1f} s"
    )
    print(f"{'loop':12} {'precision':9} {'batch':>6} {'steps/s':>8} {'non-pad tok/s':>14} {'MFU':>7} {'peak GiB':>9}")
    total_steps = options.warmup + options.steps
    for precision in precisions:
        batch = search_batch(options, precision, rows, eos)
        results = {
            "bare loop": bare_loop(options, precision, batch, rows, eos, total_steps),
            "ICoTTrainer": trainer_loop(options, precision, batch, prepared, tokenizer, total_steps),
        }
        for loop, result in results.items():
            print(
                f"{loop:12} {precision:9} {result['batch']:6d} {result['steps_per_s']:8.2f} "
                f"{result['tokens_per_s']:14.0f} {100 * result['mfu']:6.2f}% {result['peak_gib']:9.2f}"
            )
        ratio = results["ICoTTrainer"]["tokens_per_s"] / results["bare loop"]["tokens_per_s"]
        print(f"ICoTTrainer / bare loop ({precision}): {ratio:.3f}")
    print(f"total wall time {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
