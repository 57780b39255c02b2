"""Load a published hf_icot task dataset (a Hub repo or a local folder in Hub format), optionally truncating its CoT.

Truncation here is :func:`hf_icot.cot.truncate_example`, the text form of the one truncation function: use it to
inspect or republish a variant of a config, e.g. its end-to-end form (``"step:all"``) or one without its first two
steps (``"step:left:2"``). Curricula during training truncate per example in the collator instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets

from hf_icot.cot import TruncationSpec, truncate_example
from hf_icot.locations import names_a_missing_folder


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

    A local folder's rows are cached by its files' content (:func:`_content_cache_dir`): a file rewritten with
    other rows is read anew, whatever its modification time.

    Raises:
        ValueError: ``path_or_repo`` holds no dataset, ``config`` or ``split`` does not exist (the message lists the
            ones that do), a Parquet file of a local folder is cut short (naming it), the truncation spec is
            malformed, or it removes more units than an example's CoT has (the message names the split and example).
    """
    configs = _config_names(path_or_repo)
    if config not in configs:
        raise ValueError(f"config {config!r} is not in {path_or_repo!r}; available: {', '.join(configs)}.")
    spec = TruncationSpec.parse(truncation) if isinstance(truncation, str) else truncation

    try:
        loaded = datasets.load_dataset(path_or_repo, config, cache_dir=_content_cache_dir(path_or_repo, config))
    except (FileNotFoundError, ConnectionError) as error:
        raise ValueError(_not_loadable(path_or_repo, error)) from None
    except datasets.exceptions.DatasetGenerationError as error:  # files that do not fit the card's schema
        raise ValueError(_unreadable_rows(path_or_repo, config, error)) from None
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


def read_reference_file(path: str | os.PathLike) -> datasets.Dataset:
    """The examples of a reference-format text file (``question||cot #### answer`` per line, blank lines skipped),
    as the stepwise reference reads its valid/test files, in the shared schema.

    Raises:
        ValueError: the file is missing or not UTF-8, or a line is malformed (naming its number).
    """
    from hf_icot.cot import example_features, parse_line

    try:
        with open(path, encoding="utf-8") as stream:
            lines = stream.read().split("\n")
    except FileNotFoundError:
        raise ValueError(f"evaluation file {str(path)!r} does not exist; give a reference-format text file.") from None
    except UnicodeDecodeError:
        raise ValueError(f"evaluation file {str(path)!r} is not UTF-8 text; save it as UTF-8.") from None
    rows = [parse_line(line.strip(), number) for number, line in enumerate(lines, start=1) if line.strip()]
    if not rows:
        raise ValueError(f"evaluation file {str(path)!r} holds no example line.")
    return datasets.Dataset.from_list(rows, features=example_features())


def read_evaluation_split(source: str) -> datasets.Dataset:
    """An evaluation split from ``source``: a reference-format text file (:func:`read_reference_file`), or a split
    of a published dataset written ``DATASET:SPLIT`` or ``DATASET:CONFIG:SPLIT`` (DATASET a Hub repo id or a folder
    written by ``python -m datasets_builder build``; the config may be left out when there is only one).

    Raises:
        ValueError: a missing file, a ``source`` that is neither a file nor ``DATASET[:CONFIG]:SPLIT``, or a dataset,
            config or split that does not exist (naming what does).
    """
    if os.path.isfile(source) or ":" not in source:
        return read_reference_file(source)
    dataset, _, split = source.rpartition(":")
    path, _, config = dataset.partition(":") if dataset.count(":") == 1 else (dataset, "", "")
    loaded, _ = load_run_data(path, config or None)
    if split not in loaded:
        raise ValueError(f"split {split!r} is not in {source!r}; it has {', '.join(loaded)}.")
    return loaded[split]


def split_order(name: str) -> tuple[int, str]:
    """The order splits are evaluated and reported in: validation, test, then the others (``test_ood_*``) by name."""
    return {"validation": 0, "test": 1}.get(name, 2), name


def load_run_data(path_or_repo: str, config: str | None = None) -> tuple[datasets.DatasetDict, dict[str, Any]]:
    """A published task dataset for a run, and what the model card says about it.

    Args:
        path_or_repo: a folder written by ``python -m datasets_builder build`` or a Hub dataset repo id.
        config: its config; optional when it has only one.

    Returns:
        The ``DatasetDict`` and ``source``, ``config``, ``task`` and ``fingerprint`` (from the ``icot_config.json``
        datasets_builder writes beside each config; None for datasets from elsewhere).

    Raises:
        ValueError: no dataset there, several configs and none chosen, or an unknown config.
    """
    if config is None:
        configs = _config_names(path_or_repo)
        if len(configs) != 1:
            raise ValueError(f"{path_or_repo!r} has configs {', '.join(configs)}; pick one with --dataset_config.")
        config = configs[0]
    dataset = load_icot_dataset(path_or_repo, config)
    record = _dataset_record(path_or_repo, config)
    info = {"source": path_or_repo, "config": config, "task": record.get("task", config)}
    info["fingerprint"] = record.get("fingerprint")
    return dataset, info


def _config_names(path_or_repo: str) -> list[str]:
    """The configs of a dataset folder or Hub repo, or one sentence saying why there is no dataset there."""
    if names_a_missing_folder(path_or_repo):
        raise ValueError(
            f"no dataset found at {path_or_repo!r}: the folder does not exist; give a folder written by "
            "`python -m datasets_builder build`, or a Hub dataset id."
        )
    try:
        return datasets.get_dataset_config_names(path_or_repo)
    except (FileNotFoundError, ConnectionError) as error:
        raise ValueError(_not_loadable(path_or_repo, error)) from None


#: What a local dataset folder's rows may be stored in (the formats ``datasets`` reads from a folder).
DATA_FILE_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv", ".tsv", ".txt")
PARQUET_MAGIC = b"PAR1"  # a Parquet file begins and ends with it


def _content_cache_dir(path_or_repo: str, config: str) -> str | None:
    """For a local folder, a ``datasets`` cache folder named by the SHA-256 of its data files' bytes (those of
    ``config``'s subfolder when it has one) and of its card; None for a Hub id (the Hub keys files by revision).

    The ``datasets`` cache knows a local file by its path and modification time only, so a file rewritten with other
    rows and the same time (``cp -p``, ``rsync -t``, an unpacked archive) would be served with its old rows.

    Raises:
        ValueError: a Parquet file that is cut short or is no Parquet file (naming it).
    """
    import hashlib

    folder = Path(path_or_repo)
    if not folder.is_dir():
        return None
    scope = folder / config if (folder / config).is_dir() else folder
    files = sorted(p for p in scope.rglob("*") if p.is_file() and p.suffix in DATA_FILE_SUFFIXES)
    digest = hashlib.sha256()
    for path in [*files, folder / "README.md"]:
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            _check_parquet_ends(path)
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return os.path.join(datasets.config.HF_DATASETS_CACHE, "hf_icot_local", digest.hexdigest()[:32])


def _check_parquet_ends(path: Path) -> None:
    """Refuse a file that does not begin and end with Parquet's magic bytes (a copy cut short loses its footer)."""
    size = path.stat().st_size
    with open(path, "rb") as stream:
        head = stream.read(4)
        stream.seek(max(size - 4, 0))
        tail = stream.read(4)
    if size < 12 or head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        raise ValueError(
            f"{str(path)!r} is cut short or is not a Parquet file ({size} bytes, no Parquet footer); copy it again "
            "or rebuild the dataset with `python -m datasets_builder build`."
        )


def _unreadable_rows(path_or_repo: str, config: str, error: Exception) -> str:
    """Why ``load_dataset`` could not read ``config``: for a local folder, the bad split, row and column
    (:func:`hf_icot.data.row_checks.check_rows` on each split's Parquet files read as they are)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hf_icot.data.row_checks import check_rows

    cause = str(error.__cause__ or error).strip().splitlines()[0]
    folder = Path(path_or_repo) / config
    splits: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
        splits.setdefault(path.name.split("-")[0], []).append(path)
    try:
        check_rows({name: datasets.Dataset(pa.concat_tables([pq.read_table(p) for p in paths]))
                    for name, paths in splits.items()})  # fmt: skip
    except ValueError as found:
        return str(found)
    except (OSError, pa.ArrowException):
        pass
    return f"config {config!r} of {path_or_repo!r} cannot be read ({cause}); rebuild it with datasets_builder."


def _not_loadable(path_or_repo: str, error: OSError) -> str:
    """One sentence for what ``datasets`` raises when it cannot read ``path_or_repo`` (its messages run to pages)."""
    from huggingface_hub import constants

    message = (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(".")
    build = "`python -m datasets_builder build`"
    missing = re.match(r"Unable to find '([^']+)'", message)
    if missing:  # the card lists a data file that is gone
        reason = f"its card lists {missing.group(1)!r}, which is missing; rebuild it with {build}"
    elif os.path.isdir(path_or_repo):
        reason = f"{message[:1].lower()}{message[1:]}; give a folder written by {build}"
    elif constants.is_offline_mode():
        reason = "it is not in the local cache and HF_HUB_OFFLINE is set; unset it, or give a local folder"
    else:
        reason = f"the Hub has no such dataset or is unreachable ({message}); check the id"
    return f"no dataset found at {path_or_repo!r}: {reason}."


def _dataset_record(source: str, config: str) -> dict[str, Any]:
    """The ``icot_config.json`` that datasets_builder writes beside each config, or {} if there is none."""
    path = os.path.join(source, config, "icot_config.json")
    try:
        if not os.path.isdir(source):
            from huggingface_hub import hf_hub_download

            path = hf_hub_download(source, f"{config}/icot_config.json", repo_type="dataset")
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except Exception:  # the card then just lacks the fingerprint: a dataset need not come from datasets_builder
        return {}


def run_splits(
    dataset: Mapping[str, datasets.Dataset],
    eval_splits: Sequence[str] | None = None,
    max_train_examples: int | None = None,
    max_eval_examples: int | None = None,
) -> tuple[datasets.Dataset, dict[str, datasets.Dataset]]:
    """The training split and the evaluation splits of a run (by default every split but train, in
    :func:`split_order`), each cut to its first ``max_*_examples`` rows when given.

    Raises:
        ValueError: no train split, no other split, or an evaluation split the dataset lacks.
    """
    if "train" not in dataset:
        raise ValueError(f"the dataset has no train split (it has {', '.join(dataset)}); give one with a train split.")
    names = list(eval_splits) if eval_splits else sorted((n for n in dataset if n != "train"), key=split_order)
    if not names:
        raise ValueError("the dataset has only a train split; the final evaluation needs a validation or test split.")
    missing = [name for name in names if name not in dataset]
    if missing:
        raise ValueError(f"--eval_splits names {missing[0]!r}, which the dataset lacks; it has {', '.join(dataset)}.")

    def first(split: datasets.Dataset, limit: int | None) -> datasets.Dataset:
        return split if limit is None else split.select(range(min(limit, len(split))))

    return first(dataset["train"], max_train_examples), {n: first(dataset[n], max_eval_examples) for n in names}
