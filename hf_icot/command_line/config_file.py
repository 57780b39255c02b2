"""What every parser of a recipe's command line shares, importing nothing heavy: the ``--config`` YAML file read into
a mapping (:func:`read_config_file`, one sentence per problem) and a bad flag said in one line
(:func:`one_line_errors`).

The full parse (:mod:`~hf_icot.command_line.parsing`) and the early answers from the kept flags
(:mod:`~hf_icot.command_line.flag_cache`) both stand on this module.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

import yaml


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """A bad flag ends with argparse's one-line reason and a pointer to ``--help``, not the whole usage first (about
    150 lines for a recipe, burying the line that matters)."""

    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: error: {message}; see --help.\n")

    parser.error = error


def read_config_file(path: str) -> dict[str, Any]:
    """The mapping of a recipe YAML file, or one sentence saying why it cannot be used."""
    try:
        with open(path, encoding="utf-8") as stream:
            values = yaml.safe_load(stream) or {}
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist; give the path of a recipe YAML file.") from None
    except IsADirectoryError:
        raise ValueError(f"config file {path} is a folder; give the path of a recipe YAML file.") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "malformed"
        raise ValueError(f"config file {path} is not valid YAML{where} ({problem}); fix it or see --help.") from None
    if not isinstance(values, dict):
        raise ValueError(f"config file {path} holds a {type(values).__name__}; it must be a mapping of flags.")
    return values
