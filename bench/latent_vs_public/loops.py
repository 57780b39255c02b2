"""Coconut's and CODI's own training loops beside hf_icot's recipe, step by step, on a model of GPT-2 small's shape.

    python bench/latent_vs_public/loops.py --coconut /tmp/coconut --codi /tmp/codi            # every published setting
    python bench/latent_vs_public/loops.py --coconut /tmp/coconut --codi /tmp/codi --cost     # seconds and memory

For each published setting (``recipes/configs/coconut_{gsm8k,prosqa,prontoqa}.yaml``,
``codi_gsm8k_aug_{gpt2,llama1b}.yaml``) the first steps of training run twice from the same initial weights on the
same rows, and the loss of every optimizer step is compared:

* **Theirs, Coconut**: the sequence of its ``run.py`` training loop, from the checkout's ``args/*.yaml`` (stage =
  epoch // epochs_per_stage from its ``resume``; ``get_cot_latent_dataset`` every epoch; a ``DataLoader`` with its
  ``MyCollator``; torch's AdamW rebuilt every epoch under ``reset_optimizer``; the loss divided by the accumulation
  steps; a step every ``gradient_accumulation_steps`` batches or at the epoch's last), driving its ``dataset.py``, its
  ``Coconut`` class and torch's AdamW. Left out: FSDP and the process group (one process; GPT-2 is not sharded by its
  wrapping policy), wandb, checkpoints, the GSM8K CoT checkpoint it loads (both sides start from the same folder) and
  the evaluation after each epoch (no training state changes there).
* **Theirs, CODI**: its ``train.py``'s ``train()`` itself (its ``HfArgumentParser``, ``CODI`` model class,
  ``SupervisedDataset``, collator and ``CustomTrainer``) with the arguments of its ``scripts/train_*_gsm8k-aug.sh``.
* **Ours**: the recipe's steps (``recipes/icot_gpt2.py``: :class:`~hf_icot.command_line.recipe.RecipeRun`, the config's
  schedule, ``latent_json`` data, :func:`~hf_icot.modeling.loading.load_model_for_run`,
  :class:`~hf_icot.training.trainer.ICoTTrainer`) with the setting's YAML, the final evaluation and saving left out.

Both sides get the same overrides: the steps, the batch (``--batch-size`` rows per device, the setting's accumulation
steps), the model folder and the rows; the learning rate, schedule, weight decay, clipping and seed are each setting's
own. Changed at run time only (nothing of their code is committed):

* The data order is fixed on both sides for Coconut: its per-epoch ``Dataset.shuffle()`` is left out and its
  ``DistributedSampler`` is a ``SequentialSampler``, as ours (a ``SequentialSampler`` in a bench subclass of
  ``ICoTTrainer``); CODI and ours both keep the Trainer's ``RandomSampler`` seeded from ``--seed``, and the questions
  of every step are compared.
* The random draws inside a step (dropout) are made from the same state on both sides: before each micro-batch's
  forward both reseed torch (``--seed`` × 1000 + the micro-batch's index).
* CODI's ``train.py`` gets the rows as ``load_dataset``'s answer; its three arguments that transformers 5 removed are
  translated (``--warmup_ratio 0.03`` → ``--warmup_steps 0.03``, its meaning there) or dropped (``--logging_dir``,
  ``--save_safetensors``: no files are written); ``--report_to none``; its ``save_model`` / ``save_state`` do nothing.
  Its model loads in float32 where the variant is float32 (its code loads float16 without ``--bf16``), and its LoRA
  dropout (0.1, fixed in ``train.py``) is 0 in the variants without dropout.
* Coconut's GPT-2 takes and returns its KV cache as ``(k, v)`` tuples (``run.py``'s :func:`tuple_cache_lm`).

Model: GPT-2 small's shape (12 layers, 768 wide, 12 heads, 1,024 positions) from random weights; its vocabulary a
byte-level BPE trained on the rows, filled to GPT-2's 50,257 entries with tokens no text produces (so the output layer
has GPT-2's size). CODI's Llama setting: Llama-3.2-1B's width (2,048, MLP 8,192, 32 heads, 8 KV heads) at
``--llama-layers`` layers (16 in Llama-3.2-1B) over the same tokenizer. Coconut's markers are in the tokenizer and
the model before either side starts (both copy ``<<``'s rows into them); CODI's ``[PAD]`` is the tokenizer's first
added token, and our ``<|start-latent|>`` / ``<|end-latent|>`` come right after it, where CODI puts ``bot`` and ``eot``
(its ``<|latent|>`` slot is a token of the base vocabulary). CODI's initial weights (the resized rows, LoRA, the
projection), drawn inside its ``CODI`` class, are copied into our model before training.

Variants (:data:`VARIANTS`): ``exact`` (no dropout, float32); for Coconut ``float64`` (``exact`` with the weights,
and so the whole computation and AdamW, in float64: both sides load the folder as saved; our ``--dtype`` takes no
float64, so CODI's configs, which name a dtype, cannot run it); ``dropout`` (GPT-2's dropout 0.1, and CODI's LoRA
dropout 0.1, float32); for CODI ``bf16`` (no dropout; its bfloat16 weights under ``--bf16`` autocast, ours ``dtype
bfloat16`` and ``--bf16``, ``--use_cpu`` on a machine without a GPU) and ``padded`` (``exact`` on questions of
different lengths: CODI attends to its left padding and counts positions from the first column, ours masks it and
counts from each row's first token); ``published`` (each setting's own: Coconut ``dropout``, CODI dropout and
bfloat16) is what ``device_slices.py`` runs. The CODI rows of the other variants have questions of one length in
tokens (its left padding is the one place where its batches and ours are meant to differ); their CoTs and answers
differ in length, so its decoder and teacher are right-padded. Printed: per setting and variant, the largest gap
between the two losses over the steps, and whether every step's batch was the same on both sides. ``--cost`` measures
seconds per step and peak memory of each side, each in a fresh process.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import logging
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's root on the path, as for `python -m`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.latent_vs_public.data import one_process_map  # noqa: E402
from bench.latent_vs_public.run import load_module, tuple_cache_lm  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "recipes" / "configs"
GPT2_VOCABULARY = 50257
#: Model shapes: GPT-2 small; Llama-3.2-1B's width (its depth given apart); a tiny GPT-2 for dry runs.
GPT2_SMALL = {"n_embd": 768, "n_layer": 12, "n_head": 12}
TINY_GPT2 = {"n_embd": 64, "n_layer": 2, "n_head": 4}
LLAMA_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8}
TINY_LLAMA = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2}  # fmt: skip


@dataclass
class Setting:
    """A published setting: our config, their arguments (Coconut: ``args/*.yaml``; CODI: ``scripts/*.sh``), the rows
    it trains on and how many first steps are compared."""

    name: str
    method: str
    config: str
    theirs: str
    rows: str
    steps: int
    variants: tuple[str, ...]


SETTINGS = {
    "coconut_gsm8k": Setting("Coconut GSM8K", "coconut", "coconut_gsm8k.yaml", "args/gsm_coconut.yaml", "gsm", 8,
                             ("exact", "float64", "dropout")),
    "coconut_prosqa": Setting("Coconut ProsQA", "coconut", "coconut_prosqa.yaml", "args/prosqa_coconut.yaml",
                              "prosqa", 12, ("exact", "float64", "dropout")),
    "coconut_prontoqa": Setting("Coconut ProntoQA", "coconut", "coconut_prontoqa.yaml", "args/prontoqa_coconut.yaml",
                                "prontoqa", 12, ("exact", "float64", "dropout")),
    "codi_gsm8k_aug_gpt2": Setting("CODI GSM8k-Aug, GPT-2", "codi", "codi_gsm8k_aug_gpt2.yaml",
                                   "scripts/train_gpt2_gsm8k-aug.sh", "codi", 6, ("exact", "padded", "dropout", "bf16")),
    "codi_gsm8k_aug_llama1b": Setting("CODI GSM8k-Aug, Llama-3.2-1B width", "codi", "codi_gsm8k_aug_llama1b.yaml",
                                      "scripts/train_llama1b_gsm8k-aug.sh", "codi", 6, ("exact", "dropout", "bf16")),
    "codi_gsm8k_aug_nl_gpt2": Setting("CODI GSM8k-Aug-NL, GPT-2", "codi", "codi_gsm8k_aug_nl_gpt2.yaml",
                                      "scripts/train_gpt2_gsm8k-aug-nl.sh", "codi_nl", 6, ("exact",)),
}  # fmt: skip


#: What each variant is: (dropout: GPT-2's 0.1 and CODI's LoRA 0.1, else none; bfloat16 weights and autocast).
VARIANTS = {
    "exact": (False, False),
    "float64": (False, False),
    "padded": (False, False),
    "dropout": (True, False),
    "bf16": (False, True),
    "published": (True, True),
}


def has_dropout(variant: str) -> bool:
    return VARIANTS[variant][0]


def in_bf16(variant: str, method: str = "codi") -> bool:
    """bfloat16 for CODI's variants that say so (Coconut's published runs are float32)."""
    return VARIANTS[variant][1] and method == "codi"


# -- rows ------------------------------------------------------------------------------------------------------------

NAMES = ["Tom", "Ann", "Sam", "Mia", "Lee", "Ava", "Max", "Zoe"]
THINGS = ["pens", "apples", "books", "coins", "cards", "shells"]


def arithmetic_rows(n: int, seed: int) -> list[dict]:
    """``n`` GSM8K-like rows of 1-4 ``<<a op b=c>>`` steps, questions of different lengths (GSM8K's double spaces
    included), answers that start with a digit (CODI drops the others): each a dict of ``question``, ``steps``
    (Coconut's list) and ``cot`` (GSM8K-Aug's one string)."""
    draw = random.Random(seed)
    rows = []
    for i in range(n):
        name, thing = draw.choice(NAMES), draw.choice(THINGS)
        value = draw.randint(2, 12) * draw.randint(2, 9)
        question, steps = f"{name} has {value} {thing}.", []
        for _ in range(1 + i % 4):
            amount = draw.randint(2, 9)
            if draw.random() < 0.5:
                question += f"  Then {name} gets {amount} times as many." if value < 200 else f" {name} buys {amount}."
                new = value * amount if value < 200 else value + amount
                steps.append(f"<<{value}{'*' if value < 200 else '+'}{amount}={new}>>")
            else:
                question += f" {name} gives away {amount} {thing}."
                new = value - amount
                steps.append(f"<<{value}-{amount}={new}>>")
            value = new
        question += f" How many {thing} does {name} have{' now' * (i % 3)}?"
        rows.append({"question": question, "steps": steps, "cot": " ".join(steps), "answer": str(abs(value))})
    return rows


def prontoqa_rows(n: int, seed: int) -> list[dict]:
    """``n`` ProntoQA-like rows (Coconut's JSON shape): a chain of 3-6 "Every A is a B." rules and a fact, the question
    whether an entity is of the chain's last class; steps one hop each (4-7)."""
    draw = random.Random(seed)
    classes = ["wumpus", "yumpus", "zumpus", "dumpus", "rompus", "numpus", "tumpus", "vumpus", "impus", "jompus"]
    rows = []
    for i in range(n):
        chain = draw.sample(classes, 4 + i % 4)
        rules = [f"Every {a} is a {b}." for a, b in zip(chain, chain[1:])]
        name = draw.choice(NAMES)
        facts = draw.sample(rules, len(rules)) + [f"{name} is a {chain[0]}."]
        negate = draw.random() < 0.5
        target = chain[-1] if not negate else draw.choice([c for c in classes if c not in chain])
        question = " ".join(facts) + f" True or false: {name} is a {target}."
        steps = [f"{name} is a {chain[0]}."] + [f"{name} is a {b}." for b in chain[1:]]
        rows.append({"question": question, "steps": steps, "answer": "False" if negate else "True"})
    return rows


def prosqa_rows(coconut_repo: Path, n: int) -> list[dict]:
    """The ``n`` shortest rows of Coconut's own ``data/prosqa_valid.json`` and ``prosqa_test.json`` with one of its
    6-step rows second (our config's ``max_latent_stage`` 6 needs a CoT that long)."""
    rows = [row for split in ("valid", "test") for row in json.loads((coconut_repo / "data" / f"prosqa_{split}.json")
                                                                       .read_text())]  # fmt: skip
    rows = sorted(rows, key=lambda row: len(row["question"]))
    six = next(row for row in rows if len(row["steps"]) >= 6)
    chosen = [row for row in rows if row is not six][: n - 1]
    return [{key: row[key] for key in ("question", "steps", "answer")} for row in [*chosen[:1], six, *chosen[1:]]]


def codi_rows(rows: list[dict], tokenizer: Any, n: int, same_length: bool, natural: bool = False) -> list[dict]:
    """CODI's GSM8K-Aug rows (``question``, ``cot`` one string, ``answer``) from ``rows``: ``n`` whose questions are
    all as long in tokens as the commonest length (``same_length``: no left padding in CODI's batches), else the first
    ``n``; ``natural``: GSM8k-Aug-NL's shape, each step a sentence (:func:`sentences`)."""
    if same_length:
        lengths = [len(tokenizer(row["question"])["input_ids"]) for row in rows]
        common = max(set(lengths), key=lengths.count)
        rows = [row for row, length in zip(rows, lengths) if length == common]
        if len(rows) < n:
            raise ValueError(f"only {len(rows)} rows have questions of {common} tokens; generate more rows.")
    rows = rows[:n]
    # CODI reads its first row's teacher CoT (all steps but the last) for a BOS: that row needs two steps or more.
    first = next(i for i, row in enumerate(rows) if len(row["steps"]) > 1)
    rows = [rows[first], *rows[:first], *rows[first + 1 :]]
    cot = lambda row: sentences(row["steps"]) if natural else row["cot"]  # noqa: E731
    return [{"question": row["question"], "cot": cot(row), "answer": row["answer"]} for row in rows]


def sentences(steps: list[str]) -> str:
    """``<<a*b=c>>`` steps written as GSM8k-Aug-NL writes its CoT: sentences ended by ``". "``, the last by ``"."``."""
    return " ".join(f"We get {step.strip('<>').replace('=', ' = ')}." for step in steps)


# -- model folders ---------------------------------------------------------------------------------------------------


def build_tokenizer(texts: list[str], folder: Path, base: int, added: tuple[str, ...]) -> Any:
    """A byte-level BPE (GPT-2's kind, ``<|endoftext|>`` its eos) trained on ``texts``, its vocabulary filled to
    ``base`` entries with tokens no text produces, then ``added`` as special tokens; saved in ``folder``."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import AutoTokenizer, GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=1000, min_frequency=2, special_tokens=["<|endoftext|>"],
                            show_progress=False)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(folder))
    vocabulary = json.loads((folder / "vocab.json").read_text())
    for index in range(len(vocabulary), base):
        vocabulary[f"<|unused{index}|>"] = index
    (folder / "vocab.json").write_text(json.dumps(vocabulary))
    tokenizer = GPT2TokenizerFast(
        vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), eos_token="<|endoftext|>",
        bos_token="<|endoftext|>", unk_token="<|endoftext|>",
    )  # fmt: skip
    tokenizer.add_tokens(list(added), special_tokens=True)
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def save_model(folder: Path, kind: str, vocabulary: int, eos: int, shape: dict, seed: int = 0) -> None:
    """A model from random weights (``kind`` gpt2 or llama, ``shape`` its sizes) with ``vocabulary`` rows, saved in
    ``folder`` beside its tokenizer; dropout is set per variant by :func:`set_dropout`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocabulary, n_positions=1024, bos_token_id=eos,
                                           eos_token_id=eos, **shape))  # fmt: skip
    else:
        config = LlamaConfig(vocab_size=vocabulary, max_position_embeddings=2048, tie_word_embeddings=True,
                             rope_theta=500000.0, bos_token_id=eos, eos_token_id=eos, **shape)  # fmt: skip
        model = LlamaForCausalLM(config)
    model.save_pretrained(folder)


def set_dropout(folder: Path, dropout: float) -> None:
    """Set the saved model's dropout probabilities (GPT-2's three; a Llama's attention dropout) in its config."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    for key in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout"):
        if key in config:
            config[key] = dropout
    path.write_text(json.dumps(config, indent=2))


def write_rows(folder: Path, name: str, rows: list[dict]) -> Path:
    """``rows`` as ``folder/<name>_train.json``, and its first row as ``<name>_valid.json`` (the recipe wants an
    evaluation split; nothing is evaluated here); returns the training file."""
    folder.mkdir()
    (folder / f"{name}_valid.json").write_text(json.dumps(rows[:1]))
    path = folder / f"{name}_train.json"
    path.write_text(json.dumps(rows))
    return path


@dataclass
class Workspace:
    """The rows and model folders every run reads: Coconut's GPT-2 (its markers in the vocabulary), CODI's GPT-2 and
    Llama (folder names saying gpt2 / llama: CODI picks its LoRA modules and distillation positions by the name)."""

    root: Path
    files: dict[str, Path] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)


def prepare(root: Path, coconut_repo: Path | None, methods: set[str], shapes: dict, rows_per_file: int,
            codi_rows_needed: int, vocabulary: int = GPT2_VOCABULARY,
            codi_files: tuple[str, ...] = ("codi", "codi_padded", "codi_nl")) -> Workspace:  # fmt: skip
    """Write the rows (``rows_per_file`` per Coconut file; ``codi_rows_needed`` in each of ``codi_files``: ``codi``
    its questions of one length, ``codi_padded`` of different lengths, ``codi_nl`` / ``codi_nl_padded`` as those in
    GSM8k-Aug-NL's shape) and save the models of ``methods`` into ``root``. Without Coconut's checkout, ProsQA's rows are ProntoQA-like ones (another draw)."""
    from hf_icot.curriculum.layout import LATENT_TOKEN, LATENT_TOKENS

    work = Workspace(root)
    arithmetic = arithmetic_rows(max(400, 4 * codi_rows_needed), seed=1)
    coconut = {"gsm": arithmetic[:rows_per_file], "prontoqa": prontoqa_rows(rows_per_file, seed=2)}
    coconut["prosqa"] = prosqa_rows(coconut_repo, rows_per_file) if coconut_repo else prontoqa_rows(rows_per_file, 3)
    texts = [row["question"] + "\n" + "\n".join(row["steps"]) + "\n### " + row["answer"] for row in arithmetic]
    texts += [f"{row['question']} {row['cot']} The answer is: {row['answer']}" for row in arithmetic]
    texts += [f"{row['question']} {sentences(row['steps'])}\n The answer is: {row['answer']}" for row in arithmetic]
    for rows in coconut.values():
        texts += [row["question"] + "\n" + "\n".join(row["steps"]) + "\n### " + row["answer"] for row in rows]
    texts = texts * 2
    if "coconut" in methods:
        folder = work.folders["coconut"] = root / "gpt2-coconut"
        tokenizer = build_tokenizer(texts, folder, vocabulary, LATENT_TOKENS)
        if "<<" not in tokenizer.get_vocab():
            raise ValueError("the tokenizer has no '<<' token, which Coconut's run.py copies into its markers.")
        save_model(folder, "gpt2", len(tokenizer), tokenizer.eos_token_id, shapes["gpt2"])
        for name, rows in coconut.items():
            work.files[name] = write_rows(root / name, name, rows)
    if "codi" in methods:
        for kind in ("gpt2", "llama"):
            folder = work.folders[f"codi-{kind}"] = root / f"{kind}-codi"
            # <|latent|> in the base vocabulary; [PAD] next (CODI's pad id), then our markers at its bot / eot ids.
            tokenizer = build_tokenizer(texts, folder, vocabulary - 1, (LATENT_TOKEN,))
            save_model(folder, kind, len(tokenizer), tokenizer.eos_token_id, shapes[kind])
            tokenizer.add_special_tokens({"pad_token": "[PAD]"})
            tokenizer.save_pretrained(folder)
        for name in codi_files:
            same_length, natural = not name.endswith("_padded"), name.startswith("codi_nl")
            rows = codi_rows(arithmetic, tokenizer, codi_rows_needed, same_length, natural)
            work.files[name] = write_rows(root / name, name, rows)
    return work


# -- recording -------------------------------------------------------------------------------------------------------


@dataclass
class Record:
    """What one side's run did: the loss of each optimizer step (the mean of its micro-batches), each step's batch
    (Coconut: its input ids; CODI: each row's question and start marker), the seconds each step took (from the end
    of the one before), and peak memory."""

    micro_losses: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    batches: list[Any] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    micro: int = 0
    budget_s: float | None = None
    started: float = 0.0
    last: float = 0.0
    memory: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.started = self.last = time.perf_counter()
        self.memory["rss_before_mib"] = peak_rss_mib()
        reset_device_peak()

    def micro_batch(self, seed: int | None) -> None:
        """Before a micro-batch's forward: reseed torch for its draws (see the module docstring)."""
        import torch

        if seed is not None:
            torch.manual_seed(seed * 1000 + self.micro)
        self.micro += 1

    def step_end(self) -> bool:
        """At an optimizer step's end; True when the budget is spent."""
        now = time.perf_counter()
        self.seconds.append(now - self.last)
        self.last = now
        self.losses.append(sum(self.micro_losses) / len(self.micro_losses))
        self.micro_losses = []
        self.memory.update(peak_rss_mib=peak_rss_mib(), **device_peak())
        return self.budget_s is not None and now - self.started > self.budget_s

    def summary(self) -> dict[str, Any]:
        timed = self.seconds[1:] or self.seconds
        return {
            "losses": self.losses,
            "seconds": self.seconds,
            "seconds_per_step": sorted(timed)[len(timed) // 2] if timed else float("nan"),
            **self.memory,
        }


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (``getrusage``'s ``ru_maxrss``, KiB on Linux), in MiB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_device_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def device_peak() -> dict[str, float]:
    import torch

    return {"cuda_peak_mib": torch.cuda.max_memory_allocated() / 2**20} if torch.cuda.is_available() else {}


def question_rows(ids: Any, mask: Any, start: int) -> list[list[int]]:
    """Each row's real tokens up to and including its ``<|start-latent|>`` (CODI's encoder input)."""
    rows = []
    for row, keep in zip(ids.tolist(), mask.bool().tolist()):
        real = [token for token, kept in zip(row, keep) if kept]
        rows.append(real[: real.index(start) + 1] if start in real else real)
    return rows


def silence(trainer: Any) -> None:
    """No per-step log lines or progress bars from ``trainer`` (the record keeps what is compared)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)


def recording_callback(record: Record) -> Any:
    from transformers import TrainerCallback

    class Recording(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            record.start()

        def on_step_end(self, args, state, control, **kwargs):
            if record.step_end():
                control.should_training_stop = True

    return Recording()


# -- Coconut: their loop ---------------------------------------------------------------------------------------------


def their_coconut(repo: Path, setting: Setting, folder: Path, train_file: Path, batch_size: int, steps: int,
                  seed: int | None, device: str = "cpu", resume: int | None = None,
                  record: Record | None = None) -> Record:  # fmt: skip
    """The sequence of Coconut's ``run.py`` training loop (see the module docstring) for ``steps`` optimizer steps."""
    import torch
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dataset_module = load_module(repo / "dataset.py", "their_coconut_dataset")
    coconut_module = load_module(repo / "coconut.py", "their_coconut")
    utils = load_module(repo / "utils.py", "their_coconut_utils")
    configs = utils.Config(yaml.safe_load((repo / setting.theirs).read_text()))
    configs.resume = configs.resume if resume is None else resume
    configs.batch_size_training, configs.train_path = batch_size, str(train_file)
    utils.set_seed(configs.seed)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.eos_token
    for marker in ("<|start-latent|>", "<|end-latent|>", "<|latent|>"):
        tokenizer.add_tokens(marker)
    latent, start, end = tokenizer.convert_tokens_to_ids(["<|latent|>", "<|start-latent|>", "<|end-latent|>"])
    # Its new rows: the vocabulary resized, each marker's embedding and output rows a copy of '<<'.
    model.resize_token_embeddings(len(tokenizer))
    source = tokenizer.convert_tokens_to_ids("<<")
    with torch.no_grad():
        for token in (latent, start, end):
            model.get_input_embeddings().weight[token] = model.get_input_embeddings().weight[source]
            model.lm_head.weight[token] = model.lm_head.weight[source]
    model = coconut_module.Coconut(tuple_cache_lm(model), latent, start, end, tokenizer.eos_token_id).to(device)
    with one_process_map():
        base = dataset_module.get_dataset(str(train_file), tokenizer)
    collator = dataset_module.MyCollator(tokenizer, latent_id=latent, label_pad_token_id=-100)
    record = record or Record()
    optimizer = None if configs.reset_optimizer else torch.optim.AdamW(
        model.parameters(), lr=configs.lr, weight_decay=configs.weight_decay
    )  # fmt: skip
    record.start()
    epoch = configs.resume
    while len(record.losses) < steps:
        stage = epoch // configs.epochs_per_stage
        with one_process_map():
            dataset = dataset_module.get_cot_latent_dataset(stage, base, configs, start, latent, end, shuffle=False)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, collate_fn=collator, sampler=torch.utils.data.SequentialSampler(dataset)
        )
        if configs.reset_optimizer:
            optimizer = torch.optim.AdamW(model.parameters(), lr=configs.lr, weight_decay=configs.weight_decay)
        model.train()
        for index, batch in enumerate(loader):
            batch = {key: value.to(device) for key, value in batch.items() if key != "idx"}
            record.batches.append(batch["input_ids"].cpu())
            record.micro_batch(seed)
            loss = model(**batch).loss
            record.micro_losses.append(loss.item())
            (loss / configs.gradient_accumulation_steps).backward()
            if (index + 1) % configs.gradient_accumulation_steps == 0 or index == len(loader) - 1:
                optimizer.step()
                optimizer.zero_grad()
                if record.step_end() or len(record.losses) == steps:
                    return record
        epoch += 1
    return record


# -- CODI: their train() ---------------------------------------------------------------------------------------------


def script_arguments(script: Path) -> list[str]:
    """The arguments a CODI training script passes to ``train.py``."""
    text = script.read_text().replace("\\\n", " ")
    command = next(line for line in text.splitlines() if "train.py" in line)
    words = shlex.split(command)
    return words[words.index("train.py") + 1 :]


def codi_argv(script: Path, folder: Path, output: Path, steps: int, batch_size: int, bf16: bool) -> list[str]:
    """Its script's arguments for this machine and transformers 5 (see the module docstring)."""
    words, argv, index = script_arguments(script), [], 0
    replaced = {"--output_dir": str(output), "--model_name_or_path": str(folder), "--report_to": "none",
                "--per_device_train_batch_size": str(batch_size)}  # fmt: skip
    while index < len(words):
        word = words[index]
        value = words[index + 1] if index + 1 < len(words) and not words[index + 1].startswith("--") else None
        index += 1 if value is None else 2
        if word in ("--logging_dir", "--save_safetensors") or (word == "--bf16" and not bf16):
            continue
        if word == "--warmup_ratio":
            word = "--warmup_steps"
        argv += [word] + ([replaced.get(word, value)] if value is not None else [])
    return argv + ["--max_steps", str(steps)] + cpu_bf16(bf16)


def cpu_bf16(bf16: bool) -> list[str]:
    """transformers 5 takes ``--bf16`` on a machine without a GPU only with ``--use_cpu``."""
    import torch

    return ["--use_cpu", "true"] if bf16 and not torch.cuda.is_available() else []


def their_codi(repo: Path, setting: Setting, folder: Path, rows: list[dict], batch_size: int, steps: int,
               seed: int | None, variant: str, record: Record | None = None) -> tuple[Record, dict]:  # fmt: skip
    """CODI's ``train()`` for ``steps`` optimizer steps; returns the record and its model's initial state."""
    import torch

    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))  # train.py imports src.model from its checkout
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its device when loaded
        module = load_module(repo / "train.py", f"their_codi_train_{variant}_{time.monotonic_ns()}")
    model_module = sys.modules["src.model"]
    record = record or Record()
    captured: dict[str, Any] = {}
    bf16 = in_bf16(variant)
    loader = model_module.AutoModelForCausalLM

    class Loader:  # its dtype: float16 without --bf16 (float32 here), bfloat16 with it (kept)
        @staticmethod
        def from_pretrained(*args, **kwargs):
            kwargs.pop("resume_download", None)
            kwargs["torch_dtype"] = torch.bfloat16 if bf16 else torch.float32
            return loader.from_pretrained(*args, **kwargs)

    lora_config = module.LoraConfig

    def lora(**kwargs):  # its LoRA dropout is fixed at 0.1 in train.py
        return lora_config(**{**kwargs, "lora_dropout": kwargs["lora_dropout"] if has_dropout(variant) else 0.0})

    base = module.CustomTrainer

    class Trainer(base):
        def __init__(self, *args, **kwargs):
            kwargs["processing_class"] = kwargs.pop("tokenizer")  # transformers 5's name for it
            super().__init__(*args, **kwargs)
            captured["state"] = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.add_callback(recording_callback(record))
            silence(self)

        def training_step(self, model, inputs, num_items_in_batch=None):
            record.batches.append(question_rows(inputs["encoder_input_ids"], inputs["encoder_attention_mask"], -1))
            record.micro_batch(seed)
            return super().training_step(model, inputs, num_items_in_batch)

        def compute_loss(self, model, inputs, num_items_in_batch=None, **kwargs):
            loss = super().compute_loss(model, inputs, num_items_in_batch)
            record.micro_losses.append(loss.item())
            return loss

        def save_model(self, *args, **kwargs): ...
        def save_state(self, *args, **kwargs): ...

    model_module.AutoModelForCausalLM, module.LoraConfig, module.CustomTrainer = Loader, lora, Trainer
    module.load_dataset = lambda name: {"train": rows}
    output = Path(tempfile.mkdtemp(dir=folder.parent, prefix="codi-out-"))
    argv = codi_argv(repo / setting.theirs, folder, output, steps, batch_size, bf16)
    saved, sys.argv = sys.argv, ["train.py", *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its per-step prints (print_ref_model_stats)
            module.train()
    finally:
        sys.argv = saved
        model_module.AutoModelForCausalLM = loader
    return record, captured["state"]


# -- ours ------------------------------------------------------------------------------------------------------------


def our_arguments(setting: Setting, folder: Path, train_file: Path, output: Path, steps: int, batch_size: int,
                  variant: str, extra: list[str] | None = None) -> list[str]:  # fmt: skip
    """The recipe's command line: the setting's config and the overrides both sides share."""
    valid = train_file.with_name(train_file.name.replace("_train", "_valid"))
    task_args = {"path": [str(train_file), str(valid)], "config": train_file.parent.name}
    argv = [
        "--config", str(CONFIGS / setting.config), "--model_name_or_path", str(folder), "--task_args",
        json.dumps(task_args), "--output_dir", str(output), "--max_steps", str(steps),
        "--per_device_train_batch_size", str(batch_size), "--save_strategy", "no", "--logging_steps", "1",
        "--report_to", "none", "--disable_tqdm", "true",
    ]  # fmt: skip
    if setting.method == "codi":
        argv += ["--bf16", *cpu_bf16(True)] if in_bf16(variant) else ["--dtype", "float32"]
        if not has_dropout(variant):
            argv += ["--lora_dropout", "0.0"]
    return argv + (extra or [])


def ours(argv: list[str], seed: int | None, sequential: bool, record: Record | None = None,
         initial_state: dict | None = None, threads: int | None = None) -> Record:  # fmt: skip
    """Recipe steps 1-3 of ``recipes/icot_gpt2.py`` with ``argv``; the trainer a bench subclass that records."""
    import torch

    from datasets_builder import build_dataset
    from hf_icot.command_line.arguments import parse_recipe_args
    from hf_icot.command_line.recipe import RecipeRun
    from hf_icot.modeling.loading import load_model_for_run
    from hf_icot.training.config import schedule_from_config
    from hf_icot.training.trainer import ICoTTrainer

    record = record or Record()

    class LoopTrainer(ICoTTrainer):
        def _get_train_sampler(self, train_dataset=None):
            if sequential:
                return torch.utils.data.SequentialSampler(
                    self.train_dataset if train_dataset is None else train_dataset
                )
            return super()._get_train_sampler(train_dataset)

        def training_step(self, model, inputs, num_items_in_batch=None):
            if "teacher_input_ids" in inputs:
                start = self.method.renderer.tokens.start
                record.batches.append(question_rows(inputs["input_ids"], inputs["attention_mask"], start))
            else:
                record.batches.append(inputs["input_ids"].cpu())
            record.micro_batch(seed)
            return super().training_step(model, inputs, num_items_in_batch)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            record.micro_losses.append((result[0] if return_outputs else result).item())
            return result

    script_args, training_args, model_args = parse_recipe_args(argv)
    with RecipeRun(training_args) as run:
        if threads:
            torch.set_num_threads(threads)
        schedule = schedule_from_config(training_args)
        data = run.load_data(script_args, build=build_dataset)
        model, tokenizer = load_model_for_run(model_args, schedule.layout, data.dataset)
        trainer = run.track(LoopTrainer(model=model, args=training_args, train_dataset=data.train,
                                        processing_class=tokenizer, schedule=schedule))  # fmt: skip
        if initial_state is not None:
            load_their_state(trainer.model, initial_state)
        trainer.add_callback(recording_callback(record))
        silence(trainer)
        trainer.train()
    return record


def load_their_state(model: Any, state: dict) -> None:
    """Copy CODI's initial weights (``codi.*``: its PEFT-wrapped LM; ``prj.*``: its projection) into our PEFT model.

    Raises:
        ValueError: a tensor of theirs with no counterpart, or one of ours left unset.
    """
    import torch

    ours_state = model.state_dict()
    renamed = {}
    for name, tensor in state.items():
        if name.startswith("codi."):
            renamed[name[len("codi.") :]] = tensor
        elif name.startswith("prj."):
            renamed["base_model.model.latent_projection." + name[len("prj.") :]] = tensor
    unknown, unset = set(renamed) - set(ours_state), set(ours_state) - set(renamed)
    if unknown or unset:
        raise ValueError(f"CODI's state and ours differ: theirs only {sorted(unknown)[:4]}, ours {sorted(unset)[:4]}")
    with torch.no_grad():
        for name, tensor in ours_state.items():
            tensor.copy_(renamed[name])


# -- comparison ------------------------------------------------------------------------------------------------------


def same_batches(theirs: list[Any], mine: list[Any]) -> bool:
    import torch

    if len(theirs) != len(mine):
        return False
    return all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(theirs, mine))


def compare(args: argparse.Namespace, key: str, variant: str, work: Workspace) -> dict[str, Any]:
    """One setting and variant: both sides' losses, the largest gap, whether the batches were the same."""
    import gc

    setting = SETTINGS[key]
    seed = 0  # the micro-batches' reseeding (both sides)
    steps = args.steps or setting.steps
    if setting.method == "coconut":
        folder, train_file = work.folders["coconut"], work.files[setting.rows]
        if variant == "float64":
            folder = in_float64(folder)
        set_dropout(folder, 0.1 if has_dropout(variant) else 0.0)
        theirs = their_coconut(args.coconut, setting, folder, train_file, args.batch_size, steps, seed)
        gc.collect()
        argv = our_arguments(setting, folder, train_file, work.root / f"ours-{key}-{variant}", steps,
                             args.batch_size, variant)  # fmt: skip
        mine = ours(argv, seed, sequential=True, threads=args.threads)
    else:
        folder = work.folders["codi-llama" if "llama" in key else "codi-gpt2"]
        train_file = work.files["codi_padded" if variant == "padded" else setting.rows]
        set_dropout(folder, 0.1 if has_dropout(variant) else 0.0)
        rows = json.loads(train_file.read_text())
        theirs, state = their_codi(args.codi, setting, folder, rows, args.codi_batch_size, steps, seed, variant)
        gc.collect()
        argv = our_arguments(setting, folder, train_file, work.root / f"ours-{key}-{variant}", steps,
                             args.codi_batch_size, variant)  # fmt: skip
        mine = ours(argv, seed, sequential=False, initial_state=state, threads=args.threads)
        del state
    gc.collect()
    gaps = [abs(a - b) for a, b in zip(theirs.losses, mine.losses)]
    return {
        "setting": setting.name, "key": key, "variant": variant, "steps": len(gaps),
        "theirs": theirs.losses, "ours": mine.losses, "largest_gap": max(gaps) if gaps else float("nan"),
        "same_batches": same_batches(theirs.batches, mine.batches),
        "seconds_per_step": {"theirs": theirs.summary()["seconds_per_step"], "ours": mine.summary()["seconds_per_step"]},
    }  # fmt: skip


def in_float64(folder: Path) -> Path:
    """A copy of the model folder with its weights in float64 (both sides load it as saved), made once."""
    import shutil

    from transformers import AutoModelForCausalLM

    copy = folder.with_name(folder.name + "-float64")
    if not copy.exists():
        AutoModelForCausalLM.from_pretrained(folder).double().save_pretrained(copy)
        for file in folder.iterdir():
            if not (copy / file.name).exists():
                shutil.copy(file, copy / file.name)
    return copy


def machine_line() -> str:
    """The CPU model, the cores and the load average (the machine may be shared: read the seconds beside them)."""
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, load average {load}"


# -- cost ------------------------------------------------------------------------------------------------------------

#: (label, setting, Coconut stage or None): Coconut GSM8K (2 thoughts per step) at stages 1-3 = 2, 4, 6 thoughts.
COST_CASES = [
    ("Coconut GSM8K, 2 thoughts", "coconut_gsm8k", 1),
    ("Coconut GSM8K, 4 thoughts", "coconut_gsm8k", 2),
    ("Coconut GSM8K, 6 thoughts", "coconut_gsm8k", 3),
    ("CODI GSM8k-Aug, GPT-2 (float32)", "codi_gsm8k_aug_gpt2", None),
]


def measure(args: argparse.Namespace, side: str, key: str, stage: int | None) -> dict[str, Any]:
    """One side's steps in this (fresh) process: its record's seconds and memory."""
    import torch

    torch.set_num_threads(args.threads)
    setting = SETTINGS[key]
    root = Path(args.workspace)
    steps = args.cost_steps
    if setting.method == "coconut":
        folder, train_file = root / "gpt2-coconut", root / "gsm" / "gsm_train.json"
        set_dropout(folder, 0.1)  # its published run: GPT-2's dropout, float32
        if side == "theirs":
            resume = stage * 3  # args/gsm_coconut.yaml: 3 epochs per stage
            record = their_coconut(args.coconut, setting, folder, train_file, args.batch_size, steps, None,
                                   resume=resume)  # fmt: skip
        else:
            argv = our_arguments(setting, folder, train_file, root / f"cost-{side}-{stage}", steps, args.batch_size,
                                 "dropout", ["--start_stage", str(stage)])  # fmt: skip
            record = ours(argv, None, sequential=True, threads=args.threads)
    else:
        folder, train_file = root / "gpt2-codi", root / "codi" / "codi_train.json"
        set_dropout(folder, 0.1)
        rows = json.loads(train_file.read_text())
        if side == "theirs":
            record, _ = their_codi(args.codi, setting, folder, rows, args.codi_batch_size, steps, None, "dropout")
        else:
            argv = our_arguments(setting, folder, train_file, root / "cost-ours-codi", steps, args.codi_batch_size,
                                 "dropout")  # fmt: skip
            record = ours(argv, None, sequential=False, threads=args.threads)
    return record.summary()


def cost_table(args: argparse.Namespace, work: Workspace) -> list[dict[str, Any]]:
    """Every cost case, each side in a fresh process (peak memory is a process's high-water mark)."""
    results = []
    for label, key, stage in COST_CASES:
        row = {"case": label}
        for side in ("theirs", "ours"):
            command = [
                sys.executable, __file__, "--coconut", str(args.coconut), "--codi", str(args.codi), "--measure",
                f"{side}:{key}:{stage}", "--workspace", str(work.root), "--batch-size", str(args.batch_size),
                "--codi-batch-size", str(args.codi_batch_size), "--cost-steps", str(args.cost_steps),
                "--threads", str(args.threads),
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{label}, {side}: {done.stderr[-3000:]}")
            row[side] = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(row)
    return results


GAP_HEADER = (
    "| setting | variant | steps | gap at step 1 | largest gap (step) | same batches | loss at step 1, theirs / ours "
    "| at the last step |\n|---|---|---|---|---|---|---|---|"
)
COST_HEADER = (
    "| case | s/step theirs | s/step ours | theirs / ours | peak RSS MiB theirs | ours | RSS growth in training, "
    "theirs | ours |\n|---|---|---|---|---|---|---|---|"
)


def gap_row(result: dict[str, Any]) -> str:
    """A line of the gap table: the losses' gap at the first step and the largest, at which step (from 1)."""
    gaps = [abs(a - b) for a, b in zip(result["theirs"], result["ours"])]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    first, last = (result["theirs"][0], result["ours"][0]), (result["theirs"][-1], result["ours"][-1])
    return (
        f"| {result['setting']} | {result['variant']} | {result['steps']} | {gaps[0]:.1e} | {gaps[worst]:.1e} "
        f"({worst + 1}) | {result['same_batches']} | {first[0]:.6f} / {first[1]:.6f} | {last[0]:.6f} / {last[1]:.6f} |"
    )


def cost_row(row: dict[str, Any]) -> str:
    a, b = row["theirs"], row["ours"]
    grow = [r["peak_rss_mib"] - r["rss_before_mib"] for r in (a, b)]
    return (
        f"| {row['case']} | {a['seconds_per_step']:.1f} | {b['seconds_per_step']:.1f} | "
        f"{a['seconds_per_step'] / b['seconds_per_step']:.2f}x | {a['peak_rss_mib']:.0f} | {b['peak_rss_mib']:.0f} | "
        f"{grow[0]:.0f} | {grow[1]:.0f} |"
    )


def print_table(results: list[dict[str, Any]]) -> None:
    """The gap table (results of :func:`compare`) or the cost table (of :func:`cost_table`)."""
    cost = bool(results) and "case" in results[0]
    print(COST_HEADER if cost else GAP_HEADER)
    for result in results:
        print(cost_row(result) if cost else gap_row(result))


def quiet() -> None:
    """No progress bars or warnings from transformers and datasets: the tables are the output."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import datasets
    import transformers

    logging.getLogger().setLevel(logging.ERROR)  # CODI's train.py warns through the root logger
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


# -- main ------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coconut", type=Path, default=None, help="a checkout of facebookresearch/coconut")
    parser.add_argument("--codi", type=Path, default=None, help="a checkout of zhenyi4/codi")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated keys of SETTINGS")
    parser.add_argument(
        "--variants", default="exact,float64,padded,dropout,bf16", help="which of each setting's variants"
    )
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: each setting's own)")
    parser.add_argument("--batch-size", type=int, default=3, help="Coconut's rows per step (5 rows: 2 steps/epoch)")
    parser.add_argument("--codi-batch-size", type=int, default=2, help="CODI's rows per micro-batch")
    parser.add_argument("--llama-layers", type=int, default=2, help="depth of the Llama-3.2-1B-wide model")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on each side")
    parser.add_argument("--cost", action="store_true", help="measure seconds per step and peak memory instead")
    parser.add_argument("--cost-steps", type=int, default=4, help="steps per cost measurement (the first untimed)")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2-layer, 64-wide models, a 1,000-token vocabulary: a quick "
        "check of the script (the gaps hold, the seconds mean nothing)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="print the table of these results files (with --out: merged into one) and stop",
    )
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workspace", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.from_json:
        results = [row for path in args.from_json for row in json.loads(path.read_text())]
        print_table(results)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n")
        return
    for flag, path, needed in (("--coconut", args.coconut, "run.py"), ("--codi", args.codi, "train.py")):
        if path is None:
            sys.exit(f"error: {flag} is missing; give a checkout of the repository.")
        if not (path / needed).is_file():
            sys.exit(f"error: {flag} {str(path)!r} has no {needed}; give a checkout of the repository.")
    unknown = set(args.settings.split(",")) - set(SETTINGS)
    if unknown:
        sys.exit(f"error: --settings {','.join(sorted(unknown))} is not a setting; choose from {', '.join(SETTINGS)}.")
    if args.measure:
        quiet()
        side, key, stage = args.measure.split(":")
        print(json.dumps(measure(args, side, key, None if stage == "None" else int(stage))))
        return
    quiet()
    import torch

    torch.set_num_threads(args.threads)
    keys = args.settings.split(",")
    methods = {SETTINGS[key].method for key in keys} | ({"coconut", "codi"} if args.cost else set())
    shapes = {"gpt2": GPT2_SMALL, "llama": {**LLAMA_1B, "num_hidden_layers": args.llama_layers}}
    vocabulary = GPT2_VOCABULARY
    if args.tiny:
        shapes, vocabulary = {"gpt2": TINY_GPT2, "llama": TINY_LLAMA}, 1000
    rows = 4 * args.batch_size if args.cost else 5
    codi_needed = 4 * args.codi_batch_size * 2 if args.cost else 12
    root = Path(tempfile.mkdtemp(prefix="latent_loops_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # its models take 2 GB at GPT-2 small's shape
    work = prepare(root, args.coconut, methods, shapes, rows, codi_needed, vocabulary)
    print(f"machine: {machine_line()}; torch threads {args.threads}", flush=True)
    if args.cost:
        table = cost_table(args, work)
        print_table(table)
        print(f"machine after: {machine_line()}")
        if args.out:
            args.out.write_text(json.dumps(table, indent=2) + "\n")
        return
    wanted = args.variants.split(",")
    results = []
    print("\n" + GAP_HEADER, flush=True)
    for key in keys:
        for variant in [v for v in SETTINGS[key].variants if v in wanted]:
            results.append(compare(args, key, variant, work))
            print(gap_row(results[-1]), flush=True)
    print(f"machine after: {machine_line()}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
