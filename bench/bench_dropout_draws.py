"""Time a training step whose dropout masks are drawn in it (by torch, or by the kernel), on a helper thread beside it,
and before it.

Run from the repository root, with nothing else running::

    python bench/bench_dropout_draws.py                  # GPT-2 4x128, dropout 0.1, 4x4 lines, batch 32, 40 steps
    OMP_WAIT_POLICY=PASSIVE python bench/bench_dropout_draws.py --threads 2     # with a helper thread
    OMP_WAIT_POLICY=ACTIVE python bench/bench_dropout_draws.py --threads 2

At the stepwise reference's small vocabulary, dropout's random draws are the largest cost of a CPU training step that
is not a matrix product (torch's CPU ``bernoulli_`` runs the Mersenne Twister serially, ~7.5 ns per element, ~5
million elements per step here). Other numbers would change the loss; the same numbers come cheaper from
``hf_icot.levers.dropout_kernel`` (a C kernel computing torch's Mersenne Twister words, checked against torch's
masks), and the lever takes them off the step's critical path. This script times four ways of the same step
(forward, backward, gradient clipping, fused AdamW; eager attention, so every draw goes through
``torch.nn.functional.dropout``; GPT-2's GELU fused as ``ICoTTrainer`` fuses it), alternating them so a change of load
touches all four:

* ``in the step`` — as torch does it;
* ``helper thread`` — the lever (``hf_icot.levers.dropout_ahead.DropoutDrawsAhead``, as ``ICoTTrainer`` runs it):
  a second thread draws the forward's masks (with the kernel where it is in use, else with torch), in its order
  from the same generator, while the step runs and consumes
  them (the first forward of each batch shape is recorded and drawn in the step); it pays only when torch's threads
  sleep between parallel regions: ``OMP_WAIT_POLICY=PASSIVE``, read when torch is imported;
* ``kernel in step`` — the lever without its helper (``DropoutDrawsAhead(helper=False)``, as ``ICoTTrainer`` runs it
  on one torch thread or with spinning OpenMP threads): the forward draws its masks itself, with the kernel;
* ``drawn before`` — the masks drawn before the clock starts: what the step would cost if its draws were free (a
  bound, not a lever).

It prints the median seconds per step of each, the ratios, the largest loss difference of the helper thread's and
the bound's steps from torch's own on the same batches and weights (0 when the masks are the same numbers), and the
nanoseconds per element of a step's masks drawn alone by torch and by the kernel (alternated).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import queue
import statistics
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="Timed steps of each way (default: 40).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1).")
    parser.add_argument("--n-layer", type=int, default=4, help="GPT-2 layers (default: 4).")
    parser.add_argument("--n-embd", type=int, default=128, help="GPT-2 width, 4 heads (default: 128).")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.threads < 1 or args.n_layer < 1 or args.n_embd < 4 or args.n_embd % 4:
        parser.error(
            f"--steps {args.steps} must be >= 2, --threads {args.threads} and --n-layer {args.n_layer} >= 1, and "
            f"--n-embd {args.n_embd} a multiple of 4 (the heads)."
        )
    return args


def main(argv: list[str] | None = None) -> None:
    import datasets
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from datasets_builder.tasks import multiplication
    from hf_icot.cot import TruncationSpec
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.levers import dropout_kernel
    from hf_icot.levers.causal_mask import without_needless_mask
    from hf_icot.levers.dropout_ahead import TORCH_DROPOUT, Draw, DropoutDrawsAhead, DropoutRoute, dropout_mask
    from hf_icot.levers.fused_gelu import fuse_tanh_gelu

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    lines = 32 * min(8, args.steps + 2)  # the batches the timed steps go through
    data = multiplication.build(multiplication.Params(a_digits=4, b_digits=4, train_size=lines, seed=0))["train"]
    tokenizer = build_word_level_tokenizer(data)
    collator = ICoTCollator(tokenizer)
    examples = list(collator.prepare_dataset(data)[0])
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=args.n_embd, n_layer=args.n_layer,
                        n_head=4,
                        bos_token_id=collator.eos_id, eos_token_id=collator.eos_id)  # fmt: skip
    config._attn_implementation = "eager"  # every draw through torch.nn.functional.dropout
    model = GPT2LMHeadModel(config)
    fuse_tanh_gelu(model)
    model.train()
    full_cot = TruncationSpec("token", "left", 0)
    # As ICoTTrainer feeds it: right padding that no label reads goes without its mask.
    batches = [
        without_needless_mask(model, collator.render(examples[start : start + 32], [full_cot] * 32))
        for start in range(0, len(examples), 32)
    ]

    drawn_before: dict[str, queue.SimpleQueue | None] = {"masks": None}

    def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's own parameter names
        masks = drawn_before["masks"]
        if masks is None or not training or p == 0:
            return TORCH_DROPOUT(input, p, training, inplace)
        return input * masks.get()  # torch's own: input * bernoulli_(1 - p).div_(1 - p)

    def draws_of(batch) -> list[Draw]:
        """The dropout calls the step draws for, in its order (one forward, no gradient, then rewound)."""
        seen = []

        def record(input, p=0.5, training=True, inplace=False):  # noqa: A002
            if training and p:
                seen.append(Draw.of(input, p, inplace))
            return input

        state = torch.get_rng_state()
        with DropoutRoute(record), torch.no_grad():  # this thread's dropout calls only, as the lever routes them
            model(**batch)
        torch.set_rng_state(state)
        return seen

    def make_step(net, aheads: dict[str, DropoutDrawsAhead]):
        optimizer = torch.optim.AdamW(net.parameters(), lr=5e-5, fused=True)

        def step(batch, way: str, draws: list[Draw]) -> tuple[float, float]:
            if way == "drawn before":
                drawn_before["masks"] = queue.SimpleQueue()
                for call in draws:
                    drawn_before["masks"].put(dropout_mask(call))
            start = time.perf_counter()
            if way in aheads:
                context = aheads[way].forward(batch)
            else:
                context = DropoutRoute(dropout) if way == "drawn before" else contextlib.nullcontext()
            with context:
                loss = net(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - start
            drawn_before["masks"] = None
            return seconds, loss.item()

        return step

    ways = ("in the step", "helper thread", "kernel in step", "drawn before")

    def levers() -> dict[str, DropoutDrawsAhead]:
        return {"helper thread": DropoutDrawsAhead(), "kernel in step": DropoutDrawsAhead(helper=False)}

    draws = [draws_of(batch) for batch in batches]
    # The same numbers: each way from the same weights and generator state, three steps on one batch (the lever
    # records the first and draws the next two ahead).
    difference = 0.0
    for way in ways[1:]:
        torch.manual_seed(1)
        reference_step = make_step(copy.deepcopy(model), {})
        other_step = make_step(copy.deepcopy(model), levers())
        for _ in range(3):
            state = torch.get_rng_state()
            _, expected = reference_step(batches[0], "in the step", draws[0])
            torch.set_rng_state(state)
            _, got = other_step(batches[0], way, draws[0])
            difference = max(difference, abs(expected - got))
    aheads = levers()
    step = make_step(model, aheads)
    timings: dict[str, list[float]] = {way: [] for way in ways}
    warm_up = len(batches)  # a step per batch each, so the lever has recorded every batch shape before the clock
    for index in range(warm_up + args.steps):
        for way in ways:
            seconds, _ = step(batches[index % len(batches)], way, draws[index % len(batches)])
            if index >= warm_up:
                timings[way].append(seconds)
    per_element = draw_speeds(draws[0], rounds=max(3, args.steps // 4))
    medians = {way: statistics.median(timings[way]) for way in ways}
    elements = sum(torch.Size(call.shape).numel() for call in draws[0])
    print(
        f"GPT-2 {args.n_layer}x{args.n_embd}, dropout 0.1, eager attention, vocabulary {config.vocab_size}, batch 32 x "
        f"{batches[0]['input_ids'].shape[1]} tokens, {elements:,} dropout draws per step, {args.steps} steps each, "
        f"{args.threads} thread(s), OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}"
    )
    print(f"{'way':14s} {'median step':>12s} {'in the step / way':>18s}")
    for way in ways:
        print(f"{way:14s} {medians[way] * 1000:10.1f}ms {medians['in the step'] / medians[way]:17.2f}x")
    print(f"largest loss difference from torch's own draws: {difference:.2e}")
    kernel = dropout_kernel.why_not() or f"{per_element['the C kernel']:.2f} ns"
    print(f"a step's masks drawn alone, per element: torch {per_element['torch']:.2f} ns, the C kernel {kernel}")
    for way, ahead in aheads.items():
        print(f"the lever's log, {way}: {ahead.summary()}")


def draw_speeds(calls, rounds: int) -> dict[str, float]:
    """Median nanoseconds per element of drawing one step's masks, by torch and by the kernel, alternated."""
    import torch

    from hf_icot.levers import dropout_kernel
    from hf_icot.levers.dropout_kernel import torch_dropout_mask

    kernel = dropout_kernel.loaded()
    elements = sum(torch.Size(call.shape).numel() for call in calls)
    ways = {"torch": lambda call: torch_dropout_mask(call.shape, call.dtype, call.p)}
    if kernel is not None:
        ways["the C kernel"] = lambda call: kernel.mask(call.shape, call.p)
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, draw in ways.items():
            start = time.perf_counter()
            for call in calls:
                draw(call)
            seconds[way].append(time.perf_counter() - start)
    return {way: statistics.median(values) * 1e9 / elements for way, values in seconds.items()}


if __name__ == "__main__":
    main()
