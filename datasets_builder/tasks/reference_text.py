"""Reference text files (``question||cot #### answer`` per line) into the shared schema.

This is how the stepwise-ICoT reference's own data (GSM8K with ``<<…>>`` steps, the k-by-k multiplication sets)
becomes a Hub dataset. Each file is one split, named after its stem (``valid`` -> ``validation``,
``test_bigbench`` -> ``test``). Every line must parse: a malformed one is reported with its file and line number,
never dropped, and ``hf_icot.cot.render_line`` gives every row back byte for byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from tqdm import tqdm

from datasets_builder.source_files import check_config, config_name, split_files
from hf_icot.cot import MalformedLineError, example_features, parse_line

TASK_NAME = "reference_text"
GENERATOR_VERSION = "1"
DESCRIPTION = (
    "Reference chain-of-thought data read from text files of `question||cot #### answer` lines, the format of the "
    "public stepwise internalization (ICoT) reference. Each file becomes one split. CoT steps are split as "
    "`hf_icot.cot.split_steps` does: one step per `<<...>>` chunk for GSM8K, one per partial product for "
    "multiplication, else one per word. Rows keep the files' order, and rendering a row back as "
    "`question||cot #### answer` gives its source line exactly."
)

#: File stems whose split is not the stem itself.
SPLIT_OF_STEM = {"valid": "validation", "test_bigbench": "test"}
_SHOWN_LINES = 5


@dataclass
class Params:
    """Parameters of the reference text task; see the module docstring."""

    path: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Files of 'question||cot #### answer' lines, or folders whose *.txt files are all read; "
            "each file is a split named after its stem (valid -> validation, test_bigbench -> test)."
        },
    )
    config: str = field(
        default="", metadata={"help": "Hub config name; default: the name of the folder holding the files."}
    )
    seed: int = field(default=0, metadata={"help": "Recorded only: the files are copied in order, nothing is drawn."})

    def __post_init__(self) -> None:
        self.split_files()  # raises on a missing path, an empty folder or two files giving one split
        check_config(self.config)

    def split_files(self) -> dict[str, Path]:
        """Split name -> file, in the order the files were given (folders expanded to their sorted *.txt files)."""
        stem = lambda file: SPLIT_OF_STEM.get(file.stem, file.stem)  # noqa: E731
        return split_files(self.path, (".txt",), stem, "file or folder of 'question||cot #### answer' lines")

    def config_name(self) -> str:
        return config_name(self.config, list(self.split_files().values()))


def read_lines(file: Path) -> list[str]:
    """The lines of ``file`` without their newline. Splits on ``\\n`` only: ``str.splitlines`` would also split on
    characters such as U+2028 that may sit inside a question.

    Raises:
        ValueError: the file is not UTF-8.
    """
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"file {str(file)!r} is not UTF-8 text (byte {error.start}); save it as UTF-8.") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return lines


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """One split per file of ``params.path``, rows in file order.

    Raises:
        ValueError: malformed lines; the message counts them and names the first few by file and line number.
    """
    features = example_features()
    splits, malformed = {}, []
    for split, file in params.split_files().items():
        rows = []
        for number, line in enumerate(tqdm(read_lines(file), desc=file.name, disable=not progress), start=1):
            try:
                rows.append(parse_line(line, number))
            except MalformedLineError as error:
                malformed.append((file, number, str(error)))
        columns = {name: [row[name] for row in rows] for name in features}  # from_list cannot make 0 rows
        splits[split] = datasets.Dataset.from_dict(columns, features=features)
    if malformed:
        shown = ", ".join(f"{file.name}:{number}" for file, number, _ in malformed[:_SHOWN_LINES])
        more = f" and {len(malformed) - _SHOWN_LINES} more" if len(malformed) > _SHOWN_LINES else ""
        first_file, _, first_error = malformed[0]
        raise ValueError(
            f"{len(malformed)} malformed line(s) at {shown}{more}; the first, in {str(first_file)!r}: {first_error}"
        )
    return datasets.DatasetDict(splits)


def _license_line(folder: Path) -> str | None:
    """The first line of a LICENSE file in ``folder`` or its parent, if any (the reference ships one)."""
    for candidate in (folder / "LICENSE", folder.parent / "LICENSE"):
        if candidate.is_file():
            first = candidate.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            return f"{first[0].strip()} ({candidate.parent.name}/{candidate.name})" if first else None
    return None


def card_details(params: Params) -> dict[str, str]:
    details = {}
    for split, file in params.split_files().items():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        details[f"source of {split}"] = f"{file.parent.name}/{file.name} (sha256 {digest})"
    licenses = sorted({line for file in params.split_files().values() if (line := _license_line(file.parent))})
    if licenses:
        details["source license"] = "; ".join(licenses)
    return details
