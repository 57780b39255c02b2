"""The command line of every recipe: ``--config file.yaml`` gives the defaults, flags override them.

:func:`parse_config` fills any dataclasses (``HfArgumentParser``'s, so ``--help`` lists every field with its help) from
a YAML file and the command line; :func:`parse_mapping` reads a mapping-valued field (YAML gives a mapping, the command
line a JSON object). A bad flag or file is one line naming it, not argparse's whole usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import yaml


def parse_mapping(flag: str, value: Any) -> dict | None:
    """A ``dict | str`` field as a mapping: YAML gives a mapping, the command line a JSON object (None stays None).

    Raises:
        ValueError: a string that is not a JSON object, naming the flag.
    """
    if value is None or isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"--{flag.lstrip('-')} {value!r} is not a JSON object; write e.g. '{{\"a\": 1}}'.")
    return parsed


def parse_config(dataclass_types: type | Sequence[type], args: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Parse ``--config file.yaml`` (defaults) and command-line flags (overrides) into dataclasses.

    A mapping in the file (e.g. ``task_args``) is updated key by key by the same flag on the command line (a JSON
    object), so ``--task_args '{"a_digits": 5}'`` keeps the file's other keys. Flags are written ``--name value`` or
    ``--name=value`` (abbreviations are refused, so every spelling means the same).

    Args:
        dataclass_types: the dataclasses to fill (e.g. ``(ScriptArguments, ICoTConfig)``), as for HfArgumentParser.
        args: the argument strings (default: ``sys.argv[1:]``).

    Returns:
        One instance per dataclass type, in order.

    Raises:
        ValueError: a config file that is missing, not YAML or not a mapping, a key that no dataclass has, or an
            invalid value.
        SystemExit: ``--help``, or a bad flag (status 2; one line on stderr: the reason and a pointer to ``--help``).
    """
    from transformers import HfArgumentParser

    from hf_icot.training.flag_cache import save_flags, type_name

    types = [dataclass_types] if isinstance(dataclass_types, type) else list(dataclass_types)
    args = list(sys.argv[1:] if args is None else args)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    one_line_errors(pre)
    known, remaining = pre.parse_known_args(args)
    parser = HfArgumentParser(types, allow_abbrev=False)
    one_line_errors(parser)
    parser.add_argument("--config", default=None, help="A YAML file whose keys set the defaults of the flags below.")
    save_flags(parser, [type_name(kind) for kind in types])  # for --help and bad flags before the heavy imports
    defaults = read_config_file(known.config) if known.config is not None else {}
    accepted = {action.dest for action in parser._actions}
    unknown = sorted(set(defaults) - accepted)
    if unknown:
        raise ValueError(f"config file {known.config} has unknown key(s) {', '.join(unknown)}; see --help.")
    parser.set_defaults(**defaults)
    mappings = [key for key, value in defaults.items() if isinstance(value, dict)]
    given = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    one_line_errors(given)
    for key in mappings:
        given.add_argument(f"--{key}", default=None)
    overridden = vars(given.parse_known_args(remaining)[0])
    outputs = parser.parse_args_into_dataclasses(args=remaining, look_for_args_file=False)
    # The extra namespace holds only --config, already consumed.
    outputs = tuple(output for output in outputs if not isinstance(output, argparse.Namespace))
    for key in mappings:
        if overridden[key] is None:
            continue
        for output in outputs:
            value = getattr(output, key, None)
            if isinstance(value, dict):  # the dataclass has read the flag's JSON object
                setattr(output, key, {**defaults[key], **value})
    return outputs


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
