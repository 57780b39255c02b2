"""Methods: how a run's CoT leaves the sequence, one object each, registered by the schedule that names it
(``--schedule``, as every curriculum).

* :mod:`~hf_icot.methods.base` — :class:`~hf_icot.methods.base.Method`, the hooks the trainer calls, and the
  token-removal family (every truncating curriculum) as the plain case;
* :mod:`~hf_icot.methods.coconut` — Coconut: continuous thoughts stage by stage;
* :mod:`~hf_icot.methods.codi` — CODI: a CoT teacher distilled into a latent student, with its projection;
* :mod:`~hf_icot.methods.pccot` — PCCoT: CODI's teacher and student, the thoughts computed together by Jacobi
  iteration;
* :mod:`~hf_icot.methods.simcot` — SIM-CoT's step supervision, an option of every latent method (``simcot``): an
  auxiliary decoder trained to write each thought's step, saved beside the model, never in it;
  :mod:`~hf_icot.methods.simcot_decoding` reads what each thought says with it;
* what the continuous-thought methods share: :mod:`~hf_icot.methods.latent` (set-up, rendering, the loss path),
  :mod:`~hf_icot.methods.latent_batches` (their batches), :mod:`~hf_icot.methods.latent_forward` (the forward that
  feeds hidden states back, one pass per latent column with the KV cache, or all columns at once by Jacobi
  iteration; the projection and its files), :mod:`~hf_icot.methods.generation` (latent generation: the latent passes,
  then batched greedy decoding).

:data:`METHODS` names the methods by schedule; :func:`build_method` builds a run's method from its schedule and the
flat options (:func:`method_options`, declared once on each method's config). :func:`load_latent_model` loads a
trained run (a folder or a Hub repo) with its projection, ready for
:func:`~hf_icot.methods.generation.generate_latent`. Adding a method: ``docs/methods.md``, "How to add a method".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hf_icot.curriculum import ScheduleOption, declared_options, declared_values
from hf_icot.methods.base import Method, MethodConfig
from hf_icot.methods.coconut import CoconutMethod
from hf_icot.methods.codi import CODIMethod
from hf_icot.methods.pccot import PCCoTMethod

#: schedule name -> the method that runs it (a schedule not named here runs :class:`Method`, token removal).
METHODS: dict[str, type[Method]] = {
    name: cls for cls in (CoconutMethod, CODIMethod, PCCoTMethod) for name in cls.schedules
}


def method_class(schedule_name: str) -> type[Method]:
    """The method that runs the schedule ``schedule_name`` (token removal for every truncating curriculum)."""
    return METHODS.get(schedule_name, Method)


def method_options() -> dict[str, ScheduleOption]:
    """Every flat option the methods' configs declare (their fields' :func:`~hf_icot.curriculum.base.option`)."""
    return declared_options({name: cls.config_class for name, cls in METHODS.items()})


def build_method(schedule: Any, options: Mapping[str, Any]) -> Method:
    """The method of ``schedule`` with its config set from the flat ``options`` (absent or None: the default).

    Raises:
        ValueError: an invalid option (one sentence from the method's config).
    """
    cls = method_class(schedule.name)
    return cls(schedule, cls.config_class(**declared_values(cls.config_class, options)))


def load_latent_model(name_or_path: str, **from_pretrained: Any) -> tuple[Any, Any]:
    """The model and tokenizer of a Coconut, CODI or PCCoT run, with its projection attached where the run saved one; a
    LoRA adapter saved alone is put on its base (named in ``adapter_config.json``) widened to the run's vocabulary.

    ``name_or_path`` is a run folder or a Hub repo id; ``from_pretrained`` goes to both ``from_pretrained`` calls
    (e.g. ``revision``).

    Raises:
        ValueError: what :func:`~hf_icot.methods.latent_forward.load_projection` refuses.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_icot.methods.latent_forward import PROJECTION_CONFIG, PROJECTION_WEIGHTS, load_projection

    tokenizer = AutoTokenizer.from_pretrained(name_or_path, **from_pretrained)
    if _has_file(name_or_path, "adapter_config.json", from_pretrained.get("revision")):
        # A LoRA adapter saved alone: its base, widened to the run's vocabulary (the latent markers), then the adapter
        # (which carries the widened embeddings).
        from peft import PeftConfig, PeftModel

        base_name = PeftConfig.from_pretrained(name_or_path, **from_pretrained).base_model_name_or_path
        base = AutoModelForCausalLM.from_pretrained(base_name)
        if base.get_input_embeddings().weight.shape[0] < len(tokenizer):
            base.resize_token_embeddings(len(tokenizer))
        model = PeftModel.from_pretrained(base, name_or_path, **from_pretrained)
    else:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, **from_pretrained)
    folder = name_or_path
    if not os.path.isdir(name_or_path):  # a Hub repo: fetch the projection's two files where it has them
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        revision = from_pretrained.get("revision")
        try:
            paths = [
                hf_hub_download(name_or_path, name, revision=revision)
                for name in (PROJECTION_WEIGHTS, PROJECTION_CONFIG)
            ]
            folder = os.path.dirname(paths[0])
        except EntryNotFoundError:
            return model, tokenizer
    load_projection(folder, model)
    return model, tokenizer


def _has_file(name_or_path: str, filename: str, revision: str | None) -> bool:
    if os.path.isdir(name_or_path):
        return os.path.isfile(os.path.join(name_or_path, filename))
    from huggingface_hub import file_exists

    return file_exists(name_or_path, filename, revision=revision)


__all__ = [
    "METHODS",
    "Method",
    "MethodConfig",
    "build_method",
    "load_latent_model",
    "method_class",
    "method_options",
]
