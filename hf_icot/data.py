"""Load a published hf_icot task dataset (a Hub repo or a local folder in Hub format), optionally truncating its CoT.

Truncation here is :func:`hf_icot.cot.truncate_example`, the text form of the one truncation function: use it to
inspect or republish a variant of a config, e.g. its end-to-end form (``"step:all"``) or one without its first two
steps (``"step:left:2"``). Curricula during training truncate per example in the collator instead.
"""

from __future__ import annotations

from typing import Any

import datasets

from hf_icot.cot import TruncationSpec, truncate_example


def load_icot_dataset(
    path_or_repo: str,
    config: str,
    truncation: str | TruncationSpec | None = None,
    tokenizer: Any = None,
    split: str | None = None,
) -> datasets.DatasetDict | datasets.Dataset:
    """Load ``config`` of ``path_or_repo`` with ``datasets.load_dataset`` and apply ``truncation`` to every example.

    Args:
        path_or_repo: a folder written by ``python -m datasets_builder build`` or a Hub dataset repo id.
        config: the config to load (its name as listed in the dataset card).
        truncation: a :class:`~hf_icot.cot.TruncationSpec` or its compact text form (``"all"``, ``"step:left:2"``);
            None keeps the full CoT.
        tokenizer: with ``unit="token"``, count tokens of this tokenizer instead of space-separated words.
        split: return only this split (a ``Dataset``); None returns every split (a ``DatasetDict``).

    Raises:
        ValueError: ``path_or_repo`` holds no dataset, ``config`` or ``split`` does not exist (the message lists the
            ones that do), the truncation spec is malformed, or it removes more units than an example's CoT has
            (the message names the split and example).
    """
    try:
        configs = datasets.get_dataset_config_names(path_or_repo)
    except FileNotFoundError as error:
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"no dataset found at {path_or_repo!r} ({first_line}).") from None
    if config not in configs:
        raise ValueError(f"config {config!r} is not in {path_or_repo!r}; available: {', '.join(configs)}.")
    spec = TruncationSpec.parse(truncation) if isinstance(truncation, str) else truncation

    loaded = datasets.load_dataset(path_or_repo, config)
    if split is not None and split not in loaded:
        raise ValueError(f"split {split!r} is not in config {config!r}; available: {', '.join(loaded)}.")
    if spec is not None:
        loaded = datasets.DatasetDict(
            {
                name: truncate_dataset(part, spec, tokenizer, name)
                for name, part in loaded.items()
                if split in (None, name)
            }
        )
    return loaded[split] if split is not None else loaded


def truncate_dataset(
    dataset: datasets.Dataset, spec: TruncationSpec, tokenizer: Any = None, name: str = "dataset"
) -> datasets.Dataset:
    """``dataset`` with :func:`~hf_icot.cot.truncate_example` applied to every row, same features and order.

    Raises:
        ValueError: ``spec`` cannot apply to some example; the message names ``name`` and the example's index.
    """
    rows = []
    for index, example in enumerate(dataset):
        try:
            rows.append(truncate_example(example, spec, tokenizer))
        except ValueError as error:
            raise ValueError(f"{name} example {index}: {error}") from None
    columns = {name: [row[name] for row in rows] for name in dataset.features}  # from_list cannot make 0 rows
    return datasets.Dataset.from_dict(columns, features=dataset.features)
