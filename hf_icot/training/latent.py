"""What :class:`hf_icot.training.trainer.ICoTTrainer` does for continuous-thought methods (a schedule whose layout is
latent: :mod:`hf_icot.curriculum.latent`), mixed in before the Trainer:

* **Set-up**, before the Trainer wraps the model: check the model can take latent thoughts, attach CODI's projection
  (drawn from the run's seed), and give the model its latent forward (:mod:`hf_icot.methods.latent_forward`).
* **Rendering**: the schedule's :class:`~hf_icot.curriculum.latent.LatentPlan` per example at the exact step, rendered
  by :class:`hf_icot.data.latent.LatentRenderer` (with CODI's teacher half).
* **One loss path per method**: ``model(**batch, icot_latent=True)`` returns the method's loss
  (:mod:`hf_icot.methods.losses`), a mean over the micro-batch that the Trainer divides by the accumulation steps;
  CODI's three terms join the logs as ``codi/student_ce``, ``codi/distill``, ``codi/teacher_ce``.
* **Projection files**: CODI's projection is saved beside every checkpoint and stage model and read back on resume.
"""

from __future__ import annotations

from typing import Any

import torch

from hf_icot.curriculum.latent import CODI, Coconut

CODI_TERMS = ("student_ce", "distill", "teacher_ce")


class LatentMethodMixin:
    """Mixed into :class:`hf_icot.training.trainer.ICoTTrainer`; inert unless the schedule's layout is latent."""

    latent_renderer: Any = None
    _latent_terms: dict[str, list[float]] | None = None

    def _prepare_latent_model(self, model: Any, tokenizer: Any, seed: int, max_cot_steps: int | None) -> None:
        """Ready ``model`` for the latent schedule (see the module docstring).

        Raises:
            ValueError: a model family that cannot take latent thoughts, a tokenizer without the markers, or Coconut's
                ``max_latent_stage`` beyond the training data's longest CoT.
        """
        from hf_icot.data.latent import LatentRenderer
        from hf_icot.methods.latent_forward import (
            LatentProjection,
            attach_projection,
            causal_lm_of,
            check_latent_model,
            enable_latent_forward,
            projection_of,
        )
        from hf_icot.methods.losses import latent_loss_for

        schedule = self.schedule
        if isinstance(schedule, Coconut):
            schedule.check_longest_cot(max_cot_steps)
        lm = causal_lm_of(model)
        check_latent_model(lm)
        self.latent_renderer = LatentRenderer(tokenizer)
        if isinstance(schedule, CODI) and schedule.use_prj and projection_of(lm) is None:
            hidden = lm.get_input_embeddings().weight.shape[-1]
            with torch.random.fork_rng(devices=[]):  # the same projection for the same seed, whatever ran before
                torch.manual_seed(seed)
                projection = LatentProjection(
                    hidden, schedule.prj_dim or hidden, schedule.prj_dropout, not schedule.prj_no_ln
                )
            attach_projection(model, projection)
        enable_latent_forward(model, latent_loss_for(schedule, self.latent_renderer.tokens.latent))

    def _render_latent(self, examples: list[dict[str, Any]], step: int, training: bool) -> tuple[dict, list[int]]:
        n_steps = [example["n_cot_steps"] for example in examples]
        plans = self.schedule.latent_plans(step, [example["example_id"] for example in examples], n_steps, training)
        teacher = [self.schedule.teacher_steps(n) for n in n_steps] if isinstance(self.schedule, CODI) else None
        return self.latent_renderer.render(examples, plans, teacher)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.latent_renderer is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        outputs = model(**inputs, icot_latent=True)
        if model.training and outputs.get("distill") is not None:
            terms = self._latent_terms if self._latent_terms is not None else {name: [] for name in CODI_TERMS}
            for name in CODI_TERMS:
                terms[name].append(float(outputs[name]))
            self._latent_terms = terms
        return (outputs["loss"], outputs) if return_outputs else outputs["loss"]

    def _latent_logs(self) -> dict[str, float]:
        """CODI's terms averaged since the last log (then forgotten)."""
        terms, self._latent_terms = self._latent_terms, None
        if not terms or not terms["distill"]:
            return {}
        return {f"codi/{name}": sum(values) / len(values) for name, values in terms.items()}

    def _save_latent_files(self, output_dir: str) -> None:
        from hf_icot.methods.latent_forward import save_projection

        save_projection(self.model, output_dir)

    def _load_latent_files(self, checkpoint: str) -> None:
        from hf_icot.methods.latent_forward import load_projection

        load_projection(checkpoint, self.model)
