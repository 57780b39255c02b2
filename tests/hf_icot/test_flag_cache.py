"""The flags kept after a full parse (hf_icot.command_line.flag_cache) answer ``--help`` and bad input as the full parser
does, without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hf_icot.command_line.arguments import ModelArguments, ScriptArguments, parse_recipe_args
from hf_icot.command_line.flag_cache import answer_early, flags_file, type_name
from hf_icot.command_line.parsing import parse_config
from hf_icot.training.config import ICoTConfig

REPO = Path(__file__).resolve().parents[2]
TYPES = (ScriptArguments, ModelArguments, ICoTConfig)
EARLY_TYPES = (ScriptArguments, ModelArguments, "hf_icot.training.config.ICoTConfig")
VALID = ["--task", "multiplication", "--scratch_model", "{}", "--output_dir", "unused"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "120")  # both parsers' help wrapped alike
    return tmp_path / "cache"


def outcome(parse, args: list[str], capsys) -> tuple:
    """What a parse ends with: its output and exit status, or its ValueError's sentence."""
    try:
        parse(args)
    except SystemExit as stop:
        captured = capsys.readouterr()
        return ("exit", stop.code, captured.out, captured.err)
    except ValueError as error:
        return ("error", str(error))
    return ("parsed",)


def test_without_kept_flags_nothing_is_answered_early(cache, capsys):
    assert not flags_file([type_name(kind) for kind in TYPES]).exists()
    assert outcome(lambda args: answer_early(EARLY_TYPES, args), ["--help"], capsys) == ("parsed",)


def test_help_and_bad_input_are_answered_early_as_the_full_parser_answers(cache, capsys, tmp_path):
    parse_recipe_args(VALID)  # the full parse keeps the flags
    assert flags_file([type_name(kind) for kind in TYPES]).exists()
    config = tmp_path / "run.yaml"
    config.write_text("task: multiplication\nmax_train_examples: '12'\nnum_train_epochs: 2\n", encoding="utf-8")
    unknown_key = tmp_path / "unknown.yaml"
    unknown_key.write_text("task: multiplication\nnum_epochs: 2\n", encoding="utf-8")
    for args in (
        ["--help"],
        ["--config", str(config), "--help"],
        ["--num_train_epochs", "3"],  # no data named: ScriptArguments' own check
        ["--task", "multiplication", "--scratch_model", "{}", "--model_name_or_path", "x"],
        ["--task", "multiplication", "--num_train_epochs", "x"],
        ["--task", "multiplication", "--use_peft", "maybe"],
        ["--task", "multiplication", "--scratch_model", "{}", "--bogus", "3"],
        ["--config", str(tmp_path / "missing.yaml")],
        ["--config", str(config), "--scratch_model", "{}", "--model_name_or_path", "x"],
        ["--config", str(unknown_key), "--help"],
    ):
        full = outcome(lambda args: parse_config(TYPES, args), args, capsys)
        early = outcome(lambda args: answer_early(EARLY_TYPES, args), args, capsys)
        assert early == full, args
    # A valid command line is left to the full parse.
    assert outcome(lambda args: answer_early(EARLY_TYPES, args), VALID, capsys) == ("parsed",)


def test_the_recipe_answers_help_without_importing_torch(cache):
    parse_recipe_args(VALID)
    script = (
        "import runpy, sys\n"
        "sys.argv = ['icot_gpt2.py', '--help']\n"
        "try:\n"
        "    runpy.run_module('recipes.icot_gpt2', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as stop:\n"
        "    print('exit', stop.code)\n"
        "print('torch imported:', 'torch' in sys.modules, 'datasets imported:', 'datasets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "--num_train_epochs" in out and "exit 0" in out
    assert "torch imported: False datasets imported: False" in out


def test_the_kept_flags_are_keyed_by_the_sources_this_process_loaded(cache):
    """A process that outlives an edit of hf_icot's sources (a bench parsing recipe flags in-process for an hour) keeps
    saving the flags of the code it runs under the state it loaded, never under the edited sources' key, where the next
    fresh process would read them as its own."""
    import os

    names = [type_name(kind) for kind in TYPES]
    before = flags_file(names)
    source = REPO / "hf_icot" / "command_line" / "__init__.py"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # as an edit leaves it
    try:
        assert flags_file(names) == before
        fresh = subprocess.run(
            [sys.executable, "-c", "import sys; from hf_icot.command_line.flag_cache import flags_file; "
             "print(flags_file(sys.argv[1:]))", *names],
            capture_output=True, text=True, cwd=REPO, check=True,
        )  # fmt: skip
        assert fresh.stdout.strip() != str(before)  # a process started after the edit keys it anew
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
