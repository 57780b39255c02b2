"""Model and tokenizer for an ICoT run: a pretrained causal LM of any family (Hub id or folder), or a small model
built from scratch with a word-level tokenizer from the data, optionally with a LoRA adapter.

The tokenizer is made ready for the run's :class:`~hf_icot.curriculum.SequenceLayout`: it gets the placeholder token
under ``fill="pad"`` and the length-hint tokens of a mixture with hints, and the model's embeddings grow to match.
Weights load from safetensors only; code shipped with a Hub repo runs only with ``trust_remote_code``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.cot import cot_token_count
from hf_icot.curriculum.layout import LATENT_TOKENS, SequenceLayout
from hf_icot.locations import names_a_missing_folder

#: The recipe's :class:`hf_icot.command_line.arguments.ModelArguments`, read by attribute: the command line sits above
#: this room, so the class is not imported here (not even for type checking).
ModelArguments = Any

#: The family a scratch model has when its mapping names no ``model_type``.
DEFAULT_SCRATCH_FAMILY = "gpt2"


def longest_hint(layout: SequenceLayout, train: Sequence[Mapping[str, Any]], tokenizer: Any = None) -> int:
    """The longest length hint the curriculum can insert: the training data's longest CoT in ``layout.unit`` units
    (tokens of ``tokenizer``, words without one); 0 without hints."""
    if not layout.hint:
        return 0
    if layout.unit == "step":
        return max((len(example["cot"]) for example in train), default=0)
    return max((cot_token_count(example, tokenizer) for example in train), default=0)


def _is_causal_lm(model_type: str) -> bool:
    """Whether ``model_type`` has a causal LM head: one of transformers' own, or a model registered with
    ``AutoModelForCausalLM`` (as the parity study's theory models are when ``results.parity.theory`` is imported)."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return True
    return model_type in CONFIG_MAPPING and CONFIG_MAPPING[model_type] in MODEL_FOR_CAUSAL_LM_MAPPING


def scratch_config(fields: Mapping[str, Any], tokenizer: Any) -> Any:
    """The ``PretrainedConfig`` of a model from scratch: ``fields`` (plus ``model_type``, default gpt2) with the
    vocabulary and special-token ids of ``tokenizer``.

    Raises:
        ValueError: an unknown ``model_type``, one without a causal LM head, a field its config does not have, or
            one the tokenizer sets (``vocab_size`` and the special-token ids).
    """
    from transformers import CONFIG_MAPPING, PretrainedConfig

    fields = dict(fields)
    family = fields.pop("model_type", DEFAULT_SCRATCH_FAMILY)
    if family not in CONFIG_MAPPING:
        raise ValueError(
            f"--scratch_model model_type {family!r} is unknown to transformers; use a causal LM family such as "
            "gpt2, llama, qwen2 or mistral."
        )
    if not _is_causal_lm(family):
        raise ValueError(
            f"--scratch_model model_type {family!r} has no causal LM head in transformers; use a causal LM family "
            "such as gpt2, llama, qwen2 or mistral."
        )
    config_class = CONFIG_MAPPING[family]
    ids = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    ids.update(bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    # Models that read given tokens by id (the parity theory models: "0", "1", "####", the placeholder) list them.
    for name, token in getattr(config_class, "token_fields", {}).items():
        ids[name] = tokenizer.convert_tokens_to_ids(token)
    known = set(config_class().to_dict()) | set(getattr(config_class, "attribute_map", {}))
    unknown = sorted(set(fields) - known)
    if unknown:  # a config class takes any keyword, so a typo would be ignored silently
        close = difflib.get_close_matches(unknown[0], known, n=1)
        own = sorted(k for k in known - set(PretrainedConfig().to_dict()) - set(ids) if not k.startswith("_"))
        nearest = difflib.get_close_matches(unknown[0], own, n=3, cutoff=0.0)  # all of them run to 500 characters
        raise ValueError(
            f"--scratch_model field {unknown[0]!r} is not a {config_class.__name__} field"
            + (f" (did you mean {close[0]!r})" if close else "")
            + f"; the {family} fields spelled nearest are {', '.join(nearest)} ({config_class.__name__}'s "
            "documentation lists the others)."
        )
    taken = sorted(set(fields) & set(ids))
    if taken:
        raise ValueError(
            f"--scratch_model field {taken[0]!r} is set from the word-level tokenizer built from the data; "
            "leave it out."
        )
    return config_class(**ids, **fields)


def load_model_and_tokenizer(
    args: ModelArguments, layout: SequenceLayout, dataset: Mapping[str, Any]
) -> tuple[Any, Any]:
    """The model and tokenizer ``args`` names, ready for a run laid out as ``layout`` on ``dataset`` (its splits).

    From scratch, the tokenizer is word-level, built from every split (so that evaluation splits' words are known),
    with the layout's placeholder and hint tokens; otherwise it is the model's own, with those tokens added and the
    embeddings resized. Hints go up to the ``train`` split's longest CoT.

    Raises:
        ValueError: a missing folder, a model that cannot be loaded (offline, unknown id, no safetensors, not a
            causal LM), a bad ``--scratch_model`` mapping, or a word-level tokenizer that does not know a word of the
            data (:func:`hf_icot.data.row_checks.check_words`); one sentence saying what to give instead.
    """
    from transformers import AutoModelForCausalLM

    from hf_icot.data.row_checks import check_words
    from hf_icot.data.tokenization import build_word_level_tokenizer, prepare_tokenizer_for_icot

    if args.scratch_model is not None:
        tokenizer = build_word_level_tokenizer(
            dataset,
            max_hint_length=longest_hint(layout, dataset["train"]),
            extra_tokens=LATENT_TOKENS if layout.latent else (),
        )
        model = AutoModelForCausalLM.from_config(scratch_config(args.scratch_model, tokenizer))
        return _in_dtype(model, args), tokenizer
    model, tokenizer = _load_pretrained(args)
    check_words(dataset, tokenizer)  # a fixed word vocabulary would turn an unknown word into <unk>
    prepare_tokenizer_for_icot(
        tokenizer,
        model,
        max_hint_length=longest_hint(layout, dataset["train"], tokenizer),
        use_placeholder=layout.uses_placeholder,
        latent=layout.latent,
    )
    return _in_dtype(model, args), tokenizer


def _in_dtype(model: Any, args: ModelArguments) -> Any:
    """``model`` with its weights in ``args.dtype`` (unset: as it is)."""
    import torch

    return model if getattr(args, "dtype", None) is None else model.to(getattr(torch, args.dtype))


def _load_pretrained(args: ModelArguments) -> tuple[Any, Any]:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    name = args.model_name_or_path
    if names_a_missing_folder(name):
        raise ValueError(
            f"model folder {name!r} does not exist; give a folder saved with save_pretrained, or a Hub id."
        )
    remote = {"trust_remote_code": args.trust_remote_code}
    try:
        config = AutoConfig.from_pretrained(name, **remote)
        if not _is_causal_lm(config.model_type) and not args.trust_remote_code:
            raise ValueError(
                f"the model {name!r} is a {config.model_type} model without a causal LM head in transformers; give a "
                "causal LM (e.g. gpt2, a Llama, Qwen2 or Mistral model)."
            )
        model = AutoModelForCausalLM.from_pretrained(name, config=config, use_safetensors=True, **remote)
        tokenizer = AutoTokenizer.from_pretrained(name, **remote)
    except (OSError, ValueError) as error:  # transformers raises ValueError for a tokenizer it cannot build
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if message.startswith(f"the model {name!r} is a"):
            raise
        if os.path.isdir(name):
            reason = f"the folder holds no safetensors causal LM with its tokenizer ({message})"
        elif _offline():
            reason = "it is not in the local cache and HF_HUB_OFFLINE is set; unset it, or give a local folder"
        else:
            reason = f"the Hub has no such model or is unreachable ({message}); check the id"
        raise ValueError(f"cannot load the model {name!r}: {reason}.") from None
    return model, tokenizer


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


def apply_lora(model: Any, args: ModelArguments) -> Any:
    """``model`` wrapped with a LoRA adapter on ``args.lora_target_modules`` (default: peft's modules for the family;
    GPT-2's Conv1D layers get ``fan_in_fan_out``). The adapter names ``args.base_model_hub_id`` as its base.

    Raises:
        ValueError: target modules the model lacks (the message lists its layer names), or a family peft has no
            default modules for while none are given.
    """
    from peft import LoraConfig, get_peft_model
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    from transformers.pytorch_utils import Conv1D

    leaves = sorted({name.split(".")[-1] for name, module in model.named_modules() if not list(module.children())})
    wanted = args.lora_target_modules
    if wanted is None:
        wanted = TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.get(model.config.model_type)
        if wanted is None:
            raise ValueError(
                f"peft has no default LoRA modules for {model.config.model_type} models; pass --lora_target_modules "
                f"with some of its layer names ({', '.join(leaves[:12])})."
            )
    targets = [module for name, module in model.named_modules() if name.split(".")[-1] in wanted]
    if not targets:
        raise ValueError(
            f"--lora_target_modules {' '.join(wanted)} names no module of {args.name!r}; "
            f"its layers are named {', '.join(leaves[:12])}; pass some of those."
        )
    config = LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(wanted),
        fan_in_fan_out=all(isinstance(module, Conv1D) for module in targets),
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)
    if args.base_model_hub_id:  # what adapter_config.json names, so that others can load the base
        model.peft_config["default"].base_model_name_or_path = args.base_model_hub_id
    return model


def widen_positions(model: Any, n_positions: int) -> None:
    """Give a GPT-2 ``n_positions`` position embeddings in place, the new rows copies of the last (the reference's
    expansion for ``--truncation`` beyond 1,024); a model with as many or more is left as it is.

    Raises:
        ValueError: a model without GPT-2's ``transformer.wpe``.
    """
    import torch

    wpe = getattr(getattr(model, "transformer", None), "wpe", None)
    if not isinstance(wpe, torch.nn.Embedding):
        raise ValueError(
            f"--n_positions widens GPT-2 position embeddings (transformer.wpe); {type(model).__name__} has none."
        )
    old = wpe.weight.shape[0]
    if n_positions <= old:
        return
    wider = torch.nn.Embedding(n_positions, wpe.weight.shape[1], device=wpe.weight.device, dtype=wpe.weight.dtype)
    with torch.no_grad():
        wider.weight[:old] = wpe.weight
        wider.weight[old:] = wpe.weight[-1]
    model.transformer.wpe = wider
    model.config.n_positions = n_positions


def reinitialize_weights(model: Any) -> None:
    """Re-draw every weight in place with the model's own initialisation (``_init_weights``), as the reference's
    ``--reinitialize_weights``: the architecture and tokenizer of a pretrained model, none of its training."""
    # transformers skips tensors it marked initialised (after loading); unmark them so that every one is drawn.
    for tensor in [*model.parameters(), *model.buffers()]:
        if getattr(tensor, "_is_hf_initialized", False):
            tensor._is_hf_initialized = False
    model.apply(model._init_weights)


def load_model_for_run(args: ModelArguments, layout: SequenceLayout, dataset: Mapping[str, Any]) -> tuple[Any, Any]:
    """:func:`load_model_and_tokenizer`, then what the other ``args`` ask, in the reference's order: wider position
    embeddings (``n_positions``), fresh weights (``reinitialize_weights``), a LoRA adapter (``use_peft``).

    Raises:
        ValueError: as :func:`load_model_and_tokenizer`, :func:`widen_positions` and :func:`apply_lora`.
    """
    model, tokenizer = load_model_and_tokenizer(args, layout, dataset)
    if args.scratch_model is not None:  # built from the data's words, but one of them may be its <unk>
        from hf_icot.data.row_checks import check_words

        check_words(dataset, tokenizer)
    if args.n_positions is not None:
        widen_positions(model, args.n_positions)
    if args.reinitialize_weights:
        reinitialize_weights(model)
    if args.use_peft:
        model = apply_lora(model, args)
    return model, tokenizer
