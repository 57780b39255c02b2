"""SIM-CoT's own model classes beside hf_icot's step supervision (``hf_icot.methods.simcot``), on the same weights and
the same batches.

    git clone https://github.com/InternLM/SIM-CoT /work/simcot    # their code, outside this repository
    python -m bench.latent_vs_public.simcot --simcot /work/simcot [--steps 100]

Nothing of their code is committed or fetched here: the script imports their Coconut path (``Coconut/coconut.py``,
class ``CoconutGPT_Same_Word_Embedding``; ``Coconut/dataset.py``, ``get_cot_with_explainable_latent_dataset`` and
``MyExplainableCollator``, which build its decoder's targets) and their CODI path (``CODI/src/model.py``, class
``CODI`` with ``use_decoder``) from the checkout it is given, and changes, at run time only, what keeps them from
running with this project's packages on a CPU: Coconut's GPT-2 takes and returns its KV cache as a list of tuples
(``tuple_cache_lm`` of ``run.py``); CODI's loader is wrapped to load float32 and to drop the keywords transformers 5
no longer takes (``resume_download``, ``use_flash_attention_2``); their options come from namespaces.

The task is GSM8K-like and built here: a question of numbers to add, one CoT step ``<< a + b = c >>`` per addition (1
to 6 steps), the answer the sum; a word-level vocabulary in which ``<<`` and ``>>`` hold GPT-2's ids 16791 and 4211
(CODI's path hard-codes them to find the steps in its teacher's ids) and ``"\\n"`` is a token (Coconut's path looks
it up). The model: a 2-layer GPT-2, 64 wide, no dropout, initial weights of std 0.1; the decoder a copy of it.

* **Coconut, c = 2, max stage 3, padded**: a batch past the last stage (3 groups of 2 thoughts; rows of 1 to 3 steps,
  so groups past the steps write the answer) and one at stage 2 (2 groups; a row of 1 step), questions of different
  lengths (left padding). Their collator lays out the batch (their format: the ``"\\n"`` after each step, no ``<eos>``
  before ``####``); both sides get those tensors, and hf_icot's step targets come from its own examples. Their code
  joins the steps a last group writes with ``"\\n"`` and ours as the sequence writes them, so no row here has more
  steps than groups (the merge is compared on the CODI side, where both concatenate).
* **CODI, 3 thoughts + the state after the last, projection on**: rows of 1 to 6 steps (teachers of 0 to 5: no target,
  empty thoughts, a merged last one), questions of one length (CODI's latent passes attend to its encoder's padding;
  ours mask it). The teacher is in its layout (no ``<eos>`` after the question, where its step search stops).

For each: the loss and every parameter's gradient (the decoder's included) on one batch, then ``--steps`` AdamW steps
(lr 1e-3) on the same batches from the same weights. Writes ``simcot_summary.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.latent_vs_public.run import HERE, largest_gradient_gap, load_module, tuple_cache_lm

#: GPT-2's ids of "<<" and ">>" (SIM-CoT's CODI path hard-codes them) and the vocabulary size around them.
OPEN_ID, CLOSE_ID, VOCAB = 16791, 4211, 16800


def tokenizer_with_gpt2_marks() -> Any:
    """A word-level tokenizer (whitespace split) of numbers 0-299, ``+ = . ####``, the latent markers, ``"\\n"`` as
    an added token, and ``<<`` / ``>>`` at GPT-2's ids (the rows between are unused fillers)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from hf_icot.curriculum.layout import LATENT_TOKENS

    words = ["<pad>", "<eos>", "<unk>", *LATENT_TOKENS, "####", "+", "=", ".", *map(str, range(300))]
    vocab = {word: i for i, word in enumerate(words)}
    marks = {OPEN_ID: "<<", CLOSE_ID: ">>"}
    for i in range(len(vocab), VOCAB):
        vocab[marks.get(i, f"[unused{i}]")] = i
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.add_tokens([AddedToken("\n", normalized=False)])
    return tokenizer


def task_examples(tokenizer: Any, n: int, steps: range, fixed_length: bool, seed: int) -> list[dict]:
    """``n`` prepared examples (``ICoTCollator.prepare_dataset``) with a number of CoT steps drawn from ``steps``."""
    import datasets

    from hf_icot.cot import example_features
    from hf_icot.data.collator import ICoTCollator

    rng, rows = random.Random(seed), []
    for _ in range(n):
        numbers = [rng.randrange(20) for _ in range(rng.choice(steps) + 1)]
        question = " + ".join(map(str, numbers)) + (
            " ." * (2 * (max(steps) + 1 - len(numbers))) if fixed_length else ""
        )
        cot, total = [], numbers[0]
        for number in numbers[1:]:
            cot.append(f"<< {total} + {number} = {total + number} >>")
            total += number
        rows.append({"question": question, "cot": cot, "answer": str(total)})
    prepared, _ = ICoTCollator(tokenizer).prepare_dataset(
        datasets.Dataset.from_list(rows, features=example_features())
    )
    return [prepared[i] for i in range(n)]


def tiny_gpt2(seed: int = 0) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=VOCAB + 1, n_positions=128, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, initializer_range=0.1,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def compare(theirs, ours, their_loss, our_loss, pairs) -> dict:
    their_loss.backward()
    our_loss.backward()
    return {
        "their_loss": their_loss.item(),
        "our_loss": our_loss.item(),
        "loss_gap": abs(their_loss.item() - our_loss.item()),
        "gradient_gap": largest_gradient_gap(theirs, ours, pairs),
    }


def train_side_by_side(step_fns: dict, models: dict, steps: int) -> dict:
    """``steps`` AdamW steps (lr 1e-3) on each side: ``step_fns[side](i)`` is the loss of step ``i``."""
    import torch

    optimizers = {side: torch.optim.AdamW(models[side].parameters(), lr=1e-3, weight_decay=0.0) for side in models}
    curves, seconds = {side: [] for side in models}, dict.fromkeys(models, 0.0)
    for i in range(steps):
        for side, optimizer in optimizers.items():
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = step_fns[side](i)
            loss.backward()
            optimizer.step()
            seconds[side] += time.perf_counter() - start
            curves[side].append(loss.item())
    gap = max(abs(a - b) for a, b in zip(curves["theirs"], curves["ours"]))
    return {"final": {side: curve[-1] for side, curve in curves.items()}, "largest_gap": gap, "seconds": seconds}


# -- Coconut ---------------------------------------------------------------------------------------------------------


def coconut_side(repo: Path, tokenizer: Any, steps: int) -> dict:
    import datasets
    import torch

    from hf_icot.curriculum import Coconut, LatentPlan
    from hf_icot.methods.coconut import CoconutConfig, CoconutMethod, coconut_loss
    from hf_icot.methods.simcot import attach_decoder, build_decoder

    sys.path.insert(0, str(repo / "Coconut"))  # their checkout: coconut.py and dataset.py import their neighbours
    model_module = load_module(repo / "Coconut" / "coconut.py", "their_simcot_coconut")
    data_module = load_module(repo / "Coconut" / "dataset.py", "their_simcot_dataset")
    method = CoconutMethod(
        Coconut(c_thought=2, max_latent_stage=3, pad_latent_to_max=True), CoconutConfig(simcot=True)
    )
    method.renderer = renderer = method.make_renderer(tokenizer)
    ids, newline = renderer.tokens, tokenizer.convert_tokens_to_ids("\n")
    configs = SimpleNamespace(
        training_method="full", explain_mode="v1_aug", max_latent_stage=3, c_thought=2, w_prompt=False,
        uniform_prob=0.0, pad_latent_to_max=True, no_cot=False,
    )  # fmt: skip

    def batches(examples, stage):
        """Their batch (their dataset function and collator, their layout) and ours on top of its tensors."""
        rows = {
            "question_tokenized": [list(e["question_ids"]) + [renderer.eos] for e in examples],
            "steps_tokenized": [[ids_ + [newline] for ids_ in steps_of(e)] for e in examples],
            "answer_tokenized": [list(e["answer_ids"]) + [renderer.eos] for e in examples],
            "idx": list(range(len(examples))),
        }
        dataset = data_module.get_cot_with_explainable_latent_dataset(
            stage, datasets.Dataset.from_dict(rows), configs, ids.start, ids.latent, ids.end
        )
        collator = data_module.MyExplainableCollator(tokenizer, latent_id=ids.latent, label_pad_token_id=-100)
        theirs = collator([dict(dataset[i]) for i in range(len(examples))])
        theirs.pop("idx", None)
        plans = [LatentPlan(ALL, 6) if stage > 3 else LatentPlan(stage, 2 * stage)] * len(examples)  # c = 2, padded
        supervised = [method.supervised_steps(e, p) for e, p in zip(examples, plans)]
        ours = {key: theirs[key] for key in ("input_ids", "attention_mask", "position_ids", "labels")}
        ours.update(method.supervision.batch(examples, [p.n_latent for p in plans], supervised, ours["input_ids"]))
        return theirs, ours

    def their_model(lm, decoder):
        return model_module.CoconutGPT_Same_Word_Embedding(
            tuple_cache_lm(lm), decoder, tokenizer, ids.latent, ids.start, ids.end, renderer.eos, OPEN_ID, 2, configs
        )

    base = tiny_gpt2()
    decoder = build_decoder(base)
    with torch.no_grad():  # a decoder apart from the model, so that a mix-up of the two shows
        for parameter in decoder.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))

    def sides():
        ours = copy.deepcopy(base)
        attach_decoder(ours, copy.deepcopy(decoder))
        return their_model(copy.deepcopy(base), copy.deepcopy(decoder)), ours

    pairs = (("base_causallm.lm.", ""), ("expainable_llm.", "simcot_decoder."))
    checks = {}
    method.supervision = _supervision(method, tokenizer)
    for name, stage, count, lengths in (("past the last stage", 4, 8, range(1, 4)), ("stage 2", 2, 8, range(1, 5))):
        examples = task_examples(tokenizer, count, lengths, fixed_length=False, seed=stage)
        theirs_batch, ours_batch = batches(examples, stage)
        theirs, ours = sides()
        their_loss = theirs(**theirs_batch).loss
        our_out = coconut_loss(ours, latent_id=ids.latent, supervision=method.supervision, **ours_batch)
        checks[name] = {
            **compare(theirs, ours, their_loss, our_out.loss, pairs),
            "our_step_ce": our_out.step_ce.item(),
        }
    # Training past the last stage, the same batches on each side.
    pool = [batches(task_examples(tokenizer, 16, range(1, 4), False, seed=100 + i), 4) for i in range(10)]
    theirs, ours = sides()
    run = train_side_by_side(
        {"theirs": lambda i: theirs(**pool[i % len(pool)][0]).loss,
         "ours": lambda i: coconut_loss(ours, latent_id=ids.latent, supervision=method.supervision,
                                        **pool[i % len(pool)][1]).loss},
        {"theirs": theirs, "ours": ours}, steps,
    )  # fmt: skip
    return {"check": checks, "training": run}


ALL = 10**9


def steps_of(example: dict) -> list[list[int]]:
    from hf_icot.methods.latent_batches import step_token_counts

    cot, out, at = list(example["cot_ids"]), [], 0
    for count in step_token_counts(example):
        out.append(cot[at : at + count])
        at += count
    return out


def _supervision(method, tokenizer):
    from hf_icot.methods.simcot import StepSupervision

    return StepSupervision(method.renderer, tokenizer, method.step_rule())


# -- CODI ------------------------------------------------------------------------------------------------------------


def codi_side(repo: Path, tokenizer: Any, steps: int, work: Path) -> dict:
    import torch

    from hf_icot.curriculum import CODI as CODISchedule
    from hf_icot.methods.codi import CODIConfig, CODIMethod, codi_loss
    from hf_icot.methods.latent_forward import LatentProjection, attach_projection
    from hf_icot.methods.simcot import attach_decoder

    sys.path.insert(0, str(repo / "CODI" / "src"))
    module = load_module(repo / "CODI" / "src" / "model.py", "their_simcot_codi")
    loader = module.AutoModelForCausalLM.from_pretrained

    class Float32Loader:  # float32 for the comparison; keywords transformers 5 no longer takes
        @staticmethod
        def from_pretrained(*args, **kwargs):
            kwargs["torch_dtype"] = torch.float32
            kwargs.pop("resume_download", None)
            kwargs.pop("use_flash_attention_2", None)
            return loader(*args, **kwargs)

    module.AutoModelForCausalLM = Float32Loader
    folder = work / "gpt2-tiny"  # its name says gpt2: CODI picks GPT-2's embeddings and step ids by the model's name
    tiny_gpt2().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    n = 3
    method = CODIMethod(CODISchedule(num_latent=n), CODIConfig(use_prj=True, prj_dim=64, simcot=True))
    method.renderer = renderer = method.make_renderer(tokenizer)
    model_args = SimpleNamespace(model_name_or_path=str(folder), full_precision=True, train=True, token=None,
                                 use_decoder=True, decoder_path=None)  # fmt: skip
    training_args = SimpleNamespace(
        bf16=False, num_latent=n, use_lora=False, use_prj=True, prj_dim=64, prj_dropout=0.0, prj_no_ln=False,
        print_loss=False, ref_loss_factor=1.0, distill_loss_div_std=False, distill_loss_type="smooth_l1",
        distill_loss_factor=1.0, fix_attn_mask=False, restore_from="", print_ref_model_stats=False,
        explain_loss_factor=1.0,
    )  # fmt: skip

    def build():
        torch.manual_seed(1)
        theirs = module.CODI(model_args, training_args, lora_config=None)
        with torch.no_grad():  # a decoder apart from the student, so that a mix-up of the two shows
            for parameter in theirs.decoder.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
        ours = copy.deepcopy(theirs.codi)
        projection = LatentProjection(64, 64, 0.0, layer_norm=True)
        projection.load_state_dict(theirs.prj.state_dict())
        attach_projection(ours, projection)
        attach_decoder(ours, copy.deepcopy(theirs.decoder))
        method.supervision = _supervision(method, tokenizer)
        return theirs, ours

    def batches(examples):
        ours = method.render(examples, 0, True, collator=None)[0]
        # The teacher in CODI's layout (question, CoT without its last step, answer, <eos>: no <eos> after the
        # question, where its step search would stop), for both sides.
        rows = [[*e["question_ids"], *sum(steps_of(e)[: e["n_cot_steps"] - 1], []), *e["answer_ids"], renderer.eos]
                for e in examples]  # fmt: skip
        width = max(map(len, rows))
        teacher = {
            "input_ids": torch.full((len(rows), width), renderer.pad),
            "attention_mask": torch.zeros((len(rows), width), dtype=torch.long),
            "labels": torch.full((len(rows), width), -100),
        }
        for i, (row, example) in enumerate(zip(rows, examples)):
            teacher["input_ids"][i, : len(row)] = torch.tensor(row)
            teacher["attention_mask"][i, : len(row)] = 1
            first = len(example["question_ids"])
            teacher["labels"][i, first : len(row)] = torch.tensor(row[first:])
        # Where CODI distils: the last token of '####', before the answer (its answer ids: '####', the number).
        teacher["answer_positions"] = torch.tensor([len(row) - 3 for row in rows])
        ours.update({f"teacher_{key}": value for key, value in teacher.items()})
        ids = ours["input_ids"]
        start_at = int((ids[0] == renderer.tokens.start).nonzero()[0])
        end_at = start_at + 1 + n
        theirs = {
            "encoder_input_ids": ids[:, : start_at + 1],
            "encoder_attention_mask": torch.ones_like(ids[:, : start_at + 1]),
            "decoder_input_ids": ids[:, end_at:],
            "labels": ids[:, end_at:],
            "model_answer_position": ours["answer_positions"] - end_at + 1,
            "ref_input_ids": teacher["input_ids"],
            "ref_attention_mask": teacher["attention_mask"],
            "ref_labels": teacher["labels"],
            "ref_answer_position": teacher["answer_positions"] + 1,
        }
        return theirs, ours

    def longest_first(examples):
        """The row with the most steps first: CODI's code cuts every row's target at a thought to the first row's
        length (plus one), as its dedup_trailing_pads runs inside its loop over the rows; with the longest first (and
        every single step of this task equally long) it cuts nothing."""
        return sorted(examples, key=lambda e: -e["n_cot_steps"])

    pairs = (("codi.", ""), ("prj.", "latent_projection."), ("decoder.", "simcot_decoder."))
    checks = {}
    drawn = task_examples(tokenizer, 12, range(1, 7), fixed_length=True, seed=7)
    for name, examples in (("longest row first", longest_first(drawn)), ("as drawn (their cut applies)", drawn)):
        theirs, ours = build()
        their_batch, our_batch = batches(examples)
        their_out = theirs(**their_batch)
        our_out = codi_loss(ours, latent_id=renderer.tokens.latent, config=method.config,
                            supervision=method.supervision, **our_batch)  # fmt: skip
        check = compare(theirs, ours, their_out["loss"], our_out.loss, pairs)
        check["their_step_ce"], check["our_step_ce"] = float(their_out["explain_loss"]), our_out.step_ce.item()
        checks[name] = {**check, "step_gap": abs(check["their_step_ce"] - check["our_step_ce"])}
    pool = [batches(longest_first(task_examples(tokenizer, 16, range(1, 7), True, seed=200 + i))) for i in range(10)]
    theirs, ours = build()
    run = train_side_by_side(
        {"theirs": lambda i: theirs(**pool[i % len(pool)][0])["loss"],
         "ours": lambda i: codi_loss(ours, latent_id=renderer.tokens.latent, config=method.config,
                                     supervision=method.supervision, **pool[i % len(pool)][1]).loss},
        {"theirs": theirs, "ours": ours}, steps,
    )  # fmt: skip
    return {"check": checks, "training": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simcot", type=Path, required=True, help="a checkout of InternLM/SIM-CoT")
    parser.add_argument("--steps", type=int, default=100, help="AdamW steps of each side's training run")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for needed in ("Coconut/coconut.py", "Coconut/dataset.py", "CODI/src/model.py"):
        if not (args.simcot / needed).is_file():
            sys.exit(f"error: --simcot {str(args.simcot)!r} has no {needed}; give a checkout of InternLM/SIM-CoT.")
    import torch

    torch.set_num_threads(1)
    tokenizer = tokenizer_with_gpt2_marks()
    summary = {
        "coconut": coconut_side(args.simcot, tokenizer, args.steps),
        "codi": codi_side(args.simcot, tokenizer, args.steps, Path(tempfile.mkdtemp())),
    }
    print(json.dumps(summary, indent=2))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simcot_summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
