"""Coconut's and CODI's data files through datasets_builder into the shared schema, and their bad rows."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from datasets_builder import build_dataset
from hf_icot.data.loading import load_run_data

REPO = Path(__file__).resolve().parents[2]
COCONUT_ROWS = [  # the shape of Coconut's data/prosqa_*.json
    {"question": "Every wumpus is a zumpus. Alex is a wumpus. Is Alex a zumpus or a rompus?",
     "steps": ["Alex is a wumpus.", "Every wumpus is a zumpus."], "answer": "Alex is a zumpus."},
    {"question": "Tom is a yimpus. Is Tom a yimpus or a lempus?", "steps": [], "answer": "Tom is a yimpus."},
]  # fmt: skip
CODI_ROWS = [  # GSM8K-Aug rows as CODI reads them (zen-E/GSM8k-Aug)
    {"question": "Tom has 3 apples and buys 4 more. How many?", "cot": "<<3+4=7>> <<7*1=7>>", "answer": "7"},
    {"question": "Half of 10?", "cot": "<<10/2=5>>", "answer": "#### 5"},
]


def write(folder: Path, name: str, rows, lines: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(json.dumps(row) for row in rows) if lines else json.dumps(rows), encoding="utf-8")
    return path


def test_coconut_and_codi_files_become_schema_splits(tmp_path):
    coconut = write(tmp_path / "prosqa", "prosqa_valid.json", COCONUT_ROWS)
    test = write(tmp_path / "prosqa", "prosqa_test.json", COCONUT_ROWS[:1])
    dataset, info = build_dataset("latent_json", {"path": [str(coconut), str(test)]})
    assert list(dataset) == ["validation", "test"] and info["config"] == "prosqa"
    assert dataset["validation"][0] == {
        "question": COCONUT_ROWS[0]["question"], "cot": COCONUT_ROWS[0]["steps"], "answer": "Alex is a zumpus.",
    }  # fmt: skip
    assert dataset["validation"][1]["cot"] == []

    codi = write(tmp_path / "gsm8k_aug", "gsm8k_aug_train.jsonl", CODI_ROWS, lines=True)
    dataset, _ = build_dataset("latent_json", {"path": [str(codi)], "format": "codi"})
    assert dataset["train"]["cot"] == [["<<3+4=7>>", "<<7*1=7>>"], ["<<10/2=5>>"]]
    assert dataset["train"]["answer"] == ["7", "5"]  # CODI's '#### 5' loses its marker

    natural = [  # GSM8k-Aug-NL rows: its icot-full branch splits the CoT at ". ", a decimal point stays inside
        {"question": "A pen costs 1.5 dollars. How much do 4 pens cost?",
         "cot": "4 pens cost 4*1.5 = 6 dollars. So the answer is 6.", "answer": "6"},
        {"question": "What is 7 times 8?", "cot": "", "answer": "56"},
    ]  # fmt: skip
    nl = write(tmp_path / "gsm8k_aug_nl", "gsm8k_aug_nl_train.jsonl", natural, lines=True)
    dataset, _ = build_dataset("latent_json", {"path": [str(nl)], "format": "codi_nl"})
    assert dataset["train"]["cot"] == [["4 pens cost 4*1.5 = 6 dollars", "So the answer is 6."], []]


def test_the_cli_writes_a_loadable_folder(tmp_path):
    write(tmp_path / "prosqa", "prosqa_valid.json", COCONUT_ROWS)
    out = tmp_path / "built"
    done = subprocess.run(
        [sys.executable, "-m", "datasets_builder", "build", "--task", "latent_json", "--path",
         str(tmp_path / "prosqa"), "--out", str(out), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, _ = load_run_data(str(out), "prosqa")
    assert loaded["validation"]["answer"] == ["Alex is a zumpus.", "Tom is a yimpus."]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([COCONUT_ROWS[0], {"question": "q", "answer": "a"}], r"prosqa_valid\.json', row 1 has no 'cot' field"),
        ([{"question": "q", "steps": ["s"], "answer": " "}], r"prosqa_valid\.json', row 0 has an empty 'answer'"),
        ([{"question": "q", "steps": "s", "answer": "a"}], r"row 0: 'steps' must be a list of strings"),
    ],
)
def test_a_bad_row_is_one_sentence_and_nothing_is_written(tmp_path, rows, message):
    path = write(tmp_path / "prosqa", "prosqa_valid.json", rows)
    out = tmp_path / "built"
    done = subprocess.run(
        [sys.executable, "-m", "datasets_builder", "build", "--task", "latent_json", "--path", str(path),
         "--out", str(out), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    import re

    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()
