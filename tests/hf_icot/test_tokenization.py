"""Word-level tokenizers built from data, BPE tokenizers prepared for ICoT, and coverage checks."""

import pytest
from transformers import AutoTokenizer

from hf_icot.cot import PLACEHOLDER_TOKEN, hint_token
from hf_icot.data.tokenization import build_word_level_tokenizer, check_tokenizer_covers, prepare_tokenizer_for_icot
from tests.hf_icot.tiny_task import counting_examples, tiny_bpe_tokenizer, tiny_gpt2

EXAMPLES = [
    {"question": "3 1 * 2 7", "cot": ["6 2 + 1 4 7", "( 6 3 8 )"], "answer": "6 3 8 0"},
    {"question": "x y", "cot": [], "answer": "z"},
]


def test_word_level_vocabulary_is_every_word_plus_specials(tmp_path):
    tokenizer = build_word_level_tokenizer(EXAMPLES, max_hint_length=3, extra_tokens=["extra"])
    vocab = tokenizer.get_vocab()
    words = {w for ex in EXAMPLES for text in [ex["question"], *ex["cot"], ex["answer"]] for w in text.split()}
    specials = {"<pad>", "<eos>", "<unk>", PLACEHOLDER_TOKEN, *(hint_token(n) for n in range(4))}
    assert set(vocab) == words | specials | {"####", "extra"}
    assert tokenizer.eos_token == "<eos>" and tokenizer.pad_token == "<pad>" and tokenizer.unk_token == "<unk>"
    # Deterministic: the same data in another order gives the same ids.
    assert build_word_level_tokenizer(EXAMPLES[::-1], max_hint_length=3, extra_tokens=["extra"]).get_vocab() == vocab
    # Saved and reloaded through the Auto class, it encodes the same way, with no unknowns.
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    text = " 3 1 * 2 7 <eos> 6 2 + 1 4 7 ( 6 3 8 ) <eos> #### 6 3 8 0 <eos>"
    ids = reloaded(text, add_special_tokens=False)["input_ids"]
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert reloaded.unk_token_id not in ids and len(ids) == len(text.split())
    assert reloaded.decode(ids) == text.strip()


def test_word_level_from_dataset_dict_without_hints():
    train, test = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer({"train": train, "test": test})
    assert hint_token(0) not in tokenizer.get_vocab() and PLACEHOLDER_TOKEN in tokenizer.get_vocab()
    assert set(tokenizer.get_vocab()) >= {"a", "b", "0", "4", "####"}
    with pytest.raises(ValueError, match="got no examples"):
        build_word_level_tokenizer([])
    with pytest.raises(ValueError, match="max_hint_length -1 is not allowed"):
        build_word_level_tokenizer(EXAMPLES, max_hint_length=-1)


def test_check_tokenizer_covers_names_the_first_unknown_word_and_example():
    tokenizer = build_word_level_tokenizer(EXAMPLES[:1])
    check_tokenizer_covers(tokenizer, EXAMPLES[:1])
    with pytest.raises(ValueError, match=r"example 1 has the word 'x'.*build the tokenizer from every split"):
        check_tokenizer_covers(tokenizer, EXAMPLES)


def test_prepare_bpe_tokenizer_adds_only_what_is_needed_and_resizes(tmp_path):
    tokenizer = tiny_bpe_tokenizer([" ".join(ex["cot"]) + " #### 1 2" for ex in EXAMPLES] * 5, tmp_path / "bpe")
    assert tokenizer.pad_token is None
    size = len(tokenizer)
    prepare_tokenizer_for_icot(tokenizer)
    assert tokenizer.pad_token == tokenizer.eos_token and len(tokenizer) == size
    model = tiny_gpt2(size, tmp_path / "model", n_layer=1, n_embd=32)
    prepare_tokenizer_for_icot(tokenizer, model, max_hint_length=2, use_placeholder=True)
    added = [PLACEHOLDER_TOKEN, hint_token(0), hint_token(1), hint_token(2)]
    assert len(tokenizer) == size + 4
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    for token in added:  # each is one id that BPE never splits
        assert tokenizer.convert_tokens_to_ids(token) >= size
        assert tokenizer.tokenize(token) == [token]
    prepare_tokenizer_for_icot(tokenizer, model, max_hint_length=2, use_placeholder=True)
    assert len(tokenizer) == size + 4  # idempotent
    # Byte-level BPE represents any word.
    check_tokenizer_covers(tokenizer, [{"question": "unseen ωords", "cot": ["9 9"], "answer": "7"}])


def test_a_word_level_tokenizer_built_from_a_dataset_reads_its_arrow_columns_as_the_rows_do():
    import datasets

    from hf_icot.data.tokenization import _iter_examples

    rows = [*EXAMPLES, {"question": " padded  twice ", "cot": [], "answer": "x"}]
    dataset = datasets.Dataset.from_list(rows).select([2, 0, 1])  # an index mapping: what a shuffle leaves
    from_rows = build_word_level_tokenizer(rows)
    assert build_word_level_tokenizer(dataset).get_vocab() == from_rows.get_vocab()
    assert "" not in from_rows.get_vocab()  # Arrow's split keeps an empty word at an edge space; the vocabulary not
    assert [row["question"] for row in _iter_examples(dataset)] == [
        rows[2]["question"],
        rows[0]["question"],
        rows[1]["question"],
    ]


def test_word_level_ids_by_lookup_are_the_tokenizers_own(tmp_path):
    from hf_icot.data.encoding import encode_texts

    tokenizer = build_word_level_tokenizer(EXAMPLES, max_hint_length=2)
    texts = ["3 1 * 2 7", "3  1", "3\t1", " 3 1 ", "3 1 zzz", "é 3", "", f"{PLACEHOLDER_TOKEN} 3 {hint_token(1)}"]
    expected = tokenizer([" " + text for text in texts], add_special_tokens=False)["input_ids"]
    assert encode_texts(texts, tokenizer) == expected
    bpe = tiny_bpe_tokenizer(texts[:2], tmp_path)  # no word-level vocabulary: the tokenizer itself
    assert (
        encode_texts(texts[:2], bpe) == bpe([" " + text for text in texts[:2]], add_special_tokens=False)["input_ids"]
    )


def rows_prepared(collator, data):
    """The prepared columns the row-by-row path gives (what prepare_dataset did before whole-column look-ups)."""
    return data.map(collator._tokenize_rows, batched=True, with_indices=True, remove_columns=data.column_names)


@pytest.mark.parametrize("batch", [1000, 7])
def test_whole_column_lookups_prepare_what_the_rows_do(batch, monkeypatch):
    import datasets

    from hf_icot.cot import example_features
    from hf_icot.data.collator import ICoTCollator

    rows = [
        *EXAMPLES,
        {"question": "x  y", "cot": ["z"], "answer": "z"},  # double space: the tokenizer decides
        {"question": "x\ty", "cot": ["6 2", "6 2", ""], "answer": "6 3 8 0"},  # a tab; a repeated and an empty step
        {"question": " x y ", "cot": ["( 6"], "answer": "x"},  # outer spaces
        {"question": "é x", "cot": ["x"], "answer": "é"},  # not ASCII
        {"question": "x <unk> y", "cot": ["x"], "answer": "y"},  # the unknown token's own word
    ]
    tokenizer = build_word_level_tokenizer(rows)
    collator = ICoTCollator(tokenizer)
    monkeypatch.setattr(datasets.config, "DEFAULT_MAX_BATCH_SIZE", batch)
    plain = datasets.Dataset.from_list(rows[:2] * 20 + [rows[0]], features=example_features())
    for data in [plain, datasets.Dataset.from_list(rows, features=example_features())]:
        if "<unk>" in data["question"][-1]:
            with pytest.raises(
                ValueError,
                match=r"example 6: the tokenizer cannot represent 'x <unk> y': it holds the unknown token '<unk>' itself",
            ):
                collator.prepare_dataset(data)
            data = data.select(range(len(data) - 1))
        prepared = collator.prepare_dataset(data)[0]
        expected = rows_prepared(collator, data)
        assert prepared.column_names == data.column_names + expected.column_names
        assert prepared.select_columns(expected.column_names)[:] == expected[:]
        assert prepared.format["type"] is None and prepared.features["cot_ids"] == datasets.Sequence(
            datasets.Value("int32")
        )
    calls = []
    monkeypatch.setattr(
        collator, "_tokenize_rows", lambda *args: calls.append(1) or ICoTCollator._tokenize_rows(collator, *args)
    )
    collator.prepare_dataset(plain)
    assert not calls  # the plain batches never went row by row
