"""Task name -> task module, and the checks that hold every task module to the same contract.

A task module ``datasets_builder/tasks/<name>.py`` exposes:

* ``TASK_NAME``, ``DESCRIPTION`` (a paragraph for the card), ``GENERATOR_VERSION``;
* ``Params``, a dataclass whose fields all have defaults and ``metadata={"help": ...}`` (optionally ``"choices"``),
  typed str, int, float, bool or list[int | float | str], with a ``seed`` field, validating itself in
  ``__post_init__`` and naming its Hub config with ``config_name()``;
* ``build(params, progress=False) -> datasets.DatasetDict``, deterministic;
* ``card_details(params) -> dict[str, str]``, extra facts for the dataset card.

Adding a task is one line in :data:`TASK_MODULES`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import typing
from types import ModuleType
from typing import Any

#: Task name -> its module under ``datasets_builder.tasks`` (imported only when the task is used).
TASK_MODULES: dict[str, str] = {
    "ambiguity": "ambiguity",
    "latent_json": "latent_json",
    "multiplication": "multiplication",
    "parity": "parity",
    "reference_text": "reference_text",
    "semiautomaton": "semiautomata",
}

CONFIG_NAME_PATTERN = re.compile(r"[A-Za-z0-9_]+")
_SCALAR_TYPES = (str, int, float, bool)
_REQUIRED_ATTRIBUTES = ("TASK_NAME", "DESCRIPTION", "GENERATOR_VERSION", "Params", "build", "card_details")


def task_names() -> list[str]:
    """The registered task names, sorted."""
    return sorted(TASK_MODULES)


def get_task(name: str) -> ModuleType:
    """The module of task ``name``.

    Raises:
        ValueError: ``name`` is not a registered task (the message lists the registered ones).
    """
    if name not in TASK_MODULES:
        raise ValueError(f"task {name!r} is unknown; allowed: {', '.join(task_names())}.")
    return importlib.import_module(f"datasets_builder.tasks.{TASK_MODULES[name]}")


def param_fields(task: ModuleType) -> list[tuple[dataclasses.Field, Any]]:
    """The fields of ``task.Params`` with their resolved types (``from __future__ import annotations`` leaves the
    annotations as strings, so ``field.type`` alone cannot be trusted)."""
    hints = typing.get_type_hints(task.Params)
    return [(f, hints[f.name]) for f in dataclasses.fields(task.Params)]


def list_element_type(annotation: Any) -> type | None:
    """``int`` for ``list[int]`` (and so on); None when ``annotation`` is not a list type."""
    if typing.get_origin(annotation) is list:
        (element,) = typing.get_args(annotation)
        return element
    return None


def field_default(field: dataclasses.Field) -> Any:
    """The default value of a Params field (calling its default factory)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def make_params(task_name: str, **values: Any) -> Any:
    """``Params`` of task ``task_name`` from keyword values (e.g. a recipe's YAML mapping).

    Raises:
        ValueError: unknown task, a key that is not a parameter of the task (the message lists the parameters), or
            a value the task's ``Params`` rejects.
    """
    task = get_task(task_name)
    known = [f.name for f, _ in param_fields(task)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"parameter {unknown[0]!r} is unknown for task {task_name!r}; allowed: {', '.join(known)}.")
    return task.Params(**values)


def build_dataset(task_name: str, task_args: dict[str, Any] | None = None, progress: bool = False) -> tuple[Any, dict]:
    """Build a task in memory — no folder is written — for a recipe that trains on it directly.

    Args:
        task_name: a registered task (:func:`task_names`).
        task_args: its parameters (:func:`make_params`); unset ones take their defaults.
        progress: show the task's progress bar.

    Returns:
        The ``datasets.DatasetDict`` (same rows as ``python -m datasets_builder build`` writes) and what a model
        card says about it: ``source``, ``config``, ``task`` (reference text files are named by their folder, e.g.
        gsm8k, which says more than the task's name) and ``fingerprint`` (the parameters and each split's datasets
        fingerprint).

    Raises:
        ValueError: as :func:`make_params`, or the task's own one-sentence errors.
    """
    params = make_params(task_name, **(task_args or {}))
    dataset = get_task(task_name).build(params, progress=progress)
    fingerprints = ", ".join(f"{name} {split._fingerprint}" for name, split in dataset.items())
    info = {
        "source": f"datasets_builder:{task_name}",
        "config": params.config_name(),
        "task": params.config_name() if task_name in ("reference_text", "latent_json") else task_name,
        "fingerprint": f"built on the fly from {json.dumps(vars(params), sort_keys=True)} ({fingerprints})",
    }
    return dataset, info


def check_task_module(task: ModuleType) -> None:
    """Check that ``task`` follows the module contract above, so the CLI, the card and recipes can rely on it.

    Raises:
        TypeError: the first breach found, named.
    """
    where = task.__name__
    for attribute in _REQUIRED_ATTRIBUTES:
        if not hasattr(task, attribute):
            raise TypeError(f"{where} lacks {attribute}; every task module defines {', '.join(_REQUIRED_ATTRIBUTES)}.")
    if TASK_MODULES.get(task.TASK_NAME) != where.rsplit(".", 1)[-1]:
        raise TypeError(f"{where} has TASK_NAME {task.TASK_NAME!r}, which TASK_MODULES does not map to this module.")
    if not dataclasses.is_dataclass(task.Params):
        raise TypeError(f"{where}.Params is not a dataclass.")
    names = []
    for field, annotation in param_fields(task):
        names.append(field.name)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise TypeError(f"{where}.Params.{field.name} has no default; every parameter needs one.")
        if not field.metadata.get("help"):
            raise TypeError(f"{where}.Params.{field.name} has no metadata['help']; the CLI shows it as --help.")
        element = list_element_type(annotation)
        if annotation not in _SCALAR_TYPES and element not in (int, float, str):
            raise TypeError(
                f"{where}.Params.{field.name} has type {annotation!r}; allowed: str, int, float, bool, list."
            )
    if "seed" not in names:
        raise TypeError(f"{where}.Params has no seed field; every task records its seed.")
    config_name = task.Params().config_name() if _defaults_are_valid(task) else None
    if config_name is not None and not CONFIG_NAME_PATTERN.fullmatch(config_name):
        raise TypeError(f"{where} default config name {config_name!r} is not made of [A-Za-z0-9_].")


def _defaults_are_valid(task: ModuleType) -> bool:
    """Whether ``Params()`` validates (a task may require an argument, e.g. the files to read)."""
    try:
        task.Params()
    except ValueError:
        return False
    return True


def option_name(field_name: str) -> str:
    """The command-line option of a Params field: ``--`` and the field name as written in Python and YAML."""
    return f"--{field_name}"


def params_to_argv(values: dict[str, Any]) -> list[str]:
    """The ``build`` command-line arguments that give ``values`` (a Params as a dict) to a task: the inverse of the
    CLI's parsing, used for the card's rebuild command. Every value is written out, defaults included, so the
    command does not depend on the defaults of a later version."""
    argv: list[str] = []
    for name, value in values.items():
        if isinstance(value, bool):
            argv.append(option_name(name) if value else f"--no-{name}")
        elif isinstance(value, list):
            if value:  # an empty list is only ever a default: nargs="+" cannot spell it
                argv += [option_name(name), *(str(item) for item in value)]
        else:
            argv += [option_name(name), str(value)]
    return argv
