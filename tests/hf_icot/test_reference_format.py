"""sequence_format="reference": the stepwise-ICoT reference's token ids and positions, re-derived here from its
construction (``' {q} <eos> ' + cot + ' <eos> ' + ans + ' <eos>'`` tokenized whole, tokens sliced out, positions
shifted from the token before the removed ones), compared with the collator on the reference's own files."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from hf_icot.cot import TruncationSpec, parse_line
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.encoding import encode_prompt, reference_answer
from tests.anchor_data import ANCHOR, missing_anchor_message
from tests.recipes.conftest import save_tiny_gpt2

FILES = sorted(ANCHOR.glob("*/*.txt"))


def test_anchor_files_are_present():
    assert len(FILES) == 10, missing_anchor_message()


def anchor_lines(path: Path) -> list[str]:
    # The reference keeps the non-empty lines with exactly one '||' (data.py).
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and len(line.split("||")) == 2]


@pytest.fixture(scope="module")
def bpe_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    texts = [line for path in FILES for line in anchor_lines(path)[:200]]
    folder = save_tiny_gpt2(tmp_path_factory.mktemp("bpe"), tokenizer_texts=texts)
    return AutoTokenizer.from_pretrained(folder)


def reference_text(line: str, eos: str) -> str:
    """The reference's training sentence for ``line`` (data.py: extract_answer, extract_cot, the format string)."""
    src, tgt = line.split("||")
    cot, rest = tgt.strip().split("####", 1)
    ans = ("####" + rest).strip().replace(",", "")
    return f" {src} {eos} " + cot.strip() + f" {eos} " + ans + f" {eos}"


def reference_sequence(ids: list[int], eos_id: int, removed: int, side: str) -> tuple[list[int], list[int]]:
    """The reference's input ids and keep_position position ids of the tokenized sentence ``ids`` with ``removed``
    CoT tokens removed (train.py's removal loop)."""
    first, second, last = [i for i, token in enumerate(ids) if token == eos_id][:3]
    if side == "left":
        start, stop = first + 1, min(first + 1 + removed, second)
    else:
        start, stop = max(second - removed, first + 1), second
    out = ids[:start] + ids[stop : last + 1]
    shift = stop - start
    # position_ids[removal_from - 1:] += removed, then cut to the shorter sequence's length.
    positions = [i if i < start - 1 else i + shift for i in range(len(out))]
    return out, positions


def collated(collator: ICoTCollator, prepared, rows: list[int], removed: int, side: str):
    spec = TruncationSpec(unit="token", which=side, count=removed, fill="keep_position", saturate=True)
    examples = [prepared[i] for i in rows]
    batch = collator.render(examples, [spec] * len(examples))
    out = []
    for row in range(len(examples)):
        n = int(batch["attention_mask"][row].sum())
        out.append((batch["input_ids"][row, :n].tolist(), batch["position_ids"][row, :n].tolist()))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_ids_and_positions_on_every_anchor_line(path, bpe_tokenizer):
    lines = anchor_lines(path)
    layout = SequenceLayout(fill="keep_position", sequence_format="reference")
    collator = ICoTCollator(bpe_tokenizer, layout)
    dataset = datasets.Dataset.from_list([parse_line(line) for line in lines])
    prepared, _ = collator.prepare_dataset(dataset, layout=layout)
    lengths = prepared["n_cot_tokens"]
    sentences = bpe_tokenizer([reference_text(line, bpe_tokenizer.eos_token) for line in lines])["input_ids"]
    everyone = list(range(len(lines)))
    # Every line with its full CoT and with all of it removed; every removal count on a spread of lines.
    checks = [(everyone, 0), (everyone, max(lengths))]
    sample = everyone[:: max(1, len(lines) // 4)]
    checks += [(sample, k) for k in range(1, max(lengths[i] for i in sample) + 1)]
    for side in ("left", "right"):
        for rows, removed in checks:
            ours = collated(collator, prepared, rows, removed, side)
            for row, got in zip(rows, ours):
                expected = reference_sequence(sentences[row], bpe_tokenizer.eos_token_id, removed, side)
                assert got == expected, f"{path.name} line {row + 1}, {removed} removed from the {side}"


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_ids_after_every_removal_count_on_every_line(path, bpe_tokenizer):
    lines = anchor_lines(path)
    layout = SequenceLayout(fill="keep_position", sequence_format="reference")
    collator = ICoTCollator(bpe_tokenizer, layout)
    prepared, _ = collator.prepare_dataset(datasets.Dataset.from_list([parse_line(line) for line in lines]))
    sentences = bpe_tokenizer([reference_text(line, bpe_tokenizer.eos_token) for line in lines])["input_ids"]
    for removed in range(max(prepared["n_cot_tokens"]) + 1):
        for row, got in enumerate(collated(collator, prepared, list(range(len(lines))), removed, "left")):
            assert got == reference_sequence(sentences[row], bpe_tokenizer.eos_token_id, removed, "left")


def test_the_reference_cot_counts_the_space_before_its_eos(bpe_tokenizer):
    line = anchor_lines(ANCHOR / "4_by_4_mult" / "valid.txt")[0]
    example = parse_line(line)
    plain = ICoTCollator(bpe_tokenizer).prepare_dataset(datasets.Dataset.from_list([example]))[0][0]
    reference = ICoTCollator(bpe_tokenizer, SequenceLayout(sequence_format="reference"))
    prepared = reference.prepare_dataset(datasets.Dataset.from_list([example]))[0][0]
    assert prepared["n_cot_tokens"] == plain["n_cot_tokens"] + 1
    assert prepared["cot_tokens"][-1].split()[-1] == bpe_tokenizer.tokenize(" ")[0]


def test_reference_prompt_ends_with_the_space_and_the_first_eos(bpe_tokenizer):
    line = anchor_lines(ANCHOR / "4_by_4_mult" / "valid.txt")[0]
    ids = bpe_tokenizer(reference_text(line, bpe_tokenizer.eos_token))["input_ids"]
    first = ids.index(bpe_tokenizer.eos_token_id)
    layout = SequenceLayout(sequence_format="reference")
    assert encode_prompt(parse_line(line)["question"], bpe_tokenizer, "explicit", layout=layout) == ids[: first + 1]


def test_gsm8k_answers_lose_their_commas_as_in_the_reference(bpe_tokenizer):
    example = {"question": "How much?", "cot": ["<<1000+234=1234>>"], "answer": "1,234"}
    layout = SequenceLayout(sequence_format="reference")
    prepared = ICoTCollator(bpe_tokenizer, layout).prepare_dataset(datasets.Dataset.from_list([example]))[0][0]
    assert bpe_tokenizer.decode(prepared["answer_ids"]) == " #### 1234 "
    assert reference_answer("<<a>> #### 1,234 ") == "#### 1234"
    assert reference_answer("no marker, here") == "no marker here"


def test_the_reference_format_needs_a_lone_space_token():
    from hf_icot.data.tokenization import build_word_level_tokenizer

    tokenizer = build_word_level_tokenizer([{"question": "1 2", "cot": ["3"], "answer": "4"}])
    with pytest.raises(ValueError, match="lone space"):
        ICoTCollator(tokenizer, SequenceLayout(sequence_format="reference"))


def test_the_reference_format_starts_with_the_bos_a_tokenizer_adds(bpe_tokenizer, tmp_path):
    from tokenizers import processors
    from transformers import AutoTokenizer

    bpe_tokenizer.save_pretrained(tmp_path)
    with_bos = AutoTokenizer.from_pretrained(tmp_path)
    bos = with_bos.eos_token_id
    with_bos.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", bos)]
    )
    example = {"question": "1 2", "cot": ["3"], "answer": "4"}
    layout = SequenceLayout(sequence_format="reference")
    prepared = ICoTCollator(with_bos, layout).prepare_dataset(datasets.Dataset.from_list([example]))[0][0]
    assert prepared["question_ids"][0] == bos
    assert (
        ICoTCollator(bpe_tokenizer, layout).prepare_dataset(datasets.Dataset.from_list([example]))[0][0][
            "question_ids"
        ][0]
        != bos
    )


def test_generation_prompts_sit_where_the_reference_puts_them(bpe_tokenizer):
    from hf_icot.evaluation.prompts import plan_generation

    line = anchor_lines(ANCHOR / "4_by_4_mult" / "valid.txt")[0]
    example = parse_line(line)
    ids = bpe_tokenizer(reference_text(line, bpe_tokenizer.eos_token))["input_ids"]
    eos = bpe_tokenizer.eos_token_id
    layout = SequenceLayout(fill="keep_position", sequence_format="reference")
    for mode, removed in (("implicit", 10**6), ("reference", 10**6), ("explicit", 0)):
        case = plan_generation(example, bpe_tokenizer, mode, layout)
        full_ids, full_positions = reference_sequence(ids, eos, removed, "left")
        assert case.prompt == full_ids[: len(case.prompt)]
        start, shift = case.position_shift or (len(case.prompt), 0)
        positions = [i + (shift if i >= start else 0) for i in range(len(case.prompt))]
        assert positions == full_positions[: len(case.prompt)], mode
        if mode != "reference":  # which lets the model write its CoT: its token cap counts the full one
            assert case.gold_length == len(full_ids) - len(case.prompt)
