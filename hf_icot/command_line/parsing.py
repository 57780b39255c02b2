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
from typing import Any

from hf_icot.command_line.config_file import one_line_errors, read_config_file
from hf_icot.command_line.flag_cache import save_flags, type_name


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
