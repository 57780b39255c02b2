"""Tokenizers for ICoT: word-level tokenizers built from task data, and pretrained BPE tokenizers made ready.

Task data writes tokens separated by single spaces, so a word-level tokenizer (one id per space-separated word)
represents it exactly; :func:`build_word_level_tokenizer` builds one deterministically from the data. Pretrained
tokenizers such as GPT-2's only need a pad token and, for some curricula, the placeholder and length-hint tokens:
:func:`prepare_tokenizer_for_icot`. :func:`check_tokenizer_covers` finds data a tokenizer would turn into unknowns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import datasets
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from hf_icot.cot import ANSWER_PREFIX, PLACEHOLDER_TOKEN, hint_token
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.row_checks import arrow_table, column_words

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"


def _sources(source: Any) -> Iterator[Any]:
    """Whole ``datasets.Dataset`` splits and single examples from a Dataset, a DatasetDict (every split), an iterable
    of examples, or a list of any of these."""
    if isinstance(source, Mapping) and "question" in source:
        yield source
    elif isinstance(source, (datasets.DatasetDict, Mapping)):
        for split in source.values():
            yield from _sources(split)
    elif isinstance(source, datasets.Dataset):
        yield source
    else:
        for item in source:
            if isinstance(item, Mapping) and "question" in item:
                yield item
            else:
                yield from _sources(item)


def _iter_examples(source: Any) -> Iterator[Mapping[str, Any]]:
    """Examples from a Dataset, a DatasetDict (every split), an iterable of examples, or a list of any of these."""
    for item in _sources(source):
        yield from item if isinstance(item, datasets.Dataset) else (item,)


def _texts(example: Mapping[str, Any]) -> Iterator[str]:
    yield example["question"]
    yield from example["cot"]
    yield example["answer"]


def _icot_special_words(max_hint_length: int) -> list[str]:
    if max_hint_length < 0:
        raise ValueError(f"max_hint_length {max_hint_length} is not allowed; it must be >= 0 (0: no hint tokens).")
    hints = [hint_token(n) for n in range(max_hint_length + 1)] if max_hint_length > 0 else []
    return [PLACEHOLDER_TOKEN] + hints


def build_word_level_tokenizer(
    examples_or_datasets: Any, max_hint_length: int = 0, extra_tokens: Iterable[str] = ()
) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose vocabulary is every space-separated word of the data.

    Args:
        examples_or_datasets: a ``datasets.Dataset``, a ``DatasetDict`` (all splits are read), an iterable of schema
            examples, or a list of any of these. Build it from every split you will evaluate on, or OOD words become
            unknowns.
        max_hint_length: if > 0, add the length-hint tokens ``<len_0>`` … ``<len_{max_hint_length}>``.
        extra_tokens: further words to include.

    Returns:
        A ``PreTrainedTokenizerFast`` (WordLevel model, whitespace split) with ``<pad>``, ``<eos>``, ``<unk>``, the
        placeholder token, the hint tokens, then the sorted words and ``####``; ids are the same for the same data.
        ``save_pretrained`` it and reload with ``AutoTokenizer.from_pretrained``.

    Raises:
        ValueError: a negative ``max_hint_length``, or no examples.
    """
    words: set[str] = {ANSWER_PREFIX, *extra_tokens}
    n_examples = 0
    for source in _sources(examples_or_datasets):
        if isinstance(source, datasets.Dataset):  # whole Arrow columns: a split of millions of rows reads in seconds
            n_examples += len(source)
            if len(source):
                table = arrow_table(source)
                words.update(*(column_words(table, column) for column in ("question", "cot", "answer")))
        else:
            n_examples += 1
            for text in _texts(source):
                words.update(text.split())
    if n_examples == 0:
        raise ValueError("build_word_level_tokenizer got no examples; pass the task's dataset or a list of examples.")
    specials = [PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, *_icot_special_words(max_hint_length)]
    vocab = {token: i for i, token in enumerate(specials)}
    for word in sorted(words - set(specials)):
        vocab[word] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN, unk_token=UNK_TOKEN
    )


def prepare_tokenizer_for_icot(
    tokenizer: Any, model: Any = None, max_hint_length: int = 0, use_placeholder: bool = False, latent: bool = False
) -> Any:
    """Make a pretrained tokenizer (e.g. GPT-2's BPE) ready for ICoT, in place, and return it.

    Sets the pad token to eos when there is none (padding is masked, so sharing the id is safe), adds the placeholder
    token (``use_placeholder``, for ``fill="pad"`` curricula), the hint tokens ``<len_0>`` … (``max_hint_length``
    > 0, for mixtures with hints) and the latent markers (``latent``, for Coconut and CODI:
    :data:`hf_icot.curriculum.layout.LATENT_TOKENS`) as special tokens so BPE never splits them, and, when ``model``
    is given, resizes its input embeddings to the new vocabulary size (transformers starts the new rows at the mean
    embedding).

    Raises:
        ValueError: a tokenizer without an eos token, or a negative ``max_hint_length``.
    """
    if tokenizer.eos_token is None:
        raise ValueError(
            "the tokenizer has no eos token, which hf_icot puts between question, CoT and answer; set its eos_token "
            "(e.g. tokenizer.eos_token = '<|endoftext|>') and save it again."
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    wanted = _icot_special_words(max_hint_length)
    if not use_placeholder:
        wanted.remove(PLACEHOLDER_TOKEN)
    if latent:
        wanted += list(LATENT_TOKENS)
    vocab = tokenizer.get_vocab()
    missing = [token for token in wanted if token not in vocab]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)
    if model is not None and model.get_input_embeddings().weight.shape[0] < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    return tokenizer


def first_unrepresentable_word(text: str, tokenizer: Any) -> str | None:
    """The first space-separated word of ``text`` that ``tokenizer`` maps to its unknown token or to nothing."""
    unk = tokenizer.unk_token_id
    for word in text.split():
        ids = tokenizer(" " + word, add_special_tokens=False)["input_ids"]
        if not ids or (unk is not None and unk in ids and word != tokenizer.unk_token):
            return word
    return None


def check_tokenizer_covers(tokenizer: Any, examples: Any) -> None:
    """Check that ``tokenizer`` represents every word of ``examples`` (any source :func:`build_word_level_tokenizer`
    accepts) and the ``####`` marker.

    Raises:
        ValueError: naming the first word that maps to the unknown token or to nothing, and its example index.
    """
    known: dict[str, bool] = {}

    def represents(word: str) -> bool:
        if word not in known:
            known[word] = first_unrepresentable_word(word, tokenizer) is None
        return known[word]

    if not represents(ANSWER_PREFIX):
        raise ValueError(
            f"the tokenizer cannot represent the answer marker {ANSWER_PREFIX!r}; add it to the tokenizer."
        )
    for index, example in enumerate(_iter_examples(examples)):
        for text in _texts(example):
            for word in text.split():
                if not represents(word):
                    raise ValueError(
                        f"example {index} has the word {word!r}, which the tokenizer maps to its unknown token or to "
                        "nothing; build the tokenizer from every split (hf_icot.data.tokenization.build_word_level_tokenizer)"
                        " or add the word to it."
                    )
