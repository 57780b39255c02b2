"""hf_icot.modeling.loading and the model/run arguments: scratch models of three families with the data's vocabulary, LoRA's
default and explicit target modules, and the one-sentence errors of each loader."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hf_icot.command_line.arguments import ModelArguments, ScriptArguments
from hf_icot.cot import cot_token_count
from hf_icot.curriculum import Mixture, Stepwise
from hf_icot.modeling.loading import apply_lora, load_model_and_tokenizer, scratch_config

TASK_ARGS = {"a_digits": 2, "b_digits": 2, "train_size": 16, "validation_size": 4, "test_size": 4, "seed": 0}
#: The smallest config of each family (a 1-layer, 16-wide model).
SCRATCH = {
    "gpt2": {"n_layer": 1, "n_embd": 16, "n_head": 2},
    "llama": {"model_type": "llama", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2},
    "qwen2": {"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2},
}  # fmt: skip


@pytest.fixture(scope="module")
def dataset():
    from datasets_builder import build_dataset

    return build_dataset("multiplication", TASK_ARGS)[0]


def _one_sentence(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert "\n" not in message and message.endswith("."), message
    return message


@pytest.mark.parametrize("family", list(SCRATCH))
def test_scratch_model_of_each_family_has_the_data_vocabulary(family: str, dataset) -> None:
    model, tokenizer = load_model_and_tokenizer(
        ModelArguments(scratch_model=SCRATCH[family]), Stepwise().layout, dataset
    )
    assert model.config.model_type == family
    assert model.config.vocab_size == len(tokenizer) == model.get_input_embeddings().num_embeddings
    assert model.config.eos_token_id == tokenizer.eos_token_id and model.config.pad_token_id == tokenizer.pad_token_id
    ids = tokenizer(" " + dataset["test"][0]["question"], return_tensors="pt")["input_ids"]
    assert tokenizer.unk_token_id not in ids[0].tolist(), "every word of the evaluation splits is in the vocabulary"
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))


def test_scratch_tokenizer_holds_the_layouts_placeholder_and_hint_tokens(dataset) -> None:
    layout = Mixture(fill="pad", hint=True).layout
    model, tokenizer = load_model_and_tokenizer(ModelArguments(scratch_model=SCRATCH["gpt2"]), layout, dataset)
    longest = max(cot_token_count(example) for example in dataset["train"])  # words, without a tokenizer
    vocabulary = tokenizer.get_vocab()
    assert f"<len_{longest}>" in vocabulary and f"<len_{longest + 1}>" not in vocabulary
    assert model.config.vocab_size == len(tokenizer)


def test_scratch_config_refuses_unknown_families_fields_and_tokenizer_fields(dataset) -> None:
    from hf_icot.data.tokenization import build_word_level_tokenizer

    tokenizer = build_word_level_tokenizer(dataset)
    with pytest.raises(ValueError) as caught:
        scratch_config({"model_type": "lama"}, tokenizer)
    assert _one_sentence(caught) == (
        "--scratch_model model_type 'lama' is unknown to transformers; use a causal LM family such as gpt2, llama, "
        "qwen2 or mistral."
    )
    for family in ("t5", "vit"):  # known to transformers, but not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        with pytest.raises(ValueError) as caught:
            scratch_config({"model_type": family}, tokenizer)
        assert _one_sentence(caught).startswith(f"--scratch_model model_type '{family}' has no causal LM head")
    # GPT2Config(**kwargs) takes any keyword; the typo must not be ignored.
    with pytest.raises(ValueError) as caught:
        scratch_config({"n_wings": 2}, tokenizer)
    message = _one_sentence(caught)
    assert message.startswith("--scratch_model field 'n_wings' is not a GPT2Config field; the gpt2 fields spelled "
                              "nearest are ")  # fmt: skip
    assert "vocab_size" not in message and len(message) < 300, "a few of the fields one may set, not those we set"
    with pytest.raises(ValueError) as caught:
        scratch_config({"model_type": "llama", "num_layers": 1}, tokenizer)
    assert _one_sentence(caught).startswith(
        "--scratch_model field 'num_layers' is not a LlamaConfig field (did you mean 'num_hidden_layers'); "
    )
    with pytest.raises(ValueError) as caught:
        scratch_config({"eos_token_id": 0}, tokenizer)
    assert "'eos_token_id' is set from the word-level tokenizer" in _one_sentence(caught)


def test_folder_holding_a_model_without_a_causal_lm_head(tmp_path: Path, dataset) -> None:
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert "t5" not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    folder = tmp_path / "t5"
    config = T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    with pytest.raises(ValueError) as caught:
        load_model_and_tokenizer(ModelArguments(model_name_or_path=str(folder)), Stepwise().layout, dataset)
    assert _one_sentence(caught) == (
        f"the model '{folder}' is a t5 model without a causal LM head in transformers; give a causal LM "
        "(e.g. gpt2, a Llama, Qwen2 or Mistral model)."
    )


@pytest.mark.parametrize(("family", "modules"), [("gpt2", {"c_attn"}), ("llama", {"q_proj", "v_proj"})])
def test_lora_defaults_to_the_familys_attention_modules(family: str, modules: set[str], dataset) -> None:
    args = ModelArguments(scratch_model=SCRATCH[family], use_peft=True, lora_r=2, base_model_hub_id="someone/base")
    model, _ = load_model_and_tokenizer(args, Stepwise().layout, dataset)
    peft_model = apply_lora(model, args)
    config = peft_model.peft_config["default"]
    assert set(config.target_modules) == modules and config.r == 2
    assert config.fan_in_fan_out == (family == "gpt2"), "GPT-2's Conv1D stores its weight transposed"
    assert config.base_model_name_or_path == "someone/base"
    adapted = {name.split(".")[-2] for name, _ in peft_model.named_modules() if name.endswith("lora_A")}
    assert adapted == modules
    trainable = {name for name, parameter in peft_model.named_parameters() if parameter.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)


def test_lora_target_module_the_model_lacks_lists_its_layers(dataset) -> None:
    args = ModelArguments(scratch_model=SCRATCH["llama"], use_peft=True, lora_target_modules=["c_attn"])
    model, _ = load_model_and_tokenizer(args, Stepwise().layout, dataset)
    with pytest.raises(ValueError) as caught:
        apply_lora(model, args)
    message = _one_sentence(caught)
    assert message.startswith("--lora_target_modules c_attn names no module of 'the scratch model'; its layers are ")
    assert "q_proj" in message and message.endswith("pass some of those.")


def test_lora_on_a_family_peft_has_no_defaults_for(dataset) -> None:
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    from transformers import BioGptConfig, BioGptForCausalLM

    assert "biogpt" not in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    model = BioGptForCausalLM(
        BioGptConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    )
    with pytest.raises(ValueError) as caught:
        apply_lora(model, ModelArguments(model_name_or_path="tiny-biogpt", use_peft=True))
    message = _one_sentence(caught)
    assert message.startswith("peft has no default LoRA modules for biogpt models; pass --lora_target_modules with ")
    assert "q_proj" in message
    adapted = apply_lora(model, ModelArguments(model_name_or_path="x", use_peft=True, lora_target_modules=["q_proj"]))
    assert any(name.endswith("q_proj.lora_A") for name, _ in adapted.named_modules())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lora_r": 0}, "--lora_r 0 is not allowed; it must be >= 1."),
        ({"lora_dropout": 1.5}, "--lora_dropout 1.5 is not allowed; it must be in [0, 1)."),
        ({"lora_dropout": -0.1}, "--lora_dropout -0.1 is not allowed; it must be in [0, 1)."),
        ({"merge_adapter": True}, "--merge_adapter needs --use_peft (there is no adapter to merge)."),
        ({"scratch_model": {}}, "give exactly one of --model_name_or_path (a Hub id or folder) and --scratch_model."),
        ({"scratch_model": "n_layer=2"}, "--scratch_model 'n_layer=2' is not a JSON object; write e.g. '{\"a\": 1}'."),
    ],
)
def test_model_arguments_refuse_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ModelArguments(**{"model_name_or_path": "gpt2", **kwargs})
    assert _one_sentence(caught) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_train_examples": 0}, "--max_train_examples 0 is not allowed; it must be >= 1."),
        ({"max_eval_examples": 0}, "--max_eval_examples 0 is not allowed; it must be >= 1."),
        ({"dataset_name_or_path": "data"}, "give exactly one of --dataset_name_or_path (a Hub repo or folder) and "
         "--task."),
    ],
)  # fmt: skip
def test_script_arguments_refuse_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScriptArguments(**{"task": "parity", **kwargs})
    assert _one_sentence(caught) == message


def test_push_check_needs_a_repo_id() -> None:
    from hf_icot.training.outputs import check_push_possible

    for hub_model_id in (None, ""):
        with pytest.raises(ValueError) as caught:
            check_push_possible(hub_model_id, token="hf_dummy")
        assert _one_sentence(caught) == "--push_to_hub needs --hub_model_id USER/NAME, the model repo to push to."


def test_merging_an_adapter_under_fsdp_is_refused_before_saving(tmp_path: Path) -> None:
    """FSDP needs several processes; the refusal only reads ``is_fsdp_enabled``, so a stand-in trainer shows it."""
    from hf_icot.training.outputs import RunOutputsMixin

    trainer = SimpleNamespace(is_fsdp_enabled=True, weights_kind=lambda merge: "merged", args=None)
    with pytest.raises(ValueError) as caught:
        RunOutputsMixin.save_run(trainer, merge_adapter=True)
    assert _one_sentence(caught) == (
        "--merge_adapter is not supported under FSDP; save the adapter, then merge it in one process."
    )
