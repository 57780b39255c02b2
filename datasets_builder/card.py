"""The dataset card of an output folder: rendered from every config's ``icot_config.json``, so building another
config into the folder adds it to the card and the card is a function of the configs' records alone."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import datasets
from datasets.info import DatasetInfosDict
from huggingface_hub import DatasetCardData

import model_cards
from datasets_builder import registry

CARD_FILE = "README.md"
CONFIG_FILE = "icot_config.json"


def read_configs(folder: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Config name -> record (``icot_config.json``) for every config in ``folder``, sorted by name."""
    records = {}
    for path in sorted(Path(folder).glob(f"*/{CONFIG_FILE}")):
        record = json.loads(path.read_text(encoding="utf-8"))
        records[record["config_name"]] = record
    return dict(sorted(records.items()))


def _size_category(n_examples: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n_examples < limit:
            return label
    return "1M<n<10M" if n_examples < 10_000_000 else "10M<n<100M"


def card_metadata(records: dict[str, dict[str, Any]]) -> DatasetCardData:
    """The card's YAML header: ``configs`` with every split's files (what ``load_dataset`` reads), ``dataset_info``
    with features and sizes, and tags."""
    configs, infos = [], {}
    for name, record in records.items():
        data_files = []
        for split, info in record["splits"].items():
            paths = [f"{name}/{shard['file']}" for shard in info["shards"]]
            data_files.append({"split": split, "path": paths[0] if len(paths) == 1 else paths})
        configs.append({"config_name": name, "data_files": data_files})
        split_infos = datasets.SplitDict(
            {
                s: datasets.SplitInfo(s, num_bytes=i["num_bytes"], num_examples=i["num_examples"])
                for s, i in record["splits"].items()
            }
        )
        infos[name] = datasets.DatasetInfo(
            features=datasets.Features.from_dict(record["features"]),
            config_name=name,
            splits=split_infos,
            download_size=sum(shard["bytes"] for info in record["splits"].values() for shard in info["shards"]),
            dataset_size=sum(info["num_bytes"] for info in record["splits"].values()),
        )
    licenses = {record.get("license") for record in records.values()}
    largest = max(sum(info["num_examples"] for info in record["splits"].values()) for record in records.values())
    card_data = DatasetCardData(
        license=licenses.pop() if len(licenses) == 1 and None not in licenses else None,
        pretty_name="hf_icot: " + ", ".join(sorted({record["task"] for record in records.values()})),
        tags=["hf_icot", "implicit-chain-of-thought", "chain-of-thought"],
        task_categories=["text-generation"],
        size_categories=[_size_category(largest)],
        configs=configs,
    )
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    return card_data


def render_card(folder: str | os.PathLike) -> str:
    """The dataset card (``README.md`` text) describing every config in ``folder``.

    Raises:
        ValueError: ``folder`` holds no config.
    """
    records = read_configs(folder)
    if not records:
        raise ValueError(f"folder {str(folder)!r} holds no config ({CONFIG_FILE}); build one first.")
    metadata = card_metadata(records).to_yaml().rstrip("\n") + "\n"
    title = "hf_icot task data: " + ", ".join(sorted({record["task"] for record in records.values()}))
    rebuild = {
        name: shlex.join(
            ["python", "-m", "datasets_builder", "build", "--task", record["task"]]
            + registry.params_to_argv(record["params"])
            + ["--out", "DIR"]
        )
        for name, record in records.items()
    }
    card = model_cards.render("dataset_card.md.j2", metadata=metadata, title=title, configs=records, rebuild=rebuild)
    return card.rstrip("\n") + "\n"
