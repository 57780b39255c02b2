"""Continuous-thought methods on any causal LM: Coconut and CODI (their curricula are in
:mod:`hf_icot.curriculum.latent`, their batches in :mod:`hf_icot.data.latent`).

* :mod:`~hf_icot.methods.latent_forward` — the forward that feeds hidden states back as input embeddings, one pass per
  latent column with the KV cache; CODI's projection and its files;
* :mod:`~hf_icot.methods.losses` — Coconut's and CODI's losses, computed inside the model's forward;
* :mod:`~hf_icot.methods.generation` — latent generation: the latent passes, then batched greedy decoding.

:func:`load_latent_model` loads a trained run (a folder or a Hub repo) with its projection, ready for
:func:`~hf_icot.methods.generation.generate_latent`.
"""

from __future__ import annotations

import os
from typing import Any


def load_latent_model(name_or_path: str, **from_pretrained: Any) -> tuple[Any, Any]:
    """The model and tokenizer of a Coconut or CODI run, with CODI's projection attached where the run saved one; a
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


__all__ = ["load_latent_model"]
