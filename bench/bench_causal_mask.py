"""Time a training step with and without the attention mask on the same right-padded ICoT batches.

Run from the repository root, with nothing else running::

    python bench/bench_causal_mask.py                        # GPT-2 4x128, 4x4 lines, batch 32, 40 steps
    python bench/bench_causal_mask.py --vocab-size 50257 --steps 10

``ICoTTrainer`` drops ``attention_mask`` where it cannot change the loss (:mod:`hf_icot.levers.causal_mask`: right
padding no label reads), so that SDPA runs its causal kernel instead of a ``(B, 1, T, T)`` mask. This script renders
batches of 4x4 multiplication lines at a removal stage with removal smoothing (λ = 4, so rows differ in length and
are right-padded), and times forward + backward of a GPT-2 (4 layers, 128 wide, SDPA) on each batch with the mask and
without it, alternating the two so a change of load touches both; it prints the seconds per step of each (median),
their ratio, and the largest loss difference between the two on the same batch (dropout off).
"""

from __future__ import annotations

import argparse
import statistics
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="Timed steps of each way (default: 40).")
    parser.add_argument("--vocab-size", type=int, default=0, help="Output rows (default: the word-level vocabulary).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1).")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.threads < 1:
        parser.error(f"--steps {args.steps} must be >= 2 and --threads {args.threads} >= 1.")
    return args


def main(argv: list[str] | None = None) -> None:
    import datasets
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from datasets_builder.tasks import multiplication
    from hf_icot.cot import TruncationSpec
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.levers.causal_mask import without_needless_mask

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    data = multiplication.build(multiplication.Params(a_digits=4, b_digits=4, train_size=32 * 32, seed=0))["train"]
    tokenizer = build_word_level_tokenizer(data)
    collator = ICoTCollator(tokenizer)
    examples = list(collator.prepare_dataset(data)[0])
    rng = np.random.default_rng(0)
    batches = []
    for start in range(0, len(examples), 32):
        # Stage 3 with λ = 4's offsets: 3 + k tokens removed, k ~ e^(-4k).
        counts = 3 + rng.geometric(1 - np.exp(-4.0), size=32) - 1
        rows = examples[start : start + 32]
        specs = [TruncationSpec("token", "left", int(count), saturate=True) for count in counts]
        batch = collator.render(rows, specs)
        if (batch["attention_mask"] == 0).any():  # a batch whose rows all kept as many tokens has no padding
            batches.append(batch)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=max(len(tokenizer), args.vocab_size), n_positions=256, n_embd=128, n_layer=4,
                        n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, bos_token_id=collator.eos_id,
                        eos_token_id=collator.eos_id)  # fmt: skip
    model = GPT2LMHeadModel(config)

    def step(batch) -> tuple[float, float]:
        start = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start, loss.item()

    timings = {"with the mask": [], "without": []}
    difference = 0.0
    for index in range(args.steps + 2):  # two warm-up steps each
        batch = batches[index % len(batches)]
        lean = without_needless_mask(model, batch)
        assert "attention_mask" not in lean
        masked_s, masked_loss = step(batch)
        lean_s, lean_loss = step(lean)
        if index >= 2:
            timings["with the mask"].append(masked_s)
            timings["without"].append(lean_s)
        difference = max(difference, abs(masked_loss - lean_loss))
    with_s, without_s = (statistics.median(timings[name]) for name in timings)
    print(
        f"GPT-2 4x128, vocabulary {config.vocab_size}, batch 32 ({len(batches)} right-padded batches in turn), "
        f"{args.steps} steps each, {args.threads} thread(s)"
    )
    print(f"{'step':10s} {'with the mask':>14s} {'without':>9s} {'ratio':>6s}  largest loss difference")
    ratio = with_s / without_s
    print(f"{'median':10s} {with_s * 1000:12.1f}ms {without_s * 1000:7.1f}ms {ratio:5.2f}x  {difference:.2e}")


if __name__ == "__main__":
    main()
