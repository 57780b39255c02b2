"""Time a training step and an answer of PCCoT (Jacobi thoughts) beside Coconut and CODI at equal numbers of thoughts.

Run from the repository root, with nothing else running::

    python bench/bench_latent_cost.py                     # 2, 4, 6, 12, 24 thoughts; 3 iterations; GPT-2 4x128
    python bench/bench_latent_cost.py --thoughts 6,24 --iterations 3 --steps 5 --batch-size 32
    python bench/bench_latent_cost.py --device cuda --n-layer 12 --n-embd 768 --batch-size 128   # GPT-2 small's shape

PCCoT's claim is speed: its ``n`` thoughts cost ``iterations + 1`` decoder passes (the prompt's, then one per Jacobi
iteration over all of them) where Coconut's and CODI's cost ``n`` (one per thought, on the KV cache). On the
quickstart's parity questions (20 tokens) and a GPT-2 from its config (4 layers, 128 wide, no dropout), for each
number of thoughts this script times, on the same batches:

* a **training step** (loss, backward, AdamW step) of Coconut at its last stage (every CoT step as ``n`` thoughts;
  its loss is the student's cross entropy), of CODI (``num_latent`` = ``n``: its teacher, its student, the
  distillation) and of PCCoT (``num_latent_tokens`` = ``n``: CODI's three terms, the thoughts by Jacobi iteration);
* a **generated answer**: the latent passes, then greedy decoding of 4 tokens (``<eos> #### answer <eos>``, forced by
  an end token no row writes) from the KV cache, by :func:`hf_icot.methods.generation.generate_latent`, one pass per
  thought (Coconut's and CODI's generation are the same) or with ``iterations``; seconds per answer at batch 1 and at
  ``--batch-size``.

The methods alternate within each repeat so a change of load touches all of them; each figure is the median over
``--steps`` timed steps (after one warm-up) or ``--repeats`` generations. Ratios above 1 mean PCCoT is faster.

Where the time goes differs by device: with the KV cache, one pass per thought processes each thought's position
once, while PCCoT processes all of them once per iteration and once in the prompt's pass (``iterations + 1`` times
the arithmetic on those positions) in fewer, wider passes. Where a pass costs its arithmetic (a CPU thread at a
batch of questions), fewer passes do not pay for that; where a narrow pass costs mostly its fixed overhead (one
question at a time, a GPU's kernel launches) they do.
"""

from __future__ import annotations

import argparse
import statistics
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thoughts", default="2,4,6,12,24", help="Numbers of thoughts, comma-separated.")
    parser.add_argument("--iterations", type=int, default=3, help="PCCoT's Jacobi iterations (default: 3).")
    parser.add_argument("--steps", type=int, default=5, help="Timed training steps per method (default: 5).")
    parser.add_argument("--repeats", type=int, default=5, help="Timed generations per method (default: 5).")
    parser.add_argument("--batch-size", type=int, default=32, help="Questions per batch (default: 32).")
    parser.add_argument("--n-layer", type=int, default=4, help="GPT-2 layers (default: 4).")
    parser.add_argument("--n-embd", type=int, default=128, help="GPT-2 width (default: 128).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1).")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu; e.g. cuda).")
    args = parser.parse_args(argv)
    try:
        args.thoughts = [int(n) for n in args.thoughts.split(",")]
    except ValueError:
        parser.error(f"--thoughts {args.thoughts!r} must be integers separated by commas, e.g. 2,4,6.")
    if min(args.thoughts) < 1 or args.iterations < 0 or min(args.steps, args.repeats, args.batch_size) < 1:
        parser.error("--thoughts must be >= 1, --iterations >= 0, --steps, --repeats and --batch-size >= 1.")
    return args


def main(argv: list[str] | None = None) -> None:
    import datasets
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from datasets_builder import build_dataset
    from hf_icot.curriculum import CODI, LatentPlan, PCCoT
    from hf_icot.curriculum.layout import LATENT_TOKENS
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.methods.coconut import coconut_loss
    from hf_icot.methods.codi import CODIConfig, CODIMethod, codi_loss
    from hf_icot.methods.generation import generate_latent
    from hf_icot.methods.latent_batches import LatentRenderer
    from hf_icot.methods.pccot import PCCoTConfig, PCCoTMethod, pccot_loss

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    def clock() -> float:  # a GPU's queued work counts where it is done
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    datasets.disable_progress_bars()
    size = 4 * args.batch_size
    task = {"n_bits": 20, "k": 4, "cot_layout": "chain", "train_size": size, "validation_size": 8, "test_size": 8}
    dataset, _ = build_dataset("parity", {**task, "seed": 0})
    tokenizer = build_word_level_tokenizer(dataset, extra_tokens=LATENT_TOKENS)
    examples = list(ICoTCollator(tokenizer).prepare_dataset(dataset["train"])[0])
    groups = [examples[i : i + args.batch_size] for i in range(0, size, args.batch_size)]
    renderer = LatentRenderer(tokenizer)
    latent = renderer.tokens.latent
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64 + max(args.thoughts), n_embd=args.n_embd,
                        n_layer=args.n_layer, n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                        bos_token_id=renderer.eos, eos_token_id=renderer.eos)  # fmt: skip
    initial = GPT2LMHeadModel(config).state_dict()

    print(f"GPT-2 {args.n_layer}x{args.n_embd}, batch {args.batch_size}, {device}, {args.threads} thread(s), PCCoT "
          f"{args.iterations} iterations; seconds are medians")  # fmt: skip
    header = ("thoughts", "passes seq / PCCoT", "Coconut s/step", "CODI s/step", "PCCoT s/step", "Coconut/PCCoT",
              "CODI/PCCoT", "seq s/answer b1", "PCCoT s/answer b1", "ratio b1", f"seq s/answer b{args.batch_size}",
              f"PCCoT s/answer b{args.batch_size}", f"ratio b{args.batch_size}")  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    codi_config, pccot_config, k = CODIConfig(), PCCoTConfig(), args.iterations  # their defaults
    losses = {
        "Coconut": lambda lm, batch: coconut_loss(lm, latent_id=latent, **batch),
        "CODI": lambda lm, batch: codi_loss(lm, latent_id=latent, config=codi_config, **batch),
        "PCCoT": lambda lm, batch: pccot_loss(lm, latent_id=latent, iterations=k, config=pccot_config, **batch),
    }
    for n in args.thoughts:
        codi = CODIMethod(CODI(num_latent=n), codi_config)
        pccot = PCCoTMethod(PCCoT(num_latent_tokens=n, num_iterations=k), pccot_config)
        codi.renderer = pccot.renderer = renderer
        # Coconut's last stage renders as CODI's plan does (every step gone, n slots); CODI's and PCCoT's batches
        # carry the teacher half.
        batches = {
            "Coconut": [renderer.render(g, [LatentPlan(10**9, n)] * len(g))[0] for g in groups],
            "CODI": [codi.render(g, 0, True, None)[0] for g in groups],
            "PCCoT": [pccot.render(g, 0, True, None)[0] for g in groups],
        }
        batches = {name: [{k: v.to(device) for k, v in b.items()} for b in rows] for name, rows in batches.items()}
        models = {name: GPT2LMHeadModel(config) for name in losses}
        optimizers = {}
        for name, model in models.items():
            model.load_state_dict(initial)
            model.to(device)
            optimizers[name] = torch.optim.AdamW(model.parameters(), lr=1e-4)
        seconds = {name: [] for name in losses}
        for step in range(args.steps + 1):  # one warm-up step each
            for name, loss_of in losses.items():
                batch = batches[name][step % len(groups)]
                start = clock()
                optimizers[name].zero_grad(set_to_none=True)
                loss_of(models[name], batch).loss.backward()
                optimizers[name].step()
                if step:
                    seconds[name].append(clock() - start)
        step_s = {name: statistics.median(values) for name, values in seconds.items()}

        answer_s = {}
        for batch_size in (1, args.batch_size):
            prompts = renderer.prompts(groups[0][:batch_size], [LatentPlan(10**9, n)] * batch_size)
            timings = {"seq": [], "PCCoT": []}
            for _ in range(args.repeats):
                for way, iterations in (("seq", None), ("PCCoT", args.iterations)):
                    start = clock()
                    out = generate_latent(models["Coconut"], prompts, latent, -1, renderer.pad, 4, batch_size,
                                          iterations=iterations)  # fmt: skip
                    timings[way].append((clock() - start) / batch_size)
                    assert all(len(row) == 4 for row in out)
            answer_s[batch_size] = {way: statistics.median(values) for way, values in timings.items()}
        b1, bb = answer_s[1], answer_s[args.batch_size]
        row = (
            str(n), f"{n} / {args.iterations + 1}", f"{step_s['Coconut']:.4f}", f"{step_s['CODI']:.4f}",
            f"{step_s['PCCoT']:.4f}", f"{step_s['Coconut'] / step_s['PCCoT']:.2f}x",
            f"{step_s['CODI'] / step_s['PCCoT']:.2f}x", f"{b1['seq']:.5f}", f"{b1['PCCoT']:.5f}",
            f"{b1['seq'] / b1['PCCoT']:.2f}x", f"{bb['seq']:.5f}", f"{bb['PCCoT']:.5f}",
            f"{bb['seq'] / bb['PCCoT']:.2f}x",
        )  # fmt: skip
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
