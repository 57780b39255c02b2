"""Modeling: the model and tokenizer of a run, model sizes, the logits and loss where labels are.

* :mod:`~hf_icot.modeling.loading` — a pretrained causal LM of any family, or a small one from scratch with a
  word-level tokenizer, ready for the run's layout; LoRA;
* :mod:`~hf_icot.modeling.sizing` — a model's context length; the GPT-2 width for a depth at a parameter budget;
* :mod:`~hf_icot.modeling.labelled_logits` — a causal LM's logits and loss at the labelled positions only;
* :mod:`~hf_icot.modeling.chunked_loss` — the output layer and the cross entropy over chunks of rows, no ``(N, V)``
  logits.

A model of your own builds from ``--scratch_model`` once registered with ``AutoConfig`` and ``AutoModelForCausalLM``
(the parity study's theory models register themselves in ``results/parity/theory/``).
"""
