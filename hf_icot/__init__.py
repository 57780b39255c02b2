"""hf_icot: implicit chain of thought on Hugging Face.

The rooms, bottom up (each imports only those below it):

* :mod:`hf_icot.cot` — the example schema and :func:`truncate`, the one truncation function;
* :mod:`hf_icot.locations` — whether a name is a Hub repo id or a local folder (loading and publishing share it);
* :mod:`hf_icot.curriculum` — the schedules and the sequence layout (pure Python);
* :mod:`hf_icot.data` — loading, the encoding rules, the collator, tokenizers;
* :mod:`hf_icot.modeling` — loading models and tokenizers, sizing, logits and loss where labels are;
* :mod:`hf_icot.methods` — the continuous-thought methods (Coconut, CODI): latent forward, losses, generation;
* :mod:`hf_icot.evaluation` — generation, exact match, teacher-forced accuracy;
* :mod:`hf_icot.publishing` — saving, the Hub, model cards;
* :mod:`hf_icot.levers` — the speed levers of a training step (logits where labels are, no needless attention mask,
  one-kernel GELU, dropout drawn ahead), each leaving the step's result as it was;
* :mod:`hf_icot.runs` — what keeps any ``Trainer``'s run safe: checkpoints, run folders, the run lock, preemption,
  CPU threads;
* :mod:`hf_icot.training` — ``ICoTConfig``, ``ICoTTrainer`` and its loss, the curriculum's state, what a run leaves;
* :mod:`hf_icot.diagnostics` — learning-dynamics measurements as callbacks;
* :mod:`hf_icot.command_line` — a recipe's flags, its ``--config`` file and its run (``RecipeRun``);
* :mod:`hf_icot.studies` — the study harness for your own sweeps: runs, seeds, Slurm export, the claims ledger,
  the results kit.

``from hf_icot import ICoTTrainer, ICoTConfig`` works; importing ``hf_icot`` itself does not load torch.
"""

from hf_icot._lazy import lazy_exports
from hf_icot.cot import (
    FULL_COT,
    PLACEHOLDER_TOKEN,
    MalformedLineError,
    TruncatedCoT,
    TruncationSpec,
    example_features,
    hint_token,
    parse_line,
    render_line,
    truncate,
    truncate_example,
)

__version__ = "0.1.0"

#: Public names loaded on first use (they pull in torch and transformers).
_LAZY = {
    "ICoTTrainer": "hf_icot.training.trainer",
    "ICoTConfig": "hf_icot.training.config",
    "ICoTCollator": "hf_icot.data.collator",
    "evaluate_generation": "hf_icot.evaluation.generation_accuracy",
    "load_icot_dataset": "hf_icot.data.loading",
}
__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "FULL_COT",
    "PLACEHOLDER_TOKEN",
    "MalformedLineError",
    "TruncatedCoT",
    "TruncationSpec",
    "example_features",
    "hint_token",
    "parse_line",
    "render_line",
    "truncate",
    "truncate_example",
    *_LAZY,
]
