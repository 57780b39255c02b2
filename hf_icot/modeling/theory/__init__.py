"""The theory models of the published ICoT studies on sparse parity, registered with the Auto classes so that they
save, load and go through ``ICoTTrainer``, evaluation and the model card like any model.

* :mod:`~hf_icot.modeling.theory.log_icot_parity` — A: the gated multi-layer Log-ICoT transformer (tree CoT);
* :mod:`~hf_icot.modeling.theory.linear_attention_parity` — B: one-layer linear attention with a fixed MLP (chain CoT);
* :mod:`~hf_icot.modeling.theory.parity_mlp` — C: the MLP trained on a mixture of CoT lengths (a classifier, not a
causal LM);
* :mod:`~hf_icot.modeling.theory.rounding` — the rounding step as a ``TrainerCallback``, for any model.
"""

from typing import Any

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

from hf_icot.modeling.theory.linear_attention_parity import LinearAttentionParityConfig, LinearAttentionParityModel
from hf_icot.modeling.theory.log_icot_parity import LogICoTParityConfig, LogICoTParityModel, tree_levels
from hf_icot.modeling.theory.parity_mlp import ParityMLPConfig, ParityMLPForSequenceClassification
from hf_icot.modeling.theory.rounding import RoundingCallback

#: model_type -> model class, for the causal LMs hf_icot can build from scratch.
CAUSAL_LM_TYPES = {
    LogICoTParityConfig.model_type: LogICoTParityModel,
    LinearAttentionParityConfig.model_type: LinearAttentionParityModel,
}

for _config, _model in (
    (LogICoTParityConfig, LogICoTParityModel),
    (LinearAttentionParityConfig, LinearAttentionParityModel),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModelForCausalLM.register(_config, _model, exist_ok=True)
AutoConfig.register(ParityMLPConfig.model_type, ParityMLPConfig, exist_ok=True)
AutoModel.register(ParityMLPConfig, ParityMLPForSequenceClassification, exist_ok=True)
AutoModelForSequenceClassification.register(ParityMLPConfig, ParityMLPForSequenceClassification, exist_ok=True)


def check_parity_data(model_type: str, fields: dict, train: Any) -> None:
    """Check, before training, that ``train`` is the parity data the theory model ``model_type`` (built from the
    ``--scratch_model`` ``fields``) reads: n_bits bits, k - 1 CoT steps, and for the Log-ICoT model the binary tree's
    ``cot_level`` (level 1 first, the root last). Any other model type passes.

    Raises:
        ValueError: one sentence naming what does not match.
    """
    configs = {"log_icot_parity": LogICoTParityConfig, "linear_attention_parity": LinearAttentionParityConfig}
    configs["parity_mlp"] = ParityMLPConfig
    if model_type not in configs:
        return
    config = configs[model_type](**{key: value for key, value in fields.items() if key != "model_type"})
    example = train[0]
    bits, steps = len(example["question"].split()), len(example["cot"])
    if bits != config.n_bits or steps != config.k - 1:
        raise ValueError(
            f"the data have {bits} bits and {steps} CoT steps, but the {model_type} model is configured for "
            f"n_bits={config.n_bits} and k={config.k} (k - 1 = {config.k - 1} steps); build the data with the same "
            "n_bits and k."
        )
    if model_type == "log_icot_parity":
        wanted = tree_levels(config.n_bits, config.k)[config.n_bits + 1 : config.n_bits + config.k].tolist()
        if list(example.get("cot_level") or []) != wanted:
            raise ValueError(
                f"the data's CoT is not a binary tree (cot_level {example.get('cot_level')}, wanted {wanted}); the "
                "Log-ICoT model needs the parity task built with cot_layout tree."
            )


__all__ = [
    "CAUSAL_LM_TYPES",
    "check_parity_data",
    "LinearAttentionParityConfig",
    "LinearAttentionParityModel",
    "LogICoTParityConfig",
    "LogICoTParityModel",
    "ParityMLPConfig",
    "ParityMLPForSequenceClassification",
    "RoundingCallback",
]
