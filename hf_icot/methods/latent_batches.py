"""Batches for continuous-thought methods (:mod:`hf_icot.methods.latent`), from a prepared dataset's ids.

A latent sequence is the question, ``<|start-latent|> <|latent|>×n <|end-latent|>``, the kept CoT steps and the answer,
in the layout's text format (:class:`hf_icot.data.latent_formats.LatentFormat`; ``hf_icot``: ``question <eos>
<|start-latent|> <|latent|>×n <|end-latent|> [kept CoT] <eos> #### answer <eos>``): the first ``skip_steps`` CoT steps
are gone and ``n`` latent slots stand in their place. The labels are what follows ``<|end-latent|>`` — never the
question, the markers or the slots (Coconut's labels).

Rows are **left-padded so that their latent slots start in one column**, so the latent forward feeds the hidden states
back one column at a time, every row at once, reusing the KV cache: in the ``coconut`` format as Coconut's
``MyCollator`` pads, only the rows that have a latent slot, on their first slot; in the others every row on its
``<|start-latent|>`` marker (CODI's left-padded question, then its thoughts). Position ids count each row's real tokens
from 0 (padding 0); padding is masked and unlabelled. Every row also carries the position CODI distils at
(:meth:`~hf_icot.data.latent_formats.LatentFormat.answer_offset`).

:func:`padded_rows` lays out any rows (the latent ones, a CoT teacher's) into padded tensors; :func:`teacher_batch` is
the CoT teacher half of CODI's and PCCoT's batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from hf_icot.curriculum.latent import LatentPlan
from hf_icot.curriculum.layout import END_LATENT_TOKEN, LATENT_TOKEN, START_LATENT_TOKEN, SequenceLayout
from hf_icot.data.encoding import IGNORE_INDEX, eos_id, token_id
from hf_icot.data.latent_formats import LatentFormat


@dataclass(frozen=True)
class LatentTokens:
    """The ids of the latent markers in a tokenizer."""

    start: int
    latent: int
    end: int

    @classmethod
    def of(cls, tokenizer: Any) -> LatentTokens:
        """Raises: ValueError naming the first marker the tokenizer lacks."""
        try:
            return cls(*(token_id(tokenizer, token) for token in (START_LATENT_TOKEN, LATENT_TOKEN, END_LATENT_TOKEN)))
        except ValueError as error:
            raise ValueError(
                f"{error.args[0].split(';')[0]}; a latent method needs its markers: build the tokenizer with "
                "hf_icot.modeling.loading.load_model_and_tokenizer, or add them with "
                "hf_icot.data.tokenization.prepare_tokenizer_for_icot(tokenizer, model, latent=True)."
            ) from None


def step_token_counts(example: Mapping[str, Any]) -> list[int]:
    """Tokens per CoT step of a prepared example (its ``cot_tokens`` are each step's tokens, space-joined)."""
    return [len(step.split(" ")) if step else 0 for step in example["cot_tokens"]]


class LatentRow(NamedTuple):
    """One rendered latent sequence: its ids, the index of its first labelled token, the index CODI distils at and the
    CoT tokens it kept."""

    ids: list[int]
    first_label: int
    answer_position: int
    kept: int


class LatentRenderer:
    """Renders latent batches for one tokenizer, in the text format of ``layout`` (default: ``hf_icot``).

    Raises:
        ValueError: a tokenizer without the latent markers or an eos token.
    """

    def __init__(self, tokenizer: Any, layout: SequenceLayout | None = None) -> None:
        self.tokens = LatentTokens.of(tokenizer)
        self.eos = eos_id(tokenizer)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self.format = LatentFormat(tokenizer) if layout is None else LatentFormat.of(tokenizer, layout)
        self.markers = (self.tokens.start, self.tokens.latent, self.tokens.end)

    def row(self, example: Mapping[str, Any], plan: LatentPlan) -> LatentRow:
        """One latent sequence at ``plan``."""
        counts = step_token_counts(example)
        cot = list(example["cot_ids"])[sum(counts[: plan.skip_steps]) :]
        ids, first, answer_position = self.format.sequence(
            example["question_ids"], cot, example["answer_ids"], plan.n_latent, self.markers
        )
        return LatentRow(ids, first, answer_position, len(cot))

    def render(
        self, examples: Sequence[Mapping[str, Any]], plans: Sequence[LatentPlan]
    ) -> tuple[dict[str, torch.Tensor], list[int]]:
        """The batch (``input_ids``, ``attention_mask``, ``position_ids``, ``labels``, ``answer_positions``) and the
        CoT tokens each row kept."""
        rows = [self.row(example, plan) for example, plan in zip(examples, plans)]
        # The column of each row's <|start-latent|> (coconut: of its first latent slot, None for a row without one).
        starts = [len(example["question_ids"]) + len(self.format.after_question) for example in examples]
        if self.format.name == "coconut":
            starts = [start + 1 if plan.n_latent else None for start, plan in zip(starts, plans)]
        aligned = [start for start in starts if start is not None]
        offsets = [0 if start is None else max(aligned) - start for start in starts]
        batch = padded_rows(
            [row.ids for row in rows],
            [row.first_label for row in rows],
            [row.answer_position for row in rows],
            self.pad,
            offsets,
        )
        return batch, [row.kept for row in rows]

    def prompts(self, examples: Sequence[Mapping[str, Any]], plans: Sequence[LatentPlan]) -> list[list[int]]:
        """The generation prompts: each question with its latent slots, up to what follows ``<|end-latent|>``."""
        return [
            self.format.prompt(example["question_ids"], plan.n_latent, self.markers)
            for example, plan in zip(examples, plans)
        ]


def padded_rows(
    rows: Sequence[list[int]],
    first_labels: Sequence[int],
    answer_positions: Sequence[int],
    pad: int,
    offsets: Sequence[int] | None = None,
) -> dict[str, torch.Tensor]:
    """``rows`` of token ids as one padded batch: each row starts at its ``offset`` (left padding; default 0, right
    padding), is labelled from its ``first_labels`` index on, and counts its positions from 0; ``pad`` fills the rest.

    Returns:
        ``input_ids``, ``attention_mask``, ``position_ids``, ``labels`` ``(B, T)`` and ``answer_positions`` ``(B,)``:
        each row's ``answer_positions`` index in the batch's columns.
    """
    offsets = np.zeros(len(rows), dtype=np.int64) if offsets is None else np.asarray(offsets)
    width = int(max(offset + len(ids) for offset, ids in zip(offsets, rows)))
    input_ids = np.full((len(rows), width), pad, dtype=np.int64)
    labels = np.full((len(rows), width), IGNORE_INDEX, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    positions = np.zeros((len(rows), width), dtype=np.int64)
    for row, (offset, ids, first) in enumerate(zip(offsets, rows, first_labels)):
        end = offset + len(ids)
        input_ids[row, offset:end] = ids
        attention[row, offset:end] = 1
        positions[row, offset:end] = np.arange(len(ids))
        labels[row, offset + first : end] = ids[first:]
    return {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention),
        "position_ids": torch.from_numpy(positions),
        "labels": torch.from_numpy(labels),
        "answer_positions": torch.from_numpy(offsets + np.asarray(answer_positions, dtype=np.int64)),
    }


#: The prepared column of a teacher CoT tokenized whole in CODI's format (:meth:`hf_icot.methods.codi.CODIMethod.
#: prepare_dataset` adds it).
TEACHER_COT = "teacher_cot_ids"


def teacher_batch(
    renderer: LatentRenderer, examples: Sequence[Mapping[str, Any]], include_last_cot: bool = False
) -> dict[str, torch.Tensor]:
    """The CoT teacher of CODI and PCCoT in the renderer's format (:meth:`hf_icot.data.latent_formats.LatentFormat.
    teacher`; ``hf_icot``: ``question <eos> cot <eos> #### answer <eos>``), right-padded, labelled after the question's
    separator, without the CoT's last step unless ``include_last_cot`` (both codes drop it; in CODI's format the
    prepared :data:`TEACHER_COT` already leaves it out).

    Returns:
        :func:`padded_rows`' tensors but ``position_ids``, each key prefixed ``teacher_``.

    Raises:
        ValueError: examples in CODI's format without :data:`TEACHER_COT`.
    """
    fmt = renderer.format
    rows = []
    for example in examples:
        if fmt.name == "codi":
            if TEACHER_COT not in example:
                raise ValueError(
                    f"CODI's format needs each example's {TEACHER_COT}; prepare the dataset with the method's "
                    "prepare_dataset after the collator's (ICoTTrainer does)."
                )
            cot = list(example[TEACHER_COT])
        else:
            n_steps = example["n_cot_steps"]
            keep = n_steps if include_last_cot else max(n_steps - 1, 0)
            cot = list(example["cot_ids"])[: sum(step_token_counts(example)[:keep])]
        rows.append(fmt.teacher(example["question_ids"], cot, example["answer_ids"]))
    batch = padded_rows([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], renderer.pad)
    return {f"teacher_{key}": batch[key] for key in ("input_ids", "attention_mask", "labels", "answer_positions")}
