"""The continuous-thought methods' public data files into the shared schema.

* **Coconut** (``facebookresearch/coconut``, ``data/prosqa_*.json`` and its GSM8K / ProntoQA preprocessing): a JSON
  list of ``{"question", "steps", "answer"}``, the steps a list of strings; ``cot`` = the steps.
* **CODI** (``zhenyi4/codi``, GSM8K-Aug as ``zen-E/GSM8k-Aug`` exports it): JSON or JSON Lines rows of
  ``{"question", "cot", "answer"}``, the CoT one string; its steps are split as :func:`hf_icot.cot.split_steps` splits
  the stepwise reference's (one step per ``<<…>>`` chunk), and a leading ``####`` is taken off the answer.
* **CODI's natural-language rows** (format ``codi_nl``: GSM8k-Aug-NL as ``zen-E/GSM8k-Aug-NL`` exports it): the same
  fields, the CoT's steps its sentences, split at ``". "`` as CODI's ``train.py`` splits them in its ``icot-full``
  branch (each kept as the split gives it; an empty CoT has no steps). Its teacher joins them back with
  ``codi``'s ``cot_sentences`` option.

The question and the steps keep the file's text as it is (a GSM8K question's double spaces included), as both methods'
code reads it, so that their formats (``latent_format coconut`` / ``codi``) give their token ids; the answer is
stripped.

Each file is one split, named after the last part of its stem (``prosqa_valid`` -> ``validation``,
``gsm8k_aug_train`` -> ``train``; a stem without such a part names the split itself). A row with a missing field or an
empty answer fails the whole build with one sentence naming the file, the row and the field; nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from datasets_builder.source_files import check_config, config_name, split_files
from hf_icot.cot import ANSWER_PREFIX, example_features, split_steps

TASK_NAME = "latent_json"
GENERATOR_VERSION = "2"  # 2: texts kept as the files have them (1 collapsed whitespace)
DESCRIPTION = (
    "Continuous-thought methods' data files in the shared schema: Coconut's JSON lists of question, steps (a list) "
    "and answer, or CODI's GSM8K-Aug rows of question, cot (one string, split into steps at its <<...>> chunks) and "
    "answer (codi_nl: its GSM8k-Aug-NL rows, the cot split into sentences). Each file becomes one split; rows keep the "
    "file's order."
)
FORMATS = ("auto", "coconut", "codi", "codi_nl")
SPLIT_SUFFIXES = {
    "train": "train",
    "valid": "validation",
    "validation": "validation",
    "val": "validation",
    "test": "test",
}


@dataclass
class Params:
    """Parameters of the latent-methods JSON task; see the module docstring."""

    path: list[str] = field(
        default_factory=list,
        metadata={"help": "JSON or JSON Lines files (or folders of them); each file is one split named by its stem."},
    )
    format: str = field(
        default="auto",
        metadata={
            "help": "coconut (steps: a list), codi (cot: one string, steps at its <<...>> chunks), codi_nl (cot: one "
            "string, steps at its sentences) or auto (coconut or codi, each row by its fields)."
        },
    )
    config: str = field(default="", metadata={"help": "Hub config name; default: the folder holding the files."})
    seed: int = field(default=0, metadata={"help": "Recorded only: the files are copied in order, nothing is drawn."})

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r} is not allowed; choose one of {', '.join(FORMATS)}.")
        check_config(self.config)
        self.split_files()

    def split_files(self) -> dict[str, Path]:
        """Split name -> file, in the order given (folders expanded to their sorted .json / .jsonl files)."""
        suffix = lambda file: SPLIT_SUFFIXES.get(file.stem.rsplit("_", 1)[-1].lower(), file.stem)  # noqa: E731
        return split_files(self.path, (".json", ".jsonl"), suffix, "JSON or JSON Lines file, or a folder of them")

    def config_name(self) -> str:
        return config_name(self.config, list(self.split_files().values()))


def read_rows(file: Path) -> list:
    """The rows of a JSON list or a JSON Lines file.

    Raises:
        ValueError: text that is neither, naming the file (and the line for JSON Lines).
    """
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"file {str(file)!r} is not UTF-8 text (byte {error.start}); save it as UTF-8.") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"file {str(file)!r} is not valid JSON (line {error.lineno}): {error.msg}.") from None
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"file {str(file)!r}, line {number} is not a JSON object: {error.msg}.") from None
    return rows


def to_example(row: object, file: Path, index: int, fmt: str) -> dict:
    """One row in the shared schema.

    Raises:
        ValueError: naming the file, the row (0-based) and the field that is missing, of the wrong type or empty.
    """
    where = f"{str(file)!r}, row {index}"
    if not isinstance(row, dict):
        raise ValueError(f"{where} is not a JSON object with question and answer fields.")
    if fmt == "auto":
        fmt = "coconut" if "steps" in row else "codi"
    steps_field = "steps" if fmt == "coconut" else "cot"
    for name in ("question", steps_field, "answer"):
        if name not in row or row[name] is None:
            raise ValueError(f"{where} has no {name!r} field; a {fmt} row needs question, {steps_field} and answer.")
    answer = str(row["answer"]).strip()
    if answer.startswith(ANSWER_PREFIX):
        answer = answer[len(ANSWER_PREFIX) :].strip()
    if not answer:
        raise ValueError(f"{where} has an empty 'answer'; every row needs an answer.")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise ValueError(f"{where} has an empty or non-text 'question'.")
    if fmt == "coconut":
        steps = row["steps"]
        if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
            raise ValueError(f"{where}: 'steps' must be a list of strings (Coconut's format).")
    else:
        if not isinstance(row["cot"], str):
            raise ValueError(f"{where}: 'cot' must be one string (CODI's format); use format coconut for a list.")
        if fmt == "codi_nl":
            steps = row["cot"].split(". ") if row["cot"] else []
        else:
            steps = split_steps(row["cot"])
    return {"question": row["question"], "cot": list(steps), "answer": answer}


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """One split per file, rows in file order.

    Raises:
        ValueError: the first bad row (see :func:`to_example`).
    """
    features = example_features()
    splits = {}
    for split, file in params.split_files().items():
        rows = [to_example(row, file, index, params.format) for index, row in enumerate(read_rows(file))]
        columns = {name: [row[name] for row in rows] for name in features}
        splits[split] = datasets.Dataset.from_dict(columns, features=features)
    return datasets.DatasetDict(splits)


def card_details(params: Params) -> dict[str, str]:
    return {
        f"source of {split}": f"{file.parent.name}/{file.name} (sha256 {hashlib.sha256(file.read_bytes()).hexdigest()})"
        for split, file in params.split_files().items()
    }
