"""Curricula: which CoT tokens each example loses at each optimizer step. Pure Python and numpy — no torch.

* :mod:`~hf_icot.curriculum.base` — the :class:`Schedule` base, its validators and draws, :class:`FullCoT`,
  :class:`NoCoT`;
* :mod:`~hf_icot.curriculum.removal` — :class:`Stepwise`, the stepwise-ICoT reference, on the shared
  :class:`~hf_icot.curriculum.removal.CountedRemoval`;
* :mod:`~hf_icot.curriculum.adaptive` — :class:`AdaptiveStepwise`: the next unit goes once the model has absorbed
  the last removal;
* :mod:`~hf_icot.curriculum.stages` — :class:`Staged` (left / right / inductive) and :class:`LogICoT`;
* :mod:`~hf_icot.curriculum.mixture` — :class:`Mixture`: every example draws its CoT length;
* :mod:`~hf_icot.curriculum.latent` — :class:`Coconut`, :class:`CODI` and :class:`PCCoT`: CoT steps give way to latent
  thoughts;
* :mod:`~hf_icot.curriculum.layout` — :class:`SequenceLayout`, how a run lays out its sequences.

The registry :data:`SCHEDULES` names them; :func:`schedule_from_dict` rebuilds one from ``Schedule.to_dict()`` (as
checkpoints and model cards store it), :func:`schedule_options` lists the flat options their fields declare and
:func:`build_schedule` builds one from such options (what :class:`hf_icot.training.config.ICoTConfig` does).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hf_icot.curriculum.adaptive import AdaptiveStepwise
from hf_icot.curriculum.base import OPTION, FullCoT, NoCoT, Schedule
from hf_icot.curriculum.latent import CODI, Coconut, LatentPlan, LatentSchedule, PCCoT
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.curriculum.mixture import Mixture
from hf_icot.curriculum.removal import Stepwise
from hf_icot.curriculum.stages import LogICoT, Staged

SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls
    for cls in (FullCoT, NoCoT, Stepwise, Staged, LogICoT, Mixture, AdaptiveStepwise, Coconut, CODI, PCCoT)
}


def schedule_class(name: str) -> type[Schedule]:
    """The schedule registered as ``name``.

    Raises:
        ValueError: an unknown name, with the allowed ones.
    """
    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is unknown; allowed: {', '.join(SCHEDULES)}.")
    return SCHEDULES[name]


def schedule_from_dict(data: Mapping[str, Any]) -> Schedule:
    """Rebuild a schedule from :meth:`Schedule.to_dict`'s output.

    Raises:
        ValueError: an unknown schedule name or a field the schedule does not have.
    """
    data = dict(data)
    name = data.pop("name", None)
    cls = schedule_class(name)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"schedule {name!r} has no field(s) {', '.join(unknown)}; its fields are {', '.join(sorted(known))}."
        )
    data = {key: math.inf if value == "inf" else value for key, value in data.items()}
    return cls(**data)


@dataclass(frozen=True)
class ScheduleOption:
    """A flat option that sets a schedule field (declared once, on the field, with :func:`~hf_icot.curriculum.base.
    option`).

    Attributes:
        name: the option's name (``removal_fill``, ``remove_per_epoch``, …).
        type: the field's type.
        default: the field's default where every schedule that has it agrees, else None ("the schedule's own").
        help: what it does, led by the schedules that read it where not all do.
        choices: the allowed values, where the field lists them.
        fields: schedule name -> the field it sets there.
    """

    name: str
    type: Any
    default: Any
    help: str
    choices: tuple[str, ...] | None
    fields: Mapping[str, str]


def schedule_options() -> dict[str, ScheduleOption]:
    """Every option the registered schedules' fields declare, in declaration order."""
    return declared_options(SCHEDULES)


def declared_options(classes: Mapping[str, type]) -> dict[str, ScheduleOption]:
    """Every option the fields of ``classes`` (name -> dataclass; schedules, methods' configs) declare with
    :func:`~hf_icot.curriculum.base.option`, in declaration order; an option read by only some of them says which."""
    found: dict[str, dict[str, Any]] = {}
    for schedule_name, cls in classes.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if not f.init or OPTION not in f.metadata:
                continue
            entry = found.setdefault(
                f.metadata[OPTION] or f.name,
                {"type": hints[f.name], "help": f.metadata["help"], "choices": f.metadata.get("choices"), "by": {}},
            )
            entry["by"][schedule_name] = (f.name, f.default)
    return {name: _option(name, entry, len(classes)) for name, entry in found.items()}


def _option(name: str, entry: dict[str, Any], n_classes: int) -> ScheduleOption:
    readers = list(entry["by"])
    defaults = {schedule: default for schedule, (_, default) in entry["by"].items()}
    help = entry["help"]
    if len(readers) < n_classes:  # "stepwise: units removed ...", but "stepwise: CoT tokens ..." (an acronym stays)
        acronym = any(letter.isupper() for letter in help.split(" ", 1)[0][1:])
        help = f"{'/'.join(readers)}: {help if acronym else help[0].lower() + help[1:]}"
    values = list(dict.fromkeys(defaults.values()))
    default = values[0] if len(values) == 1 else None
    if default is None and len(values) > 1:
        usual = max(values, key=list(defaults.values()).count)
        others = [f"{value} for {', '.join(s for s, d in defaults.items() if d == value)}" for value in values]
        others = [text for value, text in zip(values, others) if value != usual]
        help = f"{help} Default: {'; '.join(others)}; else {usual}."
    choices = tuple(entry["choices"]) if entry["choices"] else None
    fields = {schedule: field_name for schedule, (field_name, _) in entry["by"].items()}
    return ScheduleOption(name, entry["type"], default, help, choices, fields)


def build_schedule(name: str, options: Mapping[str, Any]) -> Schedule:
    """The schedule ``name`` with its fields set from the flat ``options`` (:func:`schedule_options`); an option
    that is absent or None leaves the field's default (e.g. ``fill="pad"`` for log_icot).

    Raises:
        ValueError: an unknown schedule name or an invalid parameter (one sentence from the schedule).
    """
    return schedule_class(name)(**declared_values(schedule_class(name), options))


def declared_values(cls: type, options: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of dataclass ``cls`` set by the flat ``options`` (absent or None: the field's default)."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.init and OPTION in f.metadata and options.get(f.metadata[OPTION] or f.name) is not None:
            kwargs[f.name] = options[f.metadata[OPTION] or f.name]
    return kwargs


__all__ = [
    "SCHEDULES",
    "AdaptiveStepwise",
    "CODI",
    "Coconut",
    "FullCoT",
    "LatentPlan",
    "LatentSchedule",
    "LogICoT",
    "Mixture",
    "NoCoT",
    "PCCoT",
    "Schedule",
    "ScheduleOption",
    "SequenceLayout",
    "Staged",
    "Stepwise",
    "build_schedule",
    "declared_options",
    "declared_values",
    "schedule_class",
    "schedule_from_dict",
    "schedule_options",
]
