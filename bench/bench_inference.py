"""Inference speed of implicit vs explicit CoT, measured side by side in one run.

    python bench/bench_inference.py                       # tiny GPT-2, 4x4 multiplication, CPU, 1 thread
    python bench/bench_inference.py --device cuda --n-layer 12 --n-embd 768 --n-examples 1024 --batch-size 256

The model has random weights, so it cannot be trusted to close its answer where a trained one would; every row
therefore generates exactly the longest gold continuation of its mode (``stop_after_answer=False``): the CoT, the
separators and the answer in explicit mode, ``#### answer <eos>`` in implicit mode. That is the work a trained model
does, through the same batched, left-padded, KV-cached loop that :func:`hf_icot.evaluation.generation_accuracy.evaluate_generation` uses.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from datasets_builder.tasks import multiplication
from hf_icot.data.encoding import encode_prompt
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation import generate_batched
from hf_icot.evaluation.prompts import gold_continuation_length

MODES = ("implicit", "explicit")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a-digits", type=int, default=4, help="digits of the first operand")
    parser.add_argument("--b-digits", type=int, default=4, help="digits of the second operand (CoT steps)")
    parser.add_argument("--n-examples", type=int, default=128, help="test examples to generate for")
    parser.add_argument("--batch-size", type=int, default=64, help="prompts per forward pass")
    parser.add_argument("--n-layer", type=int, default=2, help="GPT-2 layers")
    parser.add_argument("--n-embd", type=int, default=64, help="GPT-2 width")
    parser.add_argument("--n-head", type=int, default=4, help="GPT-2 attention heads")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per mode (the fastest is reported)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the weights")
    args = parser.parse_args()
    for name in ("a_digits", "b_digits", "n_examples", "batch_size", "n_layer", "n_embd", "n_head", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)} is not allowed; it must be >= 1.")
    if args.n_embd % args.n_head:
        parser.error(f"--n-embd {args.n_embd} is not a multiple of --n-head {args.n_head}; GPT-2 needs it to be.")
    return args


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    params = multiplication.Params(
        a_digits=args.a_digits,
        b_digits=args.b_digits,
        train_size=1,
        validation_size=1,
        test_size=args.n_examples,
        seed=args.seed,
    )
    examples = list(multiplication.build(params)["test"])
    tokenizer = build_word_level_tokenizer(examples)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=512,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=args.n_head,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"GPT-2 {args.n_layer} layers x {args.n_embd} wide ({n_params / 1e6:.2f}M parameters) on {args.device}, "
        f"{args.a_digits}x{args.b_digits} multiplication, {len(examples)} examples, batch {args.batch_size}"
    )

    results = {}
    for mode in MODES:
        prompts = [encode_prompt(ex["question"], tokenizer, mode=mode) for ex in examples]
        length = max(gold_continuation_length(ex, tokenizer, mode) for ex in examples)
        generate_batched(model, tokenizer, prompts[: args.batch_size], length, args.batch_size, False)  # warm-up
        best = float("inf")
        for _ in range(args.repeats):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            outputs = generate_batched(model, tokenizer, prompts, length, args.batch_size, stop_after_answer=False)
            best = min(best, time.perf_counter() - start)  # .tolist() inside synchronises the device
        tokens = sum(len(ids) for ids in outputs)
        results[mode] = (length, len(examples) / best, tokens / best)

    print(f"{'mode':<10} {'new tokens/example':>18} {'examples/s':>12} {'tokens/s':>12}")
    for mode, (length, examples_per_s, tokens_per_s) in results.items():
        print(f"{mode:<10} {length:>18} {examples_per_s:>12.1f} {tokens_per_s:>12.1f}")
    ratio = results["implicit"][1] / results["explicit"][1]
    print(f"implicit / explicit examples/s: {ratio:.2f}x")
    # the speed-up if every generated token cost the same: generated tokens (CoT + answer) over answer tokens alone
    ideal = results["explicit"][0] / results["implicit"][0]
    print(f"ideal ratio (explicit / implicit new tokens per example): {ideal:.2f}x")


if __name__ == "__main__":
    main(parse_args())
