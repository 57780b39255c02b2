"""What every parser of a recipe's command line shares, importing nothing heavy: the ``--config`` YAML file read into
a mapping (:func:`read_config_file`, one sentence per problem), a bad flag said in one line
(:func:`one_line_errors`), and one boolean flag read from the command line and the file before torch is imported
(:func:`bool_flag_on`).

The full parse (:mod:`~hf_icot.command_line.parsing`) and the early answers from the kept flags
(:mod:`~hf_icot.command_line.flag_cache`) both stand on this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
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


def bool_flag_on(name: str, args: Sequence[str] | None = None) -> bool:
    """Whether ``args`` (default: ``sys.argv[1:]``) turn the boolean flag ``--name`` on, on the command line or in
    the ``--config`` file (the command line wins), as :func:`parse_config` will read it: ``--name``, ``--name true``,
    ``--name=yes``, or ``name: true`` in the file. Reads only the command line and the file (no heavy import), for
    settings made before torch is imported; anything it cannot read counts as off (the full parse then says what is
    wrong)."""
    args = list(sys.argv[1:] if args is None else args)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    pre.add_argument(f"--{name}", dest="value", nargs="?", const=True, default=None)

    def unreadable(message: str) -> NoReturn:
        raise ValueError(message)

    pre.error = unreadable
    try:
        known, _ = pre.parse_known_args(args)
        value = known.value
        if value is None and known.config is not None:
            value = read_config_file(known.config).get(name)
    except ValueError:
        return False
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() in ("yes", "true", "t", "y", "1")
