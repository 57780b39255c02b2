"""Batches for :class:`hf_icot.training.trainer.ICoTTrainer`: examples collated untruncated, then rendered — truncated,
encoded (:mod:`hf_icot.data.encoding`) and padded — at the exact optimizer step the curriculum decides for."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from hf_icot.cot import ANSWER_PREFIX, PLACEHOLDER_TOKEN, TruncatedCoT, TruncationSpec, tokenize_steps, truncate
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.encoding import (
    checked_ids,
    decode_words,
    encode_example_with,
    encode_parts,
    encode_text,
    encode_texts,
    eos_id,
    space_tokens,
    token_id,
    whitespace_vocabulary,
)
from hf_icot.data.latent_formats import LatentFormat
from hf_icot.data.rendering import ID_CUTS, render_on_ids, right_padded
from hf_icot.data.row_checks import arrow_table
from hf_icot.data.word_pieces import WordPieces, columns_by_words, splits_at_spaces


@dataclass
class PendingExamples:
    """Examples collated but not yet truncated: the trainer picks their truncation at the exact optimizer step.

    Not a list or mapping on purpose, so that ``accelerate`` and the Trainer pass it through untouched.
    """

    examples: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.examples)


class ICoTCollator:
    """Collates schema examples for :class:`hf_icot.training.trainer.ICoTTrainer`, in two phases.

    The Trainer fetches batches ahead of the step they are used in (gradient-accumulation prefetch, accelerate's
    one-batch lookahead), so a collator cannot know the global step — and hence the curriculum — when it runs.
    ``__call__`` therefore only groups the examples (``{"example_id": LongTensor, "pending": PendingExamples}``);
    the trainer decides one :class:`~hf_icot.cot.TruncationSpec` per example at ``trainer.state.global_step`` and
    calls :meth:`render`, which truncates (:func:`hf_icot.cot.truncate`), encodes (:func:`encode_example`) and pads.

    :meth:`prepare_dataset` adds an ``example_id`` column (the row index, which keys per-example randomness) and the
    question, answer and CoT tokenizations, so that rendering never re-tokenizes text in the training loop.

    Args:
        tokenizer: the model's tokenizer (word-level from :mod:`hf_icot.data.tokenization`, or a prepared BPE
        tokenizer). layout: the run's layout (:attr:`hf_icot.training.trainer.ICoTTrainer.layout`); its
        ``sequence_format`` decides how
            examples become ids. Default: the ``hf_icot`` format.
    """

    def __init__(self, tokenizer: Any, layout: SequenceLayout | None = None) -> None:
        self.tokenizer = tokenizer
        self.layout = layout or SequenceLayout()
        if self.layout.is_reference:
            space_tokens(tokenizer)  # fail here, not at the first example
        self.eos_id = eos_id(tokenizer)  # looked up once: tokenizer properties are slow in the training loop
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        placeholder = tokenizer.convert_tokens_to_ids(PLACEHOLDER_TOKEN)
        # None when the tokenizer lacks it: the example path then raises the error that names the token.
        self.placeholder_id = None if placeholder in (None, tokenizer.unk_token_id) else placeholder
        # Coconut's or CODI's own ids (hf_icot.data.latent_formats); None: this toolkit's tokenization below.
        self.latent_format = None
        if self.layout.latent and self.layout.latent_format != "hf_icot":
            self.latent_format = LatentFormat.of(tokenizer, self.layout)
        # Answers are found after the marker: a tokenizer that loses it trains on sequences evaluation cannot read
        # (transformers swaps in its own class for some model types whatever tokenizer_config.json names).
        try:
            kept = decode_words(encode_text(ANSWER_PREFIX, tokenizer), tokenizer)
        except ValueError:  # it maps the marker to the unknown token or to nothing
            kept = ""
        if kept != ANSWER_PREFIX:
            raise ValueError(
                f"the tokenizer ({type(tokenizer).__name__}) does not keep the answer marker {ANSWER_PREFIX!r}: it "
                f"comes back as {kept!r}; use a tokenizer that represents it (AutoTokenizer may have loaded another "
                "class than the one saved)."
            )

    # -- preparation ---------------------------------------------------------------------------------------------

    def _tokenize_rows(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        tokenizer = self.tokenizer
        ids = batch["example_id"] if "example_id" in batch else indices
        out: dict[str, list] = {"example_id": list(ids), "question_ids": [], "answer_ids": [], "cot_tokens": []}
        out["cot_ids"] = []
        out["n_cot_tokens"], out["n_cot_steps"], out["length"] = [], [], []
        # The hf_icot format tokenizes the parts apart: questions in one batched call, and each distinct step and
        # answer once (a task repeats the same few), which is what encode_parts gives row by row.
        fast = not self.layout.is_reference
        questions = encode_texts(batch["question"], tokenizer) if fast else None
        unk = tokenizer.unk_token_id
        steps_seen: dict[str, tuple[str, list[int]]] = {}
        answers_seen: dict[str, list[int]] = {}
        for row, (index, question, steps, answer) in enumerate(
            zip(ids, batch["question"], batch["cot"], batch["answer"])
        ):
            try:
                if fast:
                    question_ids = checked_ids(question, questions[row], tokenizer, unk)
                    encoded = [self._encoded_step(step, steps_seen) for step in steps]
                    if answer not in answers_seen:
                        answers_seen[answer] = encode_text(f"{ANSWER_PREFIX} {answer}", tokenizer)
                    answer_ids = answers_seen[answer]
                else:
                    example = {"question": question, "cot": steps, "answer": answer}
                    question_ids, step_tokens, answer_ids = encode_parts(example, tokenizer, self.layout)
                    for step, tokens in zip(steps, step_tokens):
                        self._check_step(step, tokens)
                    encoded = [(" ".join(tokens), tokenizer.convert_tokens_to_ids(tokens)) for tokens in step_tokens]
            except ValueError as error:
                raise ValueError(f"example {index}: {error}") from None
            cot_ids = [token for _, step_ids in encoded for token in step_ids]
            out["question_ids"].append(question_ids)
            out["answer_ids"].append(answer_ids)
            out["cot_tokens"].append([joined for joined, _ in encoded])
            out["cot_ids"].append(cot_ids)
            out["n_cot_tokens"].append(len(cot_ids))
            out["n_cot_steps"].append(len(steps))
            # two <eos> separators and the final one
            out["length"].append(len(question_ids) + len(cot_ids) + len(answer_ids) + 3)
        return out

    def _tokenize_table(self, table: pa.Table, indices: list[int]) -> pa.Table:
        """:meth:`_tokenize_rows` on an Arrow batch, with the same values: whole columns at once where the tokenizer
        is word-level (:func:`hf_icot.data.encoding.encode_texts`' lookup) and every question is printable ASCII of
        known words with single spaces; question ids by one vocabulary look-up over every word of the batch, each
        distinct CoT step and answer worked out once and taken per row. For a byte-level BPE with GPT-2's split
        (:mod:`hf_icot.data.word_pieces`), in either sequence format, each distinct word is encoded once and every
        text's ids are its words' ids end to end. Any other batch goes row by row (which also raises the errors that
        name an example). A latent format of a method's own goes through its rules
        (:meth:`hf_icot.data.latent_formats.LatentFormat.prepared_columns`)."""
        vectorized = None if self.latent_format is not None else self._columns_by_lookup(table, indices)
        if vectorized is None and self.latent_format is None:
            vectorized = self._columns_by_words(table, indices)
        if vectorized is None:
            out = (self._tokenize_rows if self.latent_format is None else self.latent_format.prepared_columns)(
                table.select(["question", "cot", "answer"]).to_pydict()
                | (
                    {"example_id": table.column("example_id").to_pylist()}
                    if "example_id" in table.column_names
                    else {}
                ),
                indices,
            )
            vectorized = {name: pa.array(values, type=_PREPARED_TYPES[name]) for name, values in out.items()}
        for name, values in vectorized.items():
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(name, values)
        return table

    @functools.cached_property
    def _word_lookup(self) -> tuple[pa.Array, np.ndarray] | None:
        """The word-level vocabulary's words and their ids as arrays, built once for every batch
        :meth:`_columns_by_lookup` prepares; None where whole-column look-ups do not apply."""
        vocabulary = whitespace_vocabulary(self.tokenizer) if not self.layout.is_reference else None
        if vocabulary is None:
            return None
        return pa.array(list(vocabulary), pa.string()), np.array(list(vocabulary.values()), dtype=np.int32)

    def _columns_by_lookup(self, table: pa.Table, indices: list[int]) -> dict[str, pa.Array] | None:
        """The prepared columns of ``table`` by whole-column look-ups, or None where a row needs the tokenizer."""
        vocabulary = self._word_lookup
        question, cot, answer = (table.column(name).combine_chunks() for name in ("question", "cot", "answer"))
        if (
            vocabulary is None
            or question.null_count
            or answer.null_count
            or cot.null_count
            or pc.list_flatten(cot).null_count
        ):
            return None
        if not pc.all(pc.and_(pc.string_is_ascii(question), pc.ascii_is_printable(question))).as_py():
            return None
        words = pc.split_pattern(question, " ")
        known, known_ids = vocabulary
        found = pc.index_in(pc.list_flatten(words), value_set=known)
        unk = self.tokenizer.unk_token_id
        ids = known_ids[found.fill_null(0).to_numpy()]
        if found.null_count or (unk is not None and (ids == unk).any()):
            return None  # an unknown word, an empty one (a double or outer space), or the unknown token itself
        question_ids = pa.ListArray.from_arrays(words.offsets, pa.array(ids, pa.int32()))
        steps = pc.list_flatten(cot)
        distinct = pc.unique(steps)
        seen: dict[str, tuple[str, list[int]]] = {}
        answers = pc.unique(answer)
        try:  # a step or answer the tokenizer cannot represent: the row path names its example
            encoded = [self._encoded_step(step, seen) for step in distinct.to_pylist()]
            answer_texts = [encode_text(f"{ANSWER_PREFIX} {text}", self.tokenizer) for text in answers.to_pylist()]
        except ValueError:
            return None
        which = pc.index_in(steps, value_set=distinct)
        step_ids = pa.array([ids for _, ids in encoded], pa.list_(pa.int32())).take(which)
        step_ends = np.concatenate([[0], np.cumsum(pc.list_value_length(step_ids).to_numpy(zero_copy_only=False))])
        token_offsets = pa.array(step_ends[cot.offsets.to_numpy()], pa.int32())
        cot_ids = pa.ListArray.from_arrays(token_offsets, pc.list_flatten(step_ids))
        cot_tokens = pa.ListArray.from_arrays(cot.offsets, pa.array([joined for joined, _ in encoded]).take(which))
        answer_ids = pa.array(answer_texts, pa.list_(pa.int32())).take(pc.index_in(answer, value_set=answers))
        n_tokens = np.diff(token_offsets.to_numpy())
        lengths = np.diff(words.offsets.to_numpy()) + n_tokens + pc.list_value_length(answer_ids).to_numpy() + 3
        example_id = table.column("example_id") if "example_id" in table.column_names else pa.array(indices)
        return {
            "example_id": example_id.cast(pa.int64()),
            "question_ids": question_ids,
            "answer_ids": answer_ids,
            "cot_tokens": cot_tokens,
            "cot_ids": cot_ids,
            "n_cot_tokens": pa.array(n_tokens, pa.int32()),
            "n_cot_steps": pc.list_value_length(cot).cast(pa.int32()),
            "length": pa.array(lengths, pa.int32()),
        }

    @functools.cached_property
    def _word_pieces(self) -> WordPieces | None:
        """The distinct words' encodings, kept across the batches :meth:`_columns_by_words` prepares; None where the
        tokenizer does not encode words independently (:func:`hf_icot.data.word_pieces.splits_at_spaces`)."""
        return WordPieces(self.tokenizer) if splits_at_spaces(self.tokenizer) else None

    def _columns_by_words(self, table: pa.Table, indices: list[int]) -> dict[str, pa.Array] | None:
        """The prepared columns of ``table`` for a byte-level BPE, each distinct word encoded once; None where a row
        needs the tokenizer (:func:`hf_icot.data.word_pieces.columns_by_words`)."""
        pieces = self._word_pieces
        if pieces is None:
            return None
        return columns_by_words(pieces, self.tokenizer, self.layout.is_reference, table, indices)

    def _encoded_step(self, step: str, seen: dict[str, tuple[str, list[int]]]) -> tuple[str, list[int]]:
        """One CoT step's checked tokens, space-joined, and their ids, worked out once per distinct step (a task
        repeats the same few steps over millions of rows)."""
        if step not in seen:
            tokens = tokenize_steps([step], self.tokenizer)[0]
            self._check_step(step, tokens)
            seen[step] = (" ".join(tokens), self.tokenizer.convert_tokens_to_ids(tokens))
        return seen[step]

    def _check_step(self, step: str, tokens: list[str]) -> None:
        tokenizer = self.tokenizer
        if tokenizer.unk_token is not None and tokenizer.unk_token in tokens:
            encode_text(step, tokenizer)  # raises, naming the word
        if any(len(token.split()) != 1 for token in tokens):
            raise ValueError(
                f"the tokenizer makes a token with whitespace from the CoT step {step!r}; hf_icot needs tokens "
                "without spaces (byte-level BPE, word-level)."
            )

    def prepare_dataset(
        self,
        dataset: datasets.Dataset,
        max_length: int | None = None,
        too_long: str = "error",
        layout: SequenceLayout | None = None,
    ) -> tuple[datasets.Dataset, int]:
        """Add ``example_id`` (kept if present), ``question_ids``, ``answer_ids``, ``cot_tokens`` (each step's tokens,
        space-joined), ``cot_ids`` (their ids, all steps in a row), ``n_cot_tokens``, ``n_cot_steps`` and ``length``
        (the full-CoT sequence's tokens, hint aside:
        what ``train_sampling_strategy="group_by_length"`` groups by); check lengths against the model's context.

        Args:
            dataset: a schema dataset.
            max_length: the model's context; the untruncated sequence (plus the hint) must fit, since
                ``keep_position`` and ``pad`` keep its length.
            too_long: ``"error"`` or ``"skip"`` (drop such examples).
            layout: the curriculum's layout (a length hint adds a token to every sequence); its sequence format must
                be the collator's.

        Returns:
            The prepared dataset and the number of examples skipped.

        Raises:
            ValueError: a missing column, a word the tokenizer cannot represent (naming the example), or under
                ``too_long="error"`` a sequence beyond ``max_length`` (naming the example, its length and the limit).
        """
        missing = [column for column in ("question", "cot", "answer") if column not in dataset.column_names]
        if missing:
            raise ValueError(
                f"the dataset lacks the column(s) {', '.join(missing)}; hf_icot needs question, cot, answer."
            )
        for name in ("sequence_format", "latent_format", "remove_eos"):
            if layout is not None and getattr(layout, name) != getattr(self.layout, name):
                raise ValueError(
                    f"the collator encodes in {name} {getattr(self.layout, name)!r} but the run's layout has "
                    f"{getattr(layout, name)!r}; build the collator with the run's layout "
                    "(ICoTCollator(tokenizer, layout))."
                )
        if too_long not in ("error", "skip"):
            raise ValueError(f"too_long {too_long!r} is not allowed; choose error or skip.")
        if "question_ids" in dataset.column_names:
            prepared = dataset
        else:
            features = dataset.features.copy()
            features.update(datasets.Features.from_arrow_schema(pa.schema(list(_PREPARED_TYPES.items()))))
            prepared = dataset.with_format("arrow").map(
                self._tokenize_table, batched=True, with_indices=True, features=features, desc="hf_icot: tokenizing"
            )
            prepared = prepared.with_format(dataset.format["type"], **dataset.format["format_kwargs"])
        if max_length is None:
            return prepared, 0
        # The <eos> separators and the final one (a latent format's own), and the hint.
        separators = 3 if self.latent_format is None else self.latent_format.separators
        extra = separators + (1 if layout is not None and layout.hint else 0)
        table = arrow_table(prepared)  # whole columns: a Python dict per row costs minutes on millions of rows
        lengths = (
            pc.list_value_length(table.column("question_ids")).to_numpy()
            + table.column("n_cot_tokens").to_numpy()
            + pc.list_value_length(table.column("answer_ids")).to_numpy()
            + extra
        )
        too_long_rows = np.flatnonzero(lengths > max_length).tolist()
        if too_long_rows and too_long == "error":
            row = too_long_rows[0]
            raise ValueError(
                f"example {prepared[row]['example_id']} is {lengths[row]} tokens long with its full CoT, beyond the "
                f"model's context of {max_length}; shorten it, use a longer-context model, or set too_long='skip'."
            )
        if too_long_rows:
            prepared = prepared.select(np.flatnonzero(lengths <= max_length))
        return prepared, len(too_long_rows)

    def rendering_view(self, dataset: datasets.Dataset) -> datasets.Dataset:
        """A prepared ``dataset`` without the question, CoT and answer texts, which rendering never reads once their
        ids and CoT tokens are columns of their own: the training DataLoader then turns fewer Arrow values into
        Python objects per row. An unprepared dataset comes back as it is."""
        if not {"question_ids", "answer_ids", "cot_tokens"} <= set(dataset.column_names):
            return dataset
        return dataset.remove_columns([column for column in _TEXT_COLUMNS if column in dataset.column_names])

    def require_tokens(self, tokens: Sequence[str]) -> None:
        """Check, before training, that the tokenizer has every token a curriculum will insert.

        Raises:
            ValueError: naming the first missing token and how to add it.
        """
        for token in tokens:
            token_id(self.tokenizer, token)

    # -- collation -------------------------------------------------------------------------------------------------

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        """Group examples; truncation and tensors come later, from :meth:`render`."""
        if not features or "example_id" not in features[0]:
            raise ValueError(
                "ICoTCollator needs examples with an example_id; prepare the dataset with prepare_dataset()."
            )
        ids = torch.tensor([feature["example_id"] for feature in features], dtype=torch.long)
        return {"example_id": ids, "pending": PendingExamples(list(features))}

    def truncate_batch(
        self, examples: Sequence[Mapping[str, Any]], specs: Sequence[TruncationSpec]
    ) -> list[TruncatedCoT]:
        """:func:`hf_icot.cot.truncate` each example with its spec (from the prepared CoT tokens when present)."""
        truncated = []
        for example, spec in zip(examples, specs):
            cot_tokens = example.get("cot_tokens")
            if cot_tokens is None:
                cot_tokens = [" ".join(step) for step in encode_parts(example, self.tokenizer, self.layout)[1]]
            # The tokens joined by spaces split back into exactly the tokenizer's tokens.
            truncated.append(truncate({"cot": cot_tokens, "cot_level": example.get("cot_level")}, spec))
        return truncated

    def encode_batch(self, examples: Sequence[Mapping[str, Any]], truncated: Sequence[TruncatedCoT]) -> dict[str, Any]:
        """Encode and right-pad: ``input_ids``, ``attention_mask``, ``labels`` (-100 on question and padding) and,
        when some example keeps positions, ``position_ids``."""
        eos, unk, reference = eos_id(self.tokenizer), self.tokenizer.unk_token_id, self.layout.is_reference
        encoded = [
            encode_example_with(example, cut, self.tokenizer, eos, unk, reference)
            for example, cut in zip(examples, truncated)
        ]
        return right_padded(encoded, self.pad_id, with_positions=any(cut.keep_position for cut in truncated))

    def render(self, examples: Sequence[Mapping[str, Any]], specs: Sequence[TruncationSpec]) -> dict[str, Any]:
        """Truncate each example with its spec and return the padded model batch (see :meth:`encode_batch`)."""
        return self.render_counted(examples, specs)[0]

    def render_counted(
        self, examples: Sequence[Mapping[str, Any]], specs: Sequence[TruncationSpec]
    ) -> tuple[dict[str, Any], list[int]]:
        """:meth:`render`, and the CoT tokens each example kept (placeholders not counted).

        The common curricula (token units, ``left``/``right``/``all``/``none``, any fill, no hint; either sequence
        format; step units and Log-ICoT's ``levels`` too where every step is one token) are cut on the prepared
        ``cot_ids`` with array operations over the whole batch (:func:`hf_icot.data.rendering.render_on_ids`);
        anything else goes example by example through :func:`hf_icot.cot.truncate` and :func:`encode_example`. Both
        give the same tensors.
        """
        if self._on_ids(examples, specs):
            return render_on_ids(
                examples, specs, self.eos_id, self.pad_id, self.layout.is_reference, self.placeholder_id
            )
        truncated = self.truncate_batch(examples, specs)
        return self.encode_batch(examples, truncated), [cut.kept for cut in truncated]

    def _on_ids(self, examples: Sequence[Mapping[str, Any]], specs: Sequence[TruncationSpec]) -> bool:
        """Whether :func:`hf_icot.data.rendering.render_on_ids` can cut this batch (see :meth:`render_counted`)."""
        if not examples or "cot_ids" not in examples[0]:
            return False
        for example, spec in zip(examples, specs):
            if spec.hint or spec.which not in ID_CUTS or (spec.fill == "pad" and self.placeholder_id is None):
                return False
            # A step is a token when every step of the row is one token (a tree CoT's node values, say).
            if spec.unit == "step" and (
                example["n_cot_steps"] != len(example["cot_ids"])
                or (spec.which == "levels" and example.get("cot_level") is None)
            ):
                return False
            if spec.which in ("left", "right") and spec.count > len(example["cot_ids"]) and not spec.saturate:
                return False  # truncate() raises the error that names it
        return True


_TEXT_COLUMNS = ("question", "cot", "answer")
#: The columns :meth:`ICoTCollator.prepare_dataset` adds, and their Arrow types.
_PREPARED_TYPES = {
    "example_id": pa.int64(),
    "question_ids": pa.list_(pa.int32()),
    "answer_ids": pa.list_(pa.int32()),
    "cot_tokens": pa.list_(pa.string()),
    "cot_ids": pa.list_(pa.int32()),
    "n_cot_tokens": pa.int32(),
    "n_cot_steps": pa.int32(),
    "length": pa.int32(),
}
