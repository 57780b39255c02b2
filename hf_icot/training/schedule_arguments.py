"""The curriculum's and the methods' options as training arguments: :class:`ScheduleArguments`, one typed field
per option, which :class:`hf_icot.training.config.ICoTConfig` inherits.

GENERATED from the options that the schedules and the methods' configs declare with
:func:`hf_icot.curriculum.base.option`; do not edit. To add or change an option, declare it on its schedule or method
config (its help, choices, default and type) and run

    python -m hf_icot.training.declared_options --write

(a test fails until this file matches). Names, types and defaults are written here for IDEs and type checkers; each
help text and list of choices comes from its declaration when this module is imported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hf_icot.training.declared_options import option_metadata, schedule_metadata


@dataclass
class ScheduleArguments:
    """The curriculum's and the methods' options: ``schedule`` and one field per declared option (``seed`` is
    ``TrainingArguments``'), under the class that declares each."""

    schedule: str = field(default="stepwise", metadata=schedule_metadata())
    # hf_icot.curriculum.base.Schedule
    removal_fill: str | None = field(default=None, metadata=option_metadata("removal_fill"))
    removal_unit: str | None = field(default=None, metadata=option_metadata("removal_unit"))
    removal_side: str = field(default="left", metadata=option_metadata("removal_side"))
    length_hint: bool = field(default=False, metadata=option_metadata("length_hint"))
    sequence_format: str = field(default="hf_icot", metadata=option_metadata("sequence_format"))
    # hf_icot.curriculum.removal.CountedRemoval
    remove_start_from: int = field(default=0, metadata=option_metadata("remove_start_from"))
    removal_smoothing_lambda: float = field(default=math.inf, metadata=option_metadata("removal_smoothing_lambda"))
    remove_all_when_remove_beyond: float = field(
        default=math.inf, metadata=option_metadata("remove_all_when_remove_beyond")
    )
    reset_optimizer: bool = field(default=False, metadata=option_metadata("reset_optimizer"))
    # hf_icot.curriculum.removal.Stepwise
    remove_per_epoch: float = field(default=8.0, metadata=option_metadata("remove_per_epoch"))
    pretrain_epochs: int = field(default=0, metadata=option_metadata("pretrain_epochs"))
    # hf_icot.curriculum.stages.StageClock
    stage_length: float = field(default=1.0, metadata=option_metadata("stage_length"))
    stage_unit: str = field(default="epochs", metadata=option_metadata("stage_unit"))
    final_remove_all: bool = field(default=False, metadata=option_metadata("final_remove_all"))
    first_stage_length: float | None = field(default=None, metadata=option_metadata("first_stage_length"))
    # hf_icot.curriculum.stages.Staged
    steps_per_stage: int = field(default=1, metadata=option_metadata("steps_per_stage"))
    num_stages: int | None = field(default=None, metadata=option_metadata("num_stages"))
    # hf_icot.curriculum.stages.LogICoT
    num_levels: int | None = field(default=None, metadata=option_metadata("num_levels"))
    # hf_icot.curriculum.mixture.Mixture
    mixture_max_length: int | None = field(default=None, metadata=option_metadata("mixture_max_length"))
    mixture_weights: list[float] | None = field(default=None, metadata=option_metadata("mixture_weights"))
    # hf_icot.curriculum.adaptive.AdaptiveStepwise
    adaptive_metric: str = field(default="answer", metadata=option_metadata("adaptive_metric"))
    adaptive_threshold: float = field(default=0.9, metadata=option_metadata("adaptive_threshold"))
    adaptive_window: int = field(default=20, metadata=option_metadata("adaptive_window"))
    min_steps_per_removal: int = field(default=1, metadata=option_metadata("min_steps_per_removal"))
    max_steps_per_removal: int | None = field(default=None, metadata=option_metadata("max_steps_per_removal"))
    # hf_icot.curriculum.latent.LatentSchedule
    latent_format: str = field(default="hf_icot", metadata=option_metadata("latent_format"))
    # hf_icot.curriculum.latent.Coconut
    c_thought: int = field(default=1, metadata=option_metadata("c_thought"))
    epochs_per_stage: int = field(default=1, metadata=option_metadata("epochs_per_stage"))
    max_latent_stage: int | None = field(default=None, metadata=option_metadata("max_latent_stage"))
    uniform_prob: float = field(default=0.0, metadata=option_metadata("uniform_prob"))
    pad_latent_to_max: bool = field(default=False, metadata=option_metadata("pad_latent_to_max"))
    reset_optimizer_every: str = field(default="epoch", metadata=option_metadata("reset_optimizer_every"))
    start_stage: int = field(default=0, metadata=option_metadata("start_stage"))
    # hf_icot.curriculum.latent.CODI
    num_latent: int = field(default=6, metadata=option_metadata("num_latent"))
    remove_eos: bool = field(default=False, metadata=option_metadata("remove_eos"))
    # hf_icot.curriculum.latent.PCCoT
    num_latent_tokens: int = field(default=6, metadata=option_metadata("num_latent_tokens"))
    num_iterations: int = field(default=6, metadata=option_metadata("num_iterations"))
    # hf_icot.methods.simcot.SIMCoTConfig
    simcot: bool = field(default=False, metadata=option_metadata("simcot"))
    simcot_loss_factor: float = field(default=1.0, metadata=option_metadata("simcot_loss_factor"))
    simcot_decoder: str | None = field(default=None, metadata=option_metadata("simcot_decoder"))
    simcot_prompt: str | None = field(default=None, metadata=option_metadata("simcot_prompt"))
    # hf_icot.methods.coconut.CoconutConfig
    latent_token_init: str | None = field(default=None, metadata=option_metadata("latent_token_init"))
    # hf_icot.methods.codi.CODIConfig
    use_prj: bool = field(default=False, metadata=option_metadata("use_prj"))
    prj_dim: int | None = field(default=None, metadata=option_metadata("prj_dim"))
    prj_dropout: float = field(default=0.0, metadata=option_metadata("prj_dropout"))
    prj_no_ln: bool = field(default=False, metadata=option_metadata("prj_no_ln"))
    distill_loss_type: str = field(default="smooth_l1", metadata=option_metadata("distill_loss_type"))
    distill_loss_factor: float = field(default=1.0, metadata=option_metadata("distill_loss_factor"))
    distill_loss_div_std: bool = field(default=False, metadata=option_metadata("distill_loss_div_std"))
    ref_loss_factor: float = field(default=1.0, metadata=option_metadata("ref_loss_factor"))
    include_last_cot: bool = field(default=False, metadata=option_metadata("include_last_cot"))
    cot_sentences: bool = field(default=False, metadata=option_metadata("cot_sentences"))
    # hf_icot.methods.pccot.PCCoTConfig
    loss_alpha: float = field(default=1.0, metadata=option_metadata("loss_alpha"))
    loss_beta: float = field(default=1.0, metadata=option_metadata("loss_beta"))
    loss_gamma: float = field(default=1.0, metadata=option_metadata("loss_gamma"))
    use_layerwise_std: bool = field(default=True, metadata=option_metadata("use_layerwise_std"))
    use_projection: bool = field(default=False, metadata=option_metadata("use_projection"))
