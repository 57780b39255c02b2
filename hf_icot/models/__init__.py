"""The theory models of the published ICoT studies on sparse parity, registered with the Auto classes so that they
save, load and go through ``ICoTTrainer``, evaluation and the model card like any model.

* :mod:`~hf_icot.models.log_icot_parity` — A: the gated multi-layer Log-ICoT transformer (tree CoT);
* :mod:`~hf_icot.models.linear_attention_parity` — B: one-layer linear attention with a fixed MLP (chain CoT);
* :mod:`~hf_icot.models.parity_mlp` — C: the MLP trained on a mixture of CoT lengths (a classifier, not a causal LM);
* :mod:`~hf_icot.models.rounding` — the rounding step as a ``TrainerCallback``, for any model.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

from hf_icot.models.linear_attention_parity import LinearAttentionParityConfig, LinearAttentionParityModel
from hf_icot.models.log_icot_parity import LogICoTParityConfig, LogICoTParityModel
from hf_icot.models.parity_mlp import ParityMLPConfig, ParityMLPForSequenceClassification
from hf_icot.models.rounding import RoundingCallback

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

__all__ = [
    "CAUSAL_LM_TYPES",
    "LinearAttentionParityConfig",
    "LinearAttentionParityModel",
    "LogICoTParityConfig",
    "LogICoTParityModel",
    "ParityMLPConfig",
    "ParityMLPForSequenceClassification",
    "RoundingCallback",
]
