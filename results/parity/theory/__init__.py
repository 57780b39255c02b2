"""The parity study's theory models (the published ICoT studies on sparse parity), registered with the Auto classes
when this package is imported, so that they save, load by ``model_type`` and go through ``ICoTTrainer``, evaluation and
the model card like any model. They are study code, not the library's: ``pip install hf_icot`` does not ship them, and
``hf_icot.modeling.loading`` builds them from ``--scratch_model`` as it builds any registered causal LM.

* :mod:`~results.parity.theory.log_icot_parity` — A: the gated multi-layer Log-ICoT transformer (tree CoT);
* :mod:`~results.parity.theory.linear_attention_parity` — B: one-layer linear attention with a fixed MLP (chain CoT);
* :mod:`~results.parity.theory.parity_mlp` — C: the MLP trained on a mixture of CoT lengths (a classifier, not a
causal LM);
* :mod:`~results.parity.theory.rounding` — the rounding step as a ``TrainerCallback``, for any model.
"""

from typing import Any

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

from results.parity.theory.linear_attention_parity import LinearAttentionParityConfig, LinearAttentionParityModel
from results.parity.theory.log_icot_parity import LogICoTParityConfig, LogICoTParityModel, tree_levels
from results.parity.theory.parity_mlp import ParityMLPConfig, ParityMLPForSequenceClassification
from results.parity.theory.rounding import RoundingCallback

# Registered here, by the study, so that loading by model_type and hf_icot's --scratch_model find them.
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
    "check_parity_data",
    "LinearAttentionParityConfig",
    "LinearAttentionParityModel",
    "LogICoTParityConfig",
    "LogICoTParityModel",
    "ParityMLPConfig",
    "ParityMLPForSequenceClassification",
    "RoundingCallback",
]
