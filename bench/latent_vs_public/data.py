"""Coconut's and CODI's own data pipelines beside hf_icot's latent formats, on the same rows and one tokenizer.

    python bench/latent_vs_public/data.py --coconut /tmp/coconut --codi /tmp/codi [--prosqa-rows 16]

Their side runs their code as it is, from the checkouts given (nothing of it is committed): Coconut's ``dataset.py``
(``get_dataset`` on a JSON file, ``get_cot_latent_dataset`` at a stage, ``MyCollator``) and CODI's ``train.py``
(``train()`` itself, through its ``SupervisedDataset`` preprocessing to its ``DataCollatorForSupervisedDataset``).
Changed at run time only: Coconut's ``dataset.map(num_proc=32)`` runs in one process (the same rows); CODI's
``train()`` gets, in place of the three things it would fetch or build, the rows below as ``load_dataset``'s answer, a
stand-in for its model that holds only the ids ``train()`` reads from it (the pad id it would append, and our
``<|start-latent|>`` / ``<|end-latent|>`` as its ``bot`` / ``eot``), and a trainer that keeps the dataset and collator
it is handed instead of training.

Our side: the same rows through ``datasets_builder``'s ``latent_json`` task, the collator's preparation and the
method's ``render`` (what :class:`hf_icot.training.trainer.ICoTTrainer` renders), with ``latent_format coconut`` /
``codi``. One tokenizer serves both: a byte-level BPE trained here on the rows' text, GPT-2's kind (``<|endoftext|>``
its eos), the latent markers added; pad = eos for Coconut (its ``run.py``), an added ``[PAD]`` for CODI (its
``train.py``).

Rows: the first ``--prosqa-rows`` of Coconut's ``data/prosqa_valid.json``, and GSM8K-style rows written here (double
spaces in questions, one to five ``<<…>>`` steps, an answer with a comma; for CODI a GSM8K-Aug ``cot`` string and a
negative answer, which CODI's preprocessing drops). Every published setting's format is compared, at every stage for
Coconut (GSM8K: c=2, max stage 3, pad_latent_to_max; ProsQA/ProntoQA: c=1, max stage 6, pad; and both without pad),
CODI with ``remove_eos`` true and false. Printed: rows equal (token ids, labels, attention mask and position ids of the
real tokens) / rows compared, and whether the padded batch tensors are equal as a whole.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's root on the path, as for `python -m`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.latent_vs_public.run import load_module  # noqa: E402

#: GSM8K-style rows in Coconut's JSON shape (its preprocessing keeps the stepwise reference's question text).
GSM_ROWS = [
    {"question": "Tom has 3 boxes of 12 pens.  He gives away 7 pens. How many pens are left?",
     "steps": ["<<3*12=36>>", "<<36-7=29>>"], "answer": "29"},
    {"question": "A shop sells 1,200 apples a day. How many in 5 days?", "steps": ["<<1200*5=6000>>"],
     "answer": "6,000"},
    {"question": "Ann reads 4 pages a day for 6 days, then 10 more pages.  Then she reads half of that again.  "
                 "How many pages?", "steps": ["<<4*6=24>>", "<<24+10=34>>", "<<34/2=17>>", "<<34+17=51>>",
                                             "<<51*1=51>>"], "answer": "51"},
    {"question": "Half of 10 plus 3?", "steps": ["<<10/2=5>>", "<<5+3=8>>"], "answer": "8"},
    {"question": "Sam had 20 marbles and lost 4, then won 9.  How many now?",
     "steps": ["<<20-4=16>>", "<<16+9=25>>", "<<25*1=25>>"], "answer": "25"},
    {"question": "What is 7 times 8?", "steps": [], "answer": "56"},
]  # fmt: skip
#: GSM8K-Aug rows as CODI reads them (zen-E/GSM8k-Aug: the CoT one string); the negative answer is dropped by CODI.
CODI_ROWS = [
    {"question": "Tom has 3 boxes of 12 pens.  He gives away 7 pens. How many pens are left?",
     "cot": "<<3*12=36>> <<36-7=29>>", "answer": "29"},
    {"question": "Ann reads 4 pages a day for 6 days, then 10 more.  How many pages?",
     "cot": "<<4*6=24>> <<24+10=34>> <<34*1=34>>", "answer": "34"},
    {"question": "A shop sells 1200 apples a day. How many in 5 days?", "cot": "<<1200*5=6000>>", "answer": "6000"},
    {"question": "It is 3 degrees and drops 9. What is it now?", "cot": "<<3-9=-6>>", "answer": "-6"},
    {"question": "Half of 10 plus 3?", "cot": "<<10/2=5>> <<5+3=8>>", "answer": "#### 8"},
    {"question": "Sam had 20 marbles and lost 4, then won 9.  How many now?",
     "cot": "<<20-4=16>> <<16+9=25>> <<25*1=25>> <<25+0=25>>", "answer": "25"},
]  # fmt: skip
#: GSM8k-Aug-NL rows as CODI reads them (zen-E/GSM8k-Aug-NL: the CoT in sentences; its icot-full branch splits it at
#: ". "): one sentence (an empty teacher CoT), a decimal point inside a sentence, a negative answer CODI drops.
CODI_NL_ROWS = [
    {"question": "Tom has 3 boxes of 12 pens.  He gives away 7 pens. How many pens are left?",
     "cot": "Tom has 3*12 = 36 pens. He has 36-7 = 29 pens left.", "answer": "29"},
    {"question": "Ann reads 4 pages a day for 6 days, then 10 more.  How many pages?",
     "cot": "Ann reads 4*6 = 24 pages in 6 days. Then she reads 24+10 = 34 pages. So she reads 34 pages.",
     "answer": "34"},
    {"question": "A shop sells 1200 apples a day. How many in 5 days?", "cot": "It sells 1200*5 = 6000 apples.",
     "answer": "6000"},
    {"question": "It is 3 degrees and drops 9. What is it now?", "cot": "It is 3-9 = -6 degrees.", "answer": "-6"},
    {"question": "A pen costs 1.5 dollars. How much do 4 pens cost?",
     "cot": "4 pens cost 4*1.5 = 6 dollars. The answer is 6.", "answer": "#### 6"},
    {"question": "Sam had 20 marbles and lost 4, then won 9.  How many now?",
     "cot": "Sam had 20-4 = 16 marbles. Then he had 16+9 = 25 marbles. He has 25 now. That is all.", "answer": "25"},
]  # fmt: skip
#: CODI's rows by the name its settings give them.
CODI_ROW_SETS = {"aug": CODI_ROWS, "nl": CODI_NL_ROWS}
#: CODI's published formats: (name, its data_name, latent_json's format, its rows (CODI_ROW_SETS), remove_eos).
CODI_SETTINGS = [
    ("CODI GSM8K-Aug, remove_eos false", "icot", "codi", "aug", False),
    ("CODI GSM8K-Aug, remove_eos true", "icot", "codi", "aug", True),
    ("CODI GSM8K-Aug-NL, remove_eos false", "icot-full", "codi_nl", "nl", False),
    ("CODI GSM8K-Aug-NL, remove_eos true", "icot-full", "codi_nl", "nl", True),
]
#: Coconut's published settings: (name, rows, c_thought, max_latent_stage, pad_latent_to_max).
COCONUT_SETTINGS = [
    ("GSM8K (c=2, max 3, pad)", "gsm", 2, 3, True),
    ("GSM8K (c=2, max 3, no pad)", "gsm", 2, 3, False),
    ("ProsQA/ProntoQA (c=1, max 6, pad)", "prosqa", 1, 6, True),
    ("ProsQA/ProntoQA (c=1, max 6, no pad)", "prosqa", 1, 6, False),
]


def bpe_tokenizer(texts: list[str], folder: Path, markers: tuple[str, ...] | None = None) -> Any:
    """A byte-level BPE (GPT-2's kind, eos ``<|endoftext|>``) trained on ``texts``, the latent ``markers`` (default:
    all three) added as special tokens, no pad token; saved in ``folder`` and loaded back."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import AutoTokenizer, GPT2TokenizerFast

    from hf_icot.curriculum.layout import LATENT_TOKENS

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts, vocab_size=600, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False
    )
    folder.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(folder))
    tokenizer = GPT2TokenizerFast(
        vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), eos_token="<|endoftext|>",
        bos_token="<|endoftext|>", unk_token="<|endoftext|>",
    )  # fmt: skip
    tokenizer.add_tokens(list(LATENT_TOKENS if markers is None else markers), special_tokens=True)
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def corpus(prosqa: list[dict]) -> list[str]:
    """The rows' text as the two formats write it, for the tokenizer to learn."""
    texts = []
    for row in [*prosqa, *GSM_ROWS]:
        texts.append(row["question"] + "\n" + "\n".join(row["steps"]) + "\n### " + row["answer"])
    for row in [row for rows in CODI_ROW_SETS.values() for row in rows]:
        texts.append(f"{row['question']} {row['cot']} The answer is: {row['answer']}")
    return texts * 4


@contextlib.contextmanager
def one_process_map():
    """``datasets.Dataset.map`` without ``num_proc`` (Coconut asks for 32 processes; the rows are the same)."""
    import datasets

    plain = datasets.Dataset.map

    def map_here(self, *args, num_proc=None, **kwargs):
        return plain(self, *args, **kwargs)

    datasets.Dataset.map = map_here
    try:
        yield
    finally:
        datasets.Dataset.map = plain


def our_prepared(
    json_file: Path, tokenizer: Any, schedule: Any, options: dict | None = None, fmt: str = "auto"
) -> tuple[list[dict], Any]:
    """The rows of ``json_file`` through ``latent_json`` (its ``fmt``), the collator and the method's preparation, as
    the trainer renders them (the text columns left out), and the method (with ``options``) ready to render."""
    from datasets_builder import build_dataset
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.methods import build_method

    dataset, _ = build_dataset("latent_json", {"path": [str(json_file)], "format": fmt})
    split = next(iter(dataset.values()))
    collator = ICoTCollator(tokenizer, schedule.layout)
    method = build_method(schedule, options or {})
    method.renderer = method.make_renderer(tokenizer)
    prepared = method.prepare_dataset(collator.prepare_dataset(split, layout=schedule.layout)[0], tokenizer)
    view = collator.rendering_view(prepared)
    return [view[i] for i in range(len(view))], method


def real(ids: Any, mask: Any) -> list[int]:
    return ids[mask.bool()].tolist()


# -- Coconut --------------------------------------------------------------------------------------------------------


def coconut_table(coconut_repo: Path, tokenizer: Any, files: dict[str, Path]) -> list[dict]:
    """Per setting and stage: their batch against ours, row by row and as padded tensors."""
    import torch

    from hf_icot.curriculum import build_schedule
    from hf_icot.methods.latent_batches import LatentTokens

    module = load_module(coconut_repo / "dataset.py", "their_coconut_dataset")
    markers = LatentTokens.of(tokenizer)
    tokenizer.padding_side = "right"  # its collator asserts it
    collator = module.MyCollator(tokenizer, latent_id=markers.latent, label_pad_token_id=-100)
    results = []
    for name, rows, c, max_stage, pad in COCONUT_SETTINGS:
        with one_process_map():
            base = module.get_dataset(str(files[rows]), tokenizer)
        options = {"latent_format": "coconut", "c_thought": c, "max_latent_stage": max_stage, "pad_latent_to_max": pad}
        schedule = build_schedule("coconut", options)
        examples, method = our_prepared(files[rows], tokenizer, schedule)
        schedule.bind(1)  # one optimizer step per epoch: step s × epochs_per_stage is stage s
        for stage in range(max_stage + 2):
            configs = SimpleNamespace(
                uniform_prob=0.0, max_latent_stage=max_stage, pad_latent_to_max=pad, c_thought=c, no_cot=False
            )
            with one_process_map():
                theirs = module.get_cot_latent_dataset(
                    stage, base, configs, markers.start, markers.latent, markers.end
                )
            features = [
                {key: theirs[i][key] for key in ("input_ids", "labels", "attention_mask", "position_ids", "idx")}
                for i in range(len(theirs))
            ]
            their_batch = collator(features)
            our_batch, _ = method.render(examples, stage * schedule.epochs_per_stage, True, None)
            equal_rows = 0
            for row in range(len(examples)):
                mine, yours = our_batch["attention_mask"][row], their_batch["attention_mask"][row]
                equal_rows += all(
                    real(our_batch[key][row], mine) == real(their_batch[key][row], yours)
                    for key in ("input_ids", "labels", "position_ids")
                ) and int(mine.sum()) == int(yours.sum())
            padded = all(
                torch.equal(our_batch[key], their_batch[key])
                for key in ("input_ids", "labels", "attention_mask", "position_ids")
            )
            results.append(
                {"setting": name, "stage": stage, "equal": equal_rows, "rows": len(examples), "padded": padded}
            )
    return results


# -- CODI -----------------------------------------------------------------------------------------------------------


def codi_their_batch(
    codi_repo: Path, folder: Path, rows: list[dict], remove_eos: bool, ids: dict, data_name: str = "icot"
) -> dict:
    """CODI's ``train()`` on ``rows`` with its ``--data_name`` up to its collated batch (see the module docstring)."""
    if str(codi_repo) not in sys.path:
        sys.path.insert(0, str(codi_repo))  # train.py imports src.model from its checkout
    with contextlib.redirect_stdout(sys.stderr):  # it prints its device when loaded
        module = load_module(codi_repo / "train.py", f"their_codi_train_{data_name}_{int(remove_eos)}")
    captured: dict[str, Any] = {}

    class ModelIds:  # what train() reads from its model before training: the ids it appends to the vocabulary
        pad_token_id, bot_id, eot_id = ids["pad"], ids["start"], ids["end"]

    class KeepData:  # stands in for its CustomTrainer: keeps what it is handed
        def __init__(self, **kwargs: Any) -> None:
            captured.update(kwargs)

        def train(self) -> None: ...
        def save_state(self) -> None: ...
        def save_model(self, **kwargs: Any) -> None: ...

    module.CODI = lambda *args, **kwargs: ModelIds()
    module.load_dataset = lambda name: {"train": rows}  # icot: zen-E/GSM8k-Aug; icot-full: zen-E/GSM8k-Aug-NL
    module.CustomTrainer = KeepData
    argv = [
        "train.py", "--model_name_or_path", str(folder), "--data_name", data_name, "--output_dir",
        str(folder / "out"), "--report_to", "none", "--lora_init", "True", "--num_latent", "6",
        "--remove_eos", str(remove_eos),
    ]  # fmt: skip
    saved, sys.argv = sys.argv, argv
    try:
        with contextlib.redirect_stdout(sys.stderr):
            module.train()
    finally:
        sys.argv = saved
    dataset = captured["train_dataset"]
    return captured["data_collator"]([dataset[i] for i in range(len(dataset))])


def codi_table(codi_repo: Path, tokenizer: Any, folder: Path, files: dict[str, Path]) -> list[dict]:
    """CODI's settings (:data:`CODI_SETTINGS`): student and teacher, row by row and as padded batches, against ours
    on the rows CODI keeps."""
    import torch

    from hf_icot.curriculum import build_schedule
    from hf_icot.methods.latent_batches import LatentTokens

    markers = LatentTokens.of(tokenizer)
    ids = {"pad": tokenizer.pad_token_id, "start": markers.start, "end": markers.end}
    results = []
    for name, data_name, fmt, rows, remove_eos in CODI_SETTINGS:
        schedule = build_schedule("codi", {"latent_format": "codi", "remove_eos": remove_eos, "num_latent": 6})
        options = {"cot_sentences": fmt == "codi_nl"}
        examples, method = our_prepared(files[rows], tokenizer, schedule, options, fmt)
        theirs = codi_their_batch(codi_repo, folder, CODI_ROW_SETS[rows], remove_eos, ids, data_name)
        n_rows, n_latent = len(theirs["encoder_input_ids"]), schedule.num_latent
        width = theirs["encoder_input_ids"].shape[1]
        # CODI keeps rows in order and drops some: each of its rows is the one of ours that its question, separator
        # and marker open.
        openings = [[*e["question_ids"], *method.renderer.format.after_question, markers.start] for e in examples]
        encoders = [real(theirs["encoder_input_ids"][r], theirs["encoder_attention_mask"][r]) for r in range(n_rows)]
        ours, _ = method.render([examples[openings.index(encoder)] for encoder in encoders], 0, True, None)
        # Their student as one sequence: the left-padded question, the thoughts, the right-padded decoder, labelled
        # from the token after <eot> (its loss shifts the decoder's labels by one); their teacher right-padded.
        slots = torch.full((n_rows, n_latent), markers.latent)
        their_ids = torch.cat([theirs["encoder_input_ids"], slots, theirs["decoder_input_ids"]], dim=1)
        unlabelled = torch.full((n_rows, width + n_latent + 1), -100)
        their_labels = torch.cat([unlabelled, theirs["labels"][:, 1:]], dim=1)
        # Real tokens: the question's mask, then every thought and decoder token its labels keep (and <eot>).
        decoder_real = torch.cat([torch.ones(n_rows, 1, dtype=torch.bool), theirs["labels"][:, 1:] != -100], dim=1)
        their_mask = torch.cat([theirs["encoder_attention_mask"], slots > -1, decoder_real], dim=1).long()
        pairs = {
            "student": [("input_ids", their_ids), ("labels", their_labels), ("attention_mask", their_mask)],
            "teacher": [("teacher_input_ids", theirs["ref_input_ids"]), ("teacher_labels", theirs["ref_labels"]),
                        ("teacher_attention_mask", theirs["ref_attention_mask"].long())],
        }  # fmt: skip
        result = {"setting": name, "theirs": n_rows}
        result["ours"] = len(examples)
        for half, keys in pairs.items():
            mask_key, their_mask_of = keys[2][0], keys[2][1]
            result[half] = sum(
                all(
                    real(ours[key][r], ours[mask_key][r]) == real(value[r], their_mask_of[r])
                    for key, value in keys[:2]
                )
                and torch.equal(ours[mask_key][r], their_mask_of[r])
                for r in range(n_rows)
            )
            result[f"{half}_padded"] = all(torch.equal(ours[key], value) for key, value in keys)
        # CODI distils at its answer position - 1 (the marker's last token), in the decoder and in the teacher.
        student_at = width + n_latent + theirs["model_answer_position"] - 1
        teacher_at = theirs["ref_answer_position"] - 1
        result["positions"] = int(
            ((ours["answer_positions"] == student_at) & (ours["teacher_answer_positions"] == teacher_at)).sum()
        )
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coconut", type=Path, required=True, help="a checkout of facebookresearch/coconut")
    parser.add_argument("--codi", type=Path, required=True, help="a checkout of zhenyi4/codi")
    parser.add_argument("--prosqa-rows", type=int, default=16, help="first rows of Coconut's prosqa_valid.json")
    args = parser.parse_args()
    for flag, path, needed in (("--coconut", args.coconut, "dataset.py"), ("--codi", args.codi, "train.py")):
        if not (path / needed).is_file():
            sys.exit(f"error: {flag} {str(path)!r} has no {needed}; give a checkout of the repository.")
    work = Path(tempfile.mkdtemp())
    prosqa = json.loads((args.coconut / "data" / "prosqa_valid.json").read_text())[: args.prosqa_rows]
    files = {"prosqa": work / "prosqa" / "prosqa_valid.json", "gsm": work / "gsm" / "gsm_valid.json"}
    for name, rows in (("prosqa", prosqa), ("gsm", GSM_ROWS)):
        files[name].parent.mkdir()
        files[name].write_text(json.dumps(rows))
    codi_files = {"aug": work / "gsm8k_aug" / "gsm8k_aug_train.json", "nl": work / "gsm8k_aug_nl" / "nl_train.json"}
    for key, rows in CODI_ROW_SETS.items():
        codi_files[key].parent.mkdir()
        codi_files[key].write_text(json.dumps(rows))
    folder = work / "gpt2-bpe"  # CODI picks LoRA modules by the model's name: it must say gpt2
    tokenizer = bpe_tokenizer(corpus(prosqa), folder)
    tokenizer.pad_token = tokenizer.eos_token  # Coconut's run.py
    print("| Coconut setting | stage | rows equal (real tokens) | padded batch equal |\n|---|---|---|---|")
    for result in coconut_table(args.coconut, tokenizer, files):
        print(f"| {result['setting']} | {result['stage']} | {result['equal']}/{result['rows']} | {result['padded']} |")
    from transformers import AutoTokenizer

    codi_tokenizer = AutoTokenizer.from_pretrained(folder)
    codi_tokenizer.add_special_tokens({"pad_token": "[PAD]"})  # CODI's train.py, for GPT-2
    print(
        "\n| CODI setting | rows theirs / ours | student equal | teacher equal | distillation positions equal | "
        "padded student / teacher equal |\n|---|---|---|---|---|---|"
    )
    for result in codi_table(args.codi, codi_tokenizer, folder, codi_files):
        n = result["theirs"]
        print(
            f"| {result['setting']} | {n} / {result['ours']} | {result['student']}/{n} | {result['teacher']}/{n} | "
            f"{result['positions']}/{n} | {result['student_padded']} / {result['teacher_padded']} |"
        )


if __name__ == "__main__":
    main()
