"""Publishing: saving a run's model (safetensors; LoRA adapters alone or merged), pushing run folders to the Hub, and
model cards rendered from the templates in ``model_cards/``.

* :mod:`~hf_icot.publishing.hub` — saving aside and moving in, one-commit uploads, push errors in one sentence;
  ``python -m hf_icot.publishing.hub push OUTPUT_DIR --repo ID`` retries a failed push;
* :mod:`~hf_icot.publishing.model_card` — the card, its model-index results and the loss curves.
"""
