"""The data an :class:`~hf_icot.training.trainer.ICoTTrainer` is built with, prepared once: every split tokenized by
the collator (:meth:`hf_icot.data.collator.ICoTCollator.prepare_dataset`), then given the method's own columns
(:meth:`hf_icot.methods.base.Method.prepare_dataset`: CODI's teacher CoT in its format), the tokens the curriculum will insert
checked against the tokenizer, and the extent of the training CoTs the schedule binds to. Whole Arrow columns are
read, not a Python value per row (seconds per million rows)."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow.compute as pc

from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.row_checks import arrow_table

logger = logging.getLogger(__name__)


def prepare_splits(
    collator: Any,
    train: Any,
    evaluation: Any,
    context: int | None,
    too_long: str,
    layout: SequenceLayout,
    method: Any = None,
    tokenizer: Any = None,
) -> tuple[Any, Any, int]:
    """``(train, evaluation, skipped)``: the training split and the evaluation split(s) (one, or a mapping of name
    to split) prepared by ``collator`` for a model of ``context`` tokens, then by ``method`` (its own columns, with
    ``tokenizer``), either None where not given, and how many training examples too long for the context were
    skipped (``too_long="skip"``; logged).

    Raises:
        ValueError: what :meth:`~hf_icot.data.collator.ICoTCollator.prepare_dataset` refuses.
    """

    def prepare(split: Any) -> tuple[Any, int]:
        prepared, skipped = collator.prepare_dataset(split, context, too_long, layout)
        return (prepared if method is None else method.prepare_dataset(prepared, tokenizer)), skipped

    skipped = 0
    if train is not None:
        train, skipped = prepare(train)
        if skipped:
            logger.warning("skipped %d training examples longer than the model's context", skipped)
    if isinstance(evaluation, dict):
        evaluation = {name: prepare(split)[0] for name, split in evaluation.items()}
    elif evaluation is not None:
        evaluation = prepare(evaluation)[0]
    return train, evaluation, skipped


def inserted_tokens(train: Any, layout: SequenceLayout) -> list[str]:
    """Tokens the curriculum puts into the prepared ``train`` sequences: the placeholder under ``fill="pad"``, the
    length hints."""
    column = "n_cot_tokens" if layout.unit == "token" else "n_cot_steps"
    table = arrow_table(train)
    return layout.inserted_tokens((pc.max(table.column(column)).as_py() if table.num_rows else 0) or 0)


def cot_extent(train: Any) -> tuple[int | None, int | None, int | None]:
    """``(max_cot_level, max_cot_tokens, max_cot_steps)`` of the prepared ``train`` split (None where it has no
    ``cot_level`` column or no row; all None without a split): schedules end their curriculum where the longest CoT
    is gone."""
    if train is None:
        return None, None, None
    table = arrow_table(train)
    max_level = max_tokens = max_steps = None
    if "cot_level" in table.column_names:
        max_level = pc.max(pc.list_flatten(table.column("cot_level"))).as_py() or 0
    if table.num_rows:
        max_tokens = pc.max(table.column("n_cot_tokens")).as_py()
        max_steps = pc.max(table.column("n_cot_steps")).as_py()
    return max_level, max_tokens, max_steps
