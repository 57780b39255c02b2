"""A recipe's flags, kept on disk after each full parse, so that ``--help``, a misspelt flag and the checks of the
light argument dataclasses answer in well under 2 s: the full parser needs transformers' ``TrainingArguments``, whose
module imports torch, accelerate and PEFT (5-9 s on a 2-core machine) before it can list a single flag.

:func:`save_flags` writes the parser's arguments (option strings, help, defaults, choices, ...) to
``$XDG_CACHE_HOME/hf_icot/flags/<key>.json`` (``~/.cache`` by default), the key naming the dataclasses, the installed
transformers and the state of hf_icot's sources when the process loaded them, so that any change to a flag makes
another file (and a process older than an edit never saves its flags under the edited sources' key).
:func:`answer_early` rebuilds a plain ``argparse`` parser from that file, if present: it prints ``--help``, ends a
bad flag or choice with argparse's one line, and runs the ``__post_init__`` checks of the dataclasses that import
nothing heavy (``ScriptArguments``, ``ModelArguments``) on what the file and the flags give them. Anything it cannot
judge is left to the full parse, which follows; without the file nothing changes but the time.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from hf_icot.command_line.config_file import one_line_errors, read_config_file

#: The argparse action classes a saved flag may use, by the name saved.
_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_HelpAction": "help",
}


def _to_bool(text: str) -> bool:
    """transformers' ``string_to_bool``, which the full parser gives its bool flags."""
    if isinstance(text, bool):
        return text
    if text.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if text.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(
        f"Truthy value expected: got {text} but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive)."
    )


#: The value types the early parse converts to (anything else stays a string, and is judged by the full parse).
_TYPES = {"int": int, "float": float, "str": str, "string_to_bool": _to_bool}


def _read_sources_state() -> str:
    """hf_icot's Python files by path, size and modification time: a flag's help or default changes one of them."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


#: The sources' state when this process loaded them: a process that outlives an edit of the sources (a long bench
#: parsing recipe flags in-process) saves the flags of the code it runs under the old state, not the edited one's.
_SOURCES_STATE = _read_sources_state()


def flags_file(type_names: Sequence[str]) -> Path:
    """Where the flags of the dataclasses ``type_names`` (``module.QualName``) are kept for this installation."""
    try:
        transformers_version = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        transformers_version = "none"
    key = "|".join([*type_names, transformers_version, sys.version, _SOURCES_STATE])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "hf_icot" / "flags" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def save_flags(parser: argparse.ArgumentParser, type_names: Sequence[str]) -> None:
    """Keep ``parser``'s arguments for :func:`answer_early`; a cache that cannot be written is skipped silently."""
    groups = []
    for group in parser._action_groups:
        actions = []
        for action in group._group_actions:
            kind = _ACTIONS.get(type(action).__name__)
            if kind is None:
                return  # an action this module cannot rebuild: no early answers for this parser
            actions.append(
                {
                    "option_strings": list(action.option_strings),
                    "dest": action.dest,
                    "action": kind,
                    "nargs": action.nargs,
                    "const": _jsonable(action.const),
                    "default": _jsonable(action.default),
                    "choices": None if action.choices is None else [str(choice) for choice in action.choices],
                    "text_choices": action.choices is None or all(isinstance(c, str) for c in action.choices),
                    "type": getattr(action.type, "__name__", None),
                    "required": action.required,
                    "help": action.help,
                    "metavar": action.metavar,
                }
            )
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    record = {"description": parser.description, "groups": groups}  # the program's name is argparse's, as it runs
    path = flags_file(type_names)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(out.name, path)  # whole or absent: another process may be reading it
    except OSError:
        pass


def saved_parser(type_names: Sequence[str]) -> argparse.ArgumentParser | None:
    """The parser :func:`save_flags` kept for ``type_names``, or None."""
    try:
        record = json.loads(flags_file(type_names).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    parser = argparse.ArgumentParser(
        description=record["description"],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
        add_help=False,
    )
    parser.unconverted = set()  # the flags whose full parser converts their text with a type of its own
    for index, group in enumerate(record["groups"]):
        # argparse's own first two groups (positional, options) are the parser's; later ones are added.
        target = parser._action_groups[index] if index < 2 else parser.add_argument_group(group["title"])
        for flag in group["actions"]:
            options: dict[str, Any] = {"dest": flag["dest"], "help": flag["help"], "default": flag["default"]}
            if flag["action"] == "help":
                target.add_argument(*flag["option_strings"], action="help", help=flag["help"])
                continue
            if flag["action"] != "store":
                options["action"] = flag["action"]
                if flag["action"] == "store_const":
                    options["const"] = flag["const"]
            else:
                options.update(nargs=flag["nargs"], metavar=flag["metavar"], required=flag["required"])
                if flag["nargs"] == "?":
                    options["const"] = flag["const"]
                if flag["choices"] is not None:
                    options["choices"] = flag["choices"]
                options["type"] = _TYPES.get(flag["type"], str)
                converted = flag["type"] in _TYPES or (flag["choices"] is not None and flag.get("text_choices"))
                if flag["type"] is not None and not converted:
                    parser.unconverted.add(flag["dest"])  # a custom type, or choices the full parser maps to values
            target.add_argument(*flag["option_strings"], **options)
    return parser


def answer_early(dataclass_types: Sequence[type | str], args: Sequence[str]) -> None:
    """Print ``--help``, or end a bad flag or a bad value of a light dataclass, from the kept flags, before the heavy
    imports; return (to the full parse) when there are none or nothing is wrong that they can tell.

    Args:
        dataclass_types: the recipe's dataclasses, in order; a heavy one by its ``module.QualName`` (not imported).
        args: the command line (without the program name).

    Raises:
        ValueError: a light dataclass's own check, or a bad config file (as the full parse raises them).
        SystemExit: ``--help`` (status 0) or a bad flag (status 2, one line).
    """
    names = [kind if isinstance(kind, str) else type_name(kind) for kind in dataclass_types]
    parser = saved_parser(names)
    if parser is None:
        return
    one_line_errors(parser)
    defaults: dict[str, Any] = {}
    if "--config" in args or any(arg.startswith("--config=") for arg in args):
        pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        pre.add_argument("--config", default=None)
        one_line_errors(pre)
        config = pre.parse_known_args(args)[0].config
        if config is not None:
            defaults = read_config_file(config)
            unknown = sorted(set(defaults) - _dests(parser) - {"config", "help"})
            if unknown:  # parse_config's sentence
                raise ValueError(f"config file {config} has unknown key(s) {', '.join(unknown)}; see --help.")
    if "-h" in args or "--help" in args:
        parser.set_defaults(**defaults)
        parser.print_help()
        parser.exit(0)
    unset = object()  # not argparse.SUPPRESS: Python 3.11 converts that string with the flag's type
    parser.set_defaults(**dict.fromkeys(_dests(parser), unset))
    namespace, unused = parser.parse_known_args(args)
    given = {dest: value for dest, value in vars(namespace).items() if value is not unset}
    given.pop("config", None)
    # A value the early parser leaves as text where the full one converts it (a custom type) is judged there.
    unconverted = {dest for dest in given if dest in getattr(parser, "unconverted", set())}
    types = {action.dest: action.type for action in parser._actions}
    try:  # argparse converts a default given as text with the flag's type, as the full parser does the file's
        defaults = {
            key: types[key](value) if isinstance(value, str) and types.get(key) not in (None, str) else value
            for key, value in defaults.items()
        }
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        return  # the full parse says what is wrong with it
    for kind in dataclass_types:
        if isinstance(kind, str):
            continue
        fields = {field.name for field in dataclasses.fields(kind) if field.init}
        values = {name: value for name, value in {**defaults, **given}.items() if name in fields}
        if unconverted & set(values):
            continue
        try:
            kind(**values)  # its own checks: a ValueError is the bad input's sentence
        except ValueError:
            raise
        except Exception:  # a value of a type the full parse would have changed: it judges
            return
    if unused:  # what HfArgumentParser says, once the dataclasses are built
        raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {unused}")


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {action.dest for action in parser._actions if action.dest != "help"}
