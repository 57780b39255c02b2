"""The latent formats (``latent_format coconut`` / ``codi``, CODI's ``remove_eos``) against expectations written here
from the formats' definitions — Coconut's ``dataset.py`` (its tokenization, ``get_cot_latent_dataset``'s layout and
labels, ``MyCollator``'s padding) and CODI's ``train.py`` / ``test.py`` (student, teacher, positions, prompts) — on a
byte-level BPE; generation prompts, stopping and answers in each format; short runs; bad values in one sentence."""

import pytest
import torch

from hf_icot.curriculum import build_schedule
from hf_icot.curriculum.layout import LATENT_TOKENS, SequenceLayout
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.latent_formats import LatentFormat
from hf_icot.data.tokenization import prepare_tokenizer_for_icot
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.evaluation.prompts import plan_generation
from hf_icot.methods import build_method
from hf_icot.methods.generation import generate_latent
from hf_icot.modeling.labelled_logits import IGNORE_INDEX
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import tiny_bpe_tokenizer, tiny_gpt2

ROWS = [  # GSM8K-like: a double space kept, one to three steps, an answer with a comma
    {"question": "Tom has 3 boxes.  He gets 4 more. How many?", "cot": ["<<3+4=7>>", "<<7*2=14>>", "<<14-1=13>>"],
     "answer": "1,300"},
    {"question": "Half of 10?", "cot": ["<<10/2=5>>"], "answer": "5"},
    {"question": "Sam had 20 and lost 4.", "cot": ["<<20-4=16>>", "<<16+0=16>>"], "answer": "16"},
]  # fmt: skip


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    texts = [f"{r['question']}\n" + "\n".join(r["cot"]) + f"\n### {r['answer']} The answer is: {r['answer']}"
             for r in ROWS] * 3  # fmt: skip
    tokenizer = tiny_bpe_tokenizer(texts, tmp_path_factory.mktemp("bpe"))
    prepare_tokenizer_for_icot(tokenizer, latent=True)
    return tokenizer


def dataset():
    import datasets

    from hf_icot.cot import example_features

    return datasets.Dataset.from_list(ROWS, features=example_features())


def prepared(tokenizer, schedule, options=None):
    collator = ICoTCollator(tokenizer, schedule.layout)
    method = build_method(schedule, options or {})
    method.renderer = method.make_renderer(tokenizer)
    examples = method.prepare_dataset(collator.prepare_dataset(dataset(), layout=schedule.layout)[0], tokenizer)
    view = collator.rendering_view(examples)
    return [view[i] for i in range(len(view))], method


def enc(tokenizer, text, special=False):
    return tokenizer(text, add_special_tokens=special)["input_ids"]


def real(batch, row, key):
    return batch[key][row][batch["attention_mask"][row].bool()].tolist()


# -- Coconut ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("c", "max_stage", "pad"), [(1, 2, True), (2, 2, False), (2, 3, True)])
def test_coconut_format_gives_its_dataset_py_ids_labels_masks_and_padding_at_every_stage(bpe, c, max_stage, pad):
    start, latent, end = bpe.convert_tokens_to_ids(list(LATENT_TOKENS))
    eos = bpe.eos_token_id
    schedule = build_schedule(
        "coconut",
        {"latent_format": "coconut", "c_thought": c, "max_latent_stage": max_stage, "pad_latent_to_max": pad},
    )
    schedule.bind(1)
    examples, method = prepared(bpe, schedule)
    for stage in range(max_stage + 2):
        batch, _ = method.render(examples, stage, True, None)
        rows, firsts = [], []
        for row in ROWS:
            n_steps = len(row["cot"])
            if stage > max_stage:  # every step goes; max stage × c slots (capped by the steps without padding)
                skip, n = n_steps, (max_stage if pad else min(n_steps, max_stage)) * c
            else:
                skip, n = stage, stage * c
            question = enc(bpe, row["question"] + "\n", special=True)
            ids = question + [start] + [latent] * n + [end]
            ids += [t for step in row["cot"][skip:] for t in enc(bpe, step + "\n")] + enc(bpe, "### " + row["answer"])
            ids += [eos]
            rows.append((ids, [IGNORE_INDEX] * (len(question) + n + 2) + ids[len(question) + n + 2 :]))
            firsts.append(len(question) + 1 if n else None)  # the first latent slot (None: no slot)
        # MyCollator: rows with a slot left-padded so their first slots share a column, then right padding.
        aligned = max((f for f in firsts if f is not None), default=0)
        offsets = [0 if f is None else aligned - f for f in firsts]
        width = max(o + len(ids) for o, (ids, _) in zip(offsets, rows))
        for r, ((ids, labels), offset) in enumerate(zip(rows, offsets)):
            pad_right = width - offset - len(ids)
            assert batch["input_ids"][r].tolist() == [eos] * offset + ids + [eos] * pad_right, (stage, r)
            assert batch["labels"][r].tolist() == [IGNORE_INDEX] * offset + labels + [IGNORE_INDEX] * pad_right
            assert batch["attention_mask"][r].tolist() == [0] * offset + [1] * len(ids) + [0] * pad_right
            assert batch["position_ids"][r].tolist() == [0] * offset + list(range(len(ids))) + [0] * pad_right


def test_coconut_prompts_stop_at_one_eos_and_read_the_answer_after_its_last_hash(bpe):
    start, latent, end = bpe.convert_tokens_to_ids(list(LATENT_TOKENS))
    schedule = build_schedule("coconut", {"latent_format": "coconut", "c_thought": 2, "max_latent_stage": 2})
    schedule.bind(1)
    layout = schedule.layout_at(1)  # stage 1: one step as 2 thoughts, the model writes the rest
    case = plan_generation(ROWS[0], bpe, "latent", layout)
    assert case.prompt == enc(bpe, ROWS[0]["question"] + "\n", special=True) + [start, latent, latent, end]
    written = [t for step in ROWS[0]["cot"][1:] for t in enc(bpe, step + "\n")] + enc(bpe, "### 1,300")
    assert case.gold_length == len(written) + 1 and case.gold_cot == "<<7*2=14>> <<14-1=13>>"
    fmt = LatentFormat.of(bpe, layout)
    assert fmt.eos_to_write == 1 and fmt.never_generated is None
    assert fmt.read(written + [bpe.eos_token_id, 5, 6]) == ("<<7*2=14>> <<14-1=13>>", "1300")
    assert fmt.gold_answer("1,300") == "1300" and fmt.read(enc(bpe, "<<3+4=7>>\n")) == ("<<3+4=7>>", "")


# -- CODI -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("remove_eos", [False, True])
def test_codi_format_gives_its_train_py_student_teacher_labels_and_positions(bpe, remove_eos):
    start, latent, end = bpe.convert_tokens_to_ids(list(LATENT_TOKENS))
    eos = bpe.eos_token_id
    schedule = build_schedule("codi", {"latent_format": "codi", "remove_eos": remove_eos, "num_latent": 3})
    examples, method = prepared(bpe, schedule)
    assert all("teacher_cot_ids" in example and "question" not in example for example in examples)
    batch, _ = method.render(examples, 0, True, None)
    separator = [] if remove_eos else [eos]
    marker = enc(bpe, "The answer is:")
    for r, row in enumerate(ROWS):
        question, answer = enc(bpe, row["question"], special=True), enc(bpe, "The answer is: " + row["answer"])
        assert answer[: len(marker)] == marker
        # Student: question [eos] bot, 3 thoughts, eot [eos] answer eos, labelled after eot.
        student = question + separator + [start] + [latent] * 3 + [end] + separator + answer + [eos]
        first = len(question) + len(separator) + 5
        assert real(batch, r, "input_ids") == student
        assert real(batch, r, "labels") == [IGNORE_INDEX] * first + student[first:]
        # Distilled at the marker's last token (CODI's answer position - 1).
        offset = batch["input_ids"][r].tolist().index(start) - len(question) - len(separator)
        assert int(batch["answer_positions"][r]) == offset + first + len(separator) + len(marker) - 1
        # Teacher: question [eos] CoT without its last step, joined by spaces and tokenized whole, [eos] answer eos.
        cot = enc(bpe, " ".join(row["cot"][:-1]))
        teacher = question + separator + cot + separator + answer + [eos]
        mask = batch["teacher_attention_mask"][r].bool()
        assert batch["teacher_input_ids"][r][mask].tolist() == teacher
        labels_from = len(question) + len(separator)
        assert batch["teacher_labels"][r][mask].tolist() == [IGNORE_INDEX] * labels_from + teacher[labels_from:]
        answer_at = len(teacher) - 1 - len(answer) + len(marker) - 1
        assert int(batch["teacher_answer_positions"][r]) == answer_at
    # Every row's <bot> in one column (its left-padded questions).
    assert (batch["input_ids"] == start).nonzero()[:, 1].unique().numel() == 1


def test_codi_cot_sentences_joins_the_teacher_as_its_natural_language_branch(bpe):
    """GSM8k-Aug-NL (CODI's icot-full): the kept sentences joined by '. ' and closed by '.\\n'; no kept step, no text."""
    schedule = build_schedule("codi", {"latent_format": "codi", "remove_eos": True, "num_latent": 3})
    examples, method = prepared(bpe, schedule, {"cot_sentences": True})
    expected = [enc(bpe, ". ".join(row["cot"][:-1]) + ".\n") if row["cot"][:-1] else [] for row in ROWS]
    assert [list(example["teacher_cot_ids"]) for example in examples] == expected
    spaced, _ = prepared(bpe, schedule)
    assert list(spaced[0]["teacher_cot_ids"]) == enc(bpe, " ".join(ROWS[0]["cot"][:-1])) != expected[0]


@pytest.mark.parametrize("remove_eos", [False, True])
def test_codi_prompts_are_its_test_py_and_never_write_eot(bpe, remove_eos):
    start, latent, end = bpe.convert_tokens_to_ids(list(LATENT_TOKENS))
    eos = bpe.eos_token_id
    layout = build_schedule("codi", {"latent_format": "codi", "remove_eos": remove_eos, "num_latent": 2}).layout
    case = plan_generation(ROWS[0], bpe, "latent", layout)
    separator = [] if remove_eos else [eos]
    question = enc(bpe, ROWS[0]["question"].strip().replace("  ", " "), special=True)  # test.py's question
    assert case.prompt == question + separator + [start, latent, latent, end] + separator
    assert case.gold_length == len(enc(bpe, "The answer is: 1,300")) + 1
    fmt = LatentFormat.of(bpe, layout)
    assert fmt.eos_to_write == 1 and fmt.never_generated == end
    assert fmt.read(enc(bpe, "The answer is: 13") + [eos]) == ("", "13") and fmt.read(enc(bpe, "13")) == ("13", "")


def test_codi_format_without_the_teacher_column_is_refused(bpe):
    schedule = build_schedule("codi", {"latent_format": "codi"})
    collator = ICoTCollator(bpe, schedule.layout)
    method = build_method(schedule, {})
    method.renderer = method.make_renderer(bpe)
    examples, _ = collator.prepare_dataset(dataset(), layout=schedule.layout)
    with pytest.raises(ValueError, match="^CODI's format needs each example's teacher_cot_ids; prepare the dataset"):
        method.render([examples[0]], 0, True, None)


# -- generation, runs, options ------------------------------------------------------------------------------------


def test_latent_generation_stops_at_the_formats_eos_and_never_writes_the_banned_token(tmp_path):
    lm = tiny_gpt2(12, tmp_path / "m", n_layer=1, n_embd=16)
    lm.lm_head.weight = torch.nn.Parameter(torch.zeros(12, 16))  # every logit 0: greedy picks the first id left
    prompt = [[3, 4, 9, 9, 5]]
    assert generate_latent(lm, prompt, 9, eos_id=0, pad_id=0, max_new_tokens=5, eos_to_write=1) == [[0]]
    assert generate_latent(lm, prompt, 9, eos_id=0, pad_id=0, max_new_tokens=5) == [[0, 0]]
    assert generate_latent(lm, prompt, 9, eos_id=1, pad_id=0, max_new_tokens=3, never_generated=0) == [[1, 1]]


@pytest.mark.parametrize(
    ("schedule", "options"),
    [("coconut", {"latent_format": "coconut", "c_thought": 1}), ("codi", {"latent_format": "codi", "remove_eos": True,
                                                                        "num_latent": 2})],
)  # fmt: skip
def test_a_run_in_a_methods_format_trains_and_answers_in_it(bpe, tmp_path, schedule, options):
    torch.set_num_threads(1)
    model = tiny_gpt2(len(bpe), tmp_path / "init", n_layer=1, n_embd=32, n_positions=128)
    args = ICoTConfig(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=3, max_steps=3, learning_rate=3e-3,
        report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True, logging_steps=1,
        schedule=schedule, **options,
    )  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset(), processing_class=bpe)
    assert trainer.layout.latent_format == options["latent_format"]
    if schedule == "codi":
        assert "teacher_cot_ids" in trainer.train_dataset.column_names
    trainer.train()
    assert any("loss" in entry for entry in trainer.state.log_history)
    metrics, predictions = evaluate_generation(
        trainer.model, bpe, dataset(), modes=["latent"], layout=trainer.layout, max_new_tokens=12,
        return_predictions=True,
    )  # fmt: skip
    fmt = LatentFormat.of(bpe, trainer.layout)
    for row in predictions["latent"]:  # one <eos> closes an answer in both formats, read by the format
        ids = row["generated_ids"]
        assert ids.count(bpe.eos_token_id) <= 1 and row["generated_answer"] == fmt.read(ids)[1]
    assert 0.0 <= metrics["latent/answer_em"] <= 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "coconut", "latent_format": "codi"},
         "latent_format 'codi' is not allowed for coconut; choose one of hf_icot, coconut."),
        ({"schedule": "codi", "latent_format": "tsv"},
         "latent_format 'tsv' is not allowed for codi; choose one of hf_icot, codi."),
        ({"schedule": "codi", "remove_eos": True},
         "remove_eos true is CODI's format's option; it applies with latent_format 'codi', not 'hf_icot'."),
        ({"schedule": "codi", "cot_sentences": True},
         "cot_sentences true is CODI's format's option; it applies with latent_format 'codi', not 'hf_icot'."),
    ],
)  # fmt: skip
def test_bad_format_options_are_one_sentence_when_the_config_is_built(tmp_path, options, message):
    with pytest.raises(ValueError) as raised:
        ICoTConfig(output_dir=str(tmp_path / "run"), report_to="none", **options)
    assert str(raised.value) == message


def test_format_options_are_derived_for_the_command_line():
    from hf_icot.training.config import ScheduleArguments

    fields = {f.name: f for f in __import__("dataclasses").fields(ScheduleArguments)}
    assert fields["latent_format"].metadata["choices"] == ["hf_icot", "coconut", "codi"]
    assert fields["latent_format"].default == "hf_icot" and fields["remove_eos"].default is False
    with pytest.raises(ValueError, match="^latent_format 'coconut' lays out continuous-thought sequences"):
        SequenceLayout(latent_format="coconut")


def test_codi_distils_one_token_later_for_a_model_named_llama_or_qwen(bpe):
    import copy

    answer = LatentFormat(bpe, "codi").answer_ids(["13"])[0]
    marker = enc(bpe, "The answer is:")
    assert LatentFormat(bpe, "codi").answer_offset(answer) == len(marker) - 1
    named = copy.deepcopy(bpe)
    named.name_or_path = "meta-llama/Llama-3.2-1B-Instruct"  # CODI adds one to the position by the model's name
    assert LatentFormat(named, "codi").answer_offset(answer) == len(marker)
