"""Time the collator's two ways of preparing a dataset (row by row, whole columns) and of rendering a training
batch (example by example, on the prepared ids).

Run from the repository root, with nothing else running::

    python bench/bench_collator.py                    # 30-bit 16-sparse parity, tree CoT, 20,000 rows
    python bench/bench_collator.py --rows 5000 --repeat 5

``ICoTCollator.prepare_dataset`` tokenizes whole Arrow columns where the tokenizer is word-level, and otherwise row
by row (``_tokenize_rows``); the script prepares the same rows both ways and prints the seconds of each and whether
the columns are equal. It does the same for a byte-level BPE (``GPT2TokenizerFast``, trained here on 4x4
multiplication lines, as GPT-2's own splits them) in both sequence formats, where whole columns are encoded by
looking each distinct word up once (:mod:`hf_icot.data.word_pieces`), and prints lines/s of each way (the goal:
>= 20,000 lines/s).

``ICoTCollator.render_counted`` cuts a batch on its prepared ``cot_ids`` with array operations when the specs allow
(:meth:`hf_icot.data.collator.ICoTCollator._on_ids`), and otherwise truncates and encodes example by example. This
script renders the same batch of the parity theory runs' task (``results/parity``: n = 30, k = 16, one token per
tree node) both ways, for the specs those runs use — Log-ICoT's stages (``levels``, fill ``pad``) and token by
token's (``left``, fill ``pad``) — and prints the seconds of each (the fastest of ``--repeat``), their ratio, and
whether the two tensors are equal. Every figure is the fastest of ``--repeat`` runs in this one process.
"""

from __future__ import annotations

import argparse
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, default=20_000, help="Examples prepared, and in the batch (default: 20000)."
    )
    parser.add_argument("--repeat", type=int, default=3, help="Timings per way; the fastest is kept (default: 3).")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeat < 1:
        parser.error(f"--rows {args.rows} and --repeat {args.repeat} must both be >= 1.")
    return args


def fastest(function, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> None:
    import datasets
    import torch

    from datasets_builder.tasks import parity
    from hf_icot.cot import PLACEHOLDER_TOKEN, TruncationSpec
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.data.rendering import render_on_ids
    from hf_icot.data.tokenization import build_word_level_tokenizer

    args = parse_args(argv)
    torch.set_num_threads(1)
    data = parity.build(parity.Params(n_bits=30, k=16, cot_layout="tree", train_size=args.rows, seed=0))["train"]
    collator = ICoTCollator(build_word_level_tokenizer(data, extra_tokens=[PLACEHOLDER_TOKEN]))
    datasets.disable_caching()
    datasets.disable_progress_bars()

    def by_rows():
        return data.map(collator._tokenize_rows, batched=True, with_indices=True)

    rows_s, by_row = fastest(by_rows, args.repeat)
    columns_s, prepared = fastest(lambda: collator.prepare_dataset(data)[0], args.repeat)
    same = by_row[:] == prepared.select_columns(by_row.column_names)[:]
    print(f"{args.rows:,} examples; fastest of {args.repeat}")
    print(f"{'prepare_dataset':40s} {'row by row':>19s} {'columns':>8s} {'ratio':>6s}  same columns  lines/s")
    print(f"{'parity, word-level':40s} {rows_s:18.2f}s {columns_s:7.2f}s {rows_s / columns_s:5.1f}x  {same}")
    prepare_with_bpe(args)
    examples = list(prepared)
    cases = {
        "Log-ICoT stage 2 (levels, pad)": TruncationSpec("step", "levels", 2, "pad"),
        "token by token, 5 removed (left, pad)": TruncationSpec("token", "left", 5, "pad", saturate=True),
    }
    print(
        f"\n{'render_counted, one batch of every row':40s} {'example by example':>19s} {'on ids':>8s} {'ratio':>6s}  same tensors"
    )
    for name, spec in cases.items():
        specs = [spec] * len(examples)
        assert collator._on_ids(examples, specs), name

        def by_example(specs=specs):
            truncated = collator.truncate_batch(examples, specs)
            return collator.encode_batch(examples, truncated), [cut.kept for cut in truncated]

        def on_ids(specs=specs):
            return render_on_ids(examples, specs, collator.eos_id, collator.pad_id, False, collator.placeholder_id)

        slow_s, (slow, slow_kept) = fastest(by_example, args.repeat)
        fast_s, (fast, fast_kept) = fastest(on_ids, args.repeat)
        same = slow_kept == fast_kept and all(torch.equal(slow[key], fast[key]) for key in slow)
        print(f"{name:40s} {slow_s:18.2f}s {fast_s:7.2f}s {slow_s / fast_s:5.1f}x  {same}")


def prepare_with_bpe(args: argparse.Namespace) -> None:
    """Row by row against whole columns for a byte-level BPE on ``args.rows`` 4x4 multiplication lines."""
    import tempfile

    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    from datasets_builder.tasks import multiplication
    from hf_icot.cot import render_line
    from hf_icot.curriculum.layout import SequenceLayout
    from hf_icot.data.collator import ICoTCollator

    data = multiplication.build(multiplication.Params(a_digits=4, b_digits=4, train_size=args.rows, seed=0))["train"]
    eos = "<|endoftext|>"
    with tempfile.TemporaryDirectory(prefix="bench_collator_") as folder:
        bpe = ByteLevelBPETokenizer()
        lines = [render_line(example) for example in data.select(range(min(len(data), 2000)))]
        bpe.train_from_iterator(lines, vocab_size=400, min_frequency=1, special_tokens=[eos], show_progress=False)
        bpe.save_model(folder)
        tokenizer = GPT2TokenizerFast(
            vocab=f"{folder}/vocab.json", merges=f"{folder}/merges.txt", eos_token=eos, bos_token=eos, unk_token=eos
        )
    for sequence_format in ("reference", "hf_icot"):
        layout = SequenceLayout(sequence_format=sequence_format)
        # A fresh collator per timing: the word path keeps the words it has seen.
        rows_s, by_row = fastest(
            lambda layout=layout: data.map(
                ICoTCollator(tokenizer, layout)._tokenize_rows, batched=True, with_indices=True
            ),
            args.repeat,
        )
        columns_s, prepared = fastest(
            lambda layout=layout: ICoTCollator(tokenizer, layout).prepare_dataset(data)[0], args.repeat
        )
        same = by_row[:] == prepared.select_columns(by_row.column_names)[:]
        name = f"4x4 lines, GPT-2 BPE, {sequence_format} format"
        print(
            f"{name:40s} {rows_s:18.2f}s {columns_s:7.2f}s {rows_s / columns_s:5.1f}x  {str(same):12s}  "
            f"{len(data) / rows_s:,.0f} -> {len(data) / columns_s:,.0f}"
        )


if __name__ == "__main__":
    main()
