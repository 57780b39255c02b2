"""The curriculum's and the methods' options as training arguments, and the generator of the file that writes them out.

Every option is declared once, on the schedule field or method-config field it sets
(:func:`hf_icot.curriculum.base.option`). :mod:`hf_icot.training.schedule_arguments` spells each one out as a typed
dataclass field, so that an IDE and a type checker see it on :class:`~hf_icot.training.config.ICoTConfig`; that file is
generated from the declarations by::

    python -m hf_icot.training.declared_options --write

Its names, types and defaults are written there literally (what static tools read); its help and choices are taken
from the declarations when it is imported (:func:`option_metadata`), so editing a help text needs no regeneration, and
adding, renaming, retyping or re-defaulting an option needs that one command (``tests/hf_icot/test_architecture.py``
fails until the file matches, naming it).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any

from hf_icot.curriculum import SCHEDULES, ScheduleOption, schedule_options
from hf_icot.curriculum.base import OPTION
from hf_icot.methods import METHODS, method_options

#: The generated module, beside this one.
GENERATED = Path(__file__).with_name("schedule_arguments.py")
COMMAND = "python -m hf_icot.training.declared_options --write"
DEFAULT_SCHEDULE = "stepwise"
_LINE_LENGTH = 119


@functools.cache
def declared_options() -> dict[str, ScheduleOption]:
    """Every flat option the schedules' and the methods' configs declare, in declaration order (``seed`` included:
    ``TrainingArguments`` has it); gathered once, as the registries are fixed at import."""
    return {**schedule_options(), **method_options()}


def option_metadata(name: str) -> dict[str, Any]:
    """The ``field`` metadata of the declared option ``name``: its help (led by the schedules or methods that read it,
    where not all do; with the defaults where they differ) and its choices, where it lists them.

    Raises:
        LookupError: ``name`` declared nowhere (the generated file is stale: run :data:`COMMAND`).
    """
    if name not in declared_options():
        raise LookupError(f"option {name!r} is declared nowhere; regenerate ScheduleArguments: {COMMAND}")
    option = declared_options()[name]
    metadata: dict[str, Any] = {"help": option.help}
    if option.choices:
        metadata["choices"] = list(option.choices)
    return metadata


def schedule_metadata() -> dict[str, Any]:
    """The ``field`` metadata of ``schedule``, the option that picks the curriculum (and with it the method)."""
    return {"help": f"Curriculum: one of {', '.join(SCHEDULES)}.", "choices": list(SCHEDULES)}


def _annotation(kind: Any) -> str:
    """``kind`` as source text; builtins only, so the generated file needs no import to name them."""
    if kind is type(None):
        return "None"
    if isinstance(kind, type) and not typing.get_args(kind):
        if kind.__module__ != "builtins":
            raise ValueError(f"type {kind!r} is not a builtin; the generated ScheduleArguments cannot name it.")
        return kind.__name__
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        return " | ".join(_annotation(arg) for arg in args)
    if isinstance(origin, type) and args:
        return f"{_annotation(origin)}[{', '.join(_annotation(arg) for arg in args)}]"
    raise ValueError(f"type {kind!r} cannot be written in the generated ScheduleArguments; use builtins and |.")


def _string(text: str) -> str:
    """``text`` as a string literal in ``ruff format``'s quotes (double, unless the text holds one)."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        literal = '"' + literal[1:-1].replace("\\'", "'") + '"'
    return literal


def _default(value: Any) -> str:
    """``value`` as source text (``math.inf`` for infinities)."""
    if isinstance(value, float) and math.isinf(value):
        return "math.inf" if value > 0 else "-math.inf"
    if isinstance(value, str):
        return _string(value)
    if value is None or isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
        return repr(value)
    raise ValueError(f"default {value!r} cannot be written in the generated ScheduleArguments; use a scalar or None.")


def _field_line(name: str, annotation: str, default: str, metadata: str) -> list[str]:
    """One field, laid out as ``ruff format`` lays it out (the call split at its brackets when too long)."""
    head, arguments = f"    {name}: {annotation} = field(", f"default={default}, metadata={metadata}"
    if len(head) + len(arguments) + 1 <= _LINE_LENGTH:
        return [f"{head}{arguments})"]
    if len(arguments) + 8 > _LINE_LENGTH:
        raise ValueError(f"option {name!r} is too long a line for the generated ScheduleArguments; shorten its name.")
    return [head, f"        {arguments}", "    )"]


def _declaring_class(cls: type, field_name: str) -> type:
    """The dataclass in ``cls``'s MRO that first has the field ``field_name`` (where to edit it)."""
    return next(
        base
        for base in reversed(cls.__mro__)
        if dataclasses.is_dataclass(base)
        and field_name in vars(base).get("__annotations__", {})
        and field_name in {f.name for f in dataclasses.fields(base)}  # not a ClassVar of the same name
    )


def _declared_in(option: ScheduleOption) -> str:
    """``module.Class`` of the dataclass that declares ``option`` (a schedule or a method's config)."""
    reader, field_name = next(iter(option.fields.items()))
    candidates = [SCHEDULES.get(reader), getattr(METHODS.get(reader), "config_class", None)]
    for cls in [cls for cls in candidates if cls is not None]:
        declared = {f.name: f.metadata[OPTION] or f.name for f in dataclasses.fields(cls) if OPTION in f.metadata}
        if declared.get(field_name) == option.name:
            owner = _declaring_class(cls, field_name)
            return f"{owner.__module__}.{owner.__qualname__}"
    raise ValueError(f"option {option.name!r} is declared by no schedule or method config named {reader!r}.")


def schedule_arguments_source() -> str:
    """The text of :mod:`hf_icot.training.schedule_arguments` as the declarations give it now."""
    from transformers import TrainingArguments

    taken = {f.name for f in dataclasses.fields(TrainingArguments)}
    body = _field_line("schedule", "str", _string(DEFAULT_SCHEDULE), "schedule_metadata()")
    where = None
    for option in declared_options().values():
        if option.name in taken:
            continue
        if _declared_in(option) != where:
            where = _declared_in(option)
            body.append(f"    # {where}")
        kind = option.type if option.default is not None else option.type | None
        body += _field_line(
            option.name, _annotation(kind), _default(option.default), f"option_metadata({_string(option.name)})"
        )
    imports = "import math\n" if any("math.inf" in line for line in body) else ""
    return _TEMPLATE.format(command=COMMAND, imports=imports, fields="\n".join(body))


_TEMPLATE = '''"""The curriculum's and the methods' options as training arguments: :class:`ScheduleArguments`, one typed field
per option, which :class:`hf_icot.training.config.ICoTConfig` inherits.

GENERATED from the options that the schedules and the methods' configs declare with
:func:`hf_icot.curriculum.base.option`; do not edit. To add or change an option, declare it on its schedule or method
config (its help, choices, default and type) and run

    {command}

(a test fails until this file matches). Names, types and defaults are written here for IDEs and type checkers; each
help text and list of choices comes from its declaration when this module is imported.
"""

from __future__ import annotations

{imports}from dataclasses import dataclass, field

from hf_icot.training.declared_options import option_metadata, schedule_metadata


@dataclass
class ScheduleArguments:
    """The curriculum's and the methods' options: ``schedule`` and one field per declared option (``seed`` is
    ``TrainingArguments``'), under the class that declares each."""

{fields}
'''


def main(argv: list[str] | None = None) -> int:
    """``--write``: (re)write :data:`GENERATED`; ``--check``: status 1 if it differs from the declarations."""
    parser = argparse.ArgumentParser(description="Generate hf_icot/training/schedule_arguments.py from the options.")
    parser.add_argument("--write", action="store_true", help="Write the file (default: print it).")
    parser.add_argument("--check", action="store_true", help="Exit 1 when the file differs from the declarations.")
    args = parser.parse_args(argv)
    source = schedule_arguments_source()
    if args.check:
        if GENERATED.read_text(encoding="utf-8") != source:
            print(f"{GENERATED} differs from the declared options; run: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if args.write:
        GENERATED.write_text(source, encoding="utf-8")
        print(f"wrote {GENERATED}")
        return 0
    sys.stdout.write(source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
