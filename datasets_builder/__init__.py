"""Task dataset generators and their publishing to the Hugging Face Hub.

``python -m datasets_builder`` is the command line (:mod:`datasets_builder.cli`); :mod:`datasets_builder.registry`
maps task names to the modules under :mod:`datasets_builder.tasks`; :mod:`datasets_builder.publish` writes a task
config as a Hub dataset repo folder and pushes it. :func:`build_dataset` builds a task in memory, for recipes.
"""

from datasets_builder.registry import build_dataset

__all__ = ["build_dataset"]
