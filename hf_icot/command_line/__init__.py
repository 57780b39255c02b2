"""A recipe's command line and its run, the top of the library's rooms:

* :mod:`~hf_icot.command_line.config_file` — the ``--config`` YAML file and one-line flag errors;
* :mod:`~hf_icot.command_line.flag_cache` — the flags kept on disk after a full parse, so ``--help`` and a bad flag
  answer before the heavy imports;
* :mod:`~hf_icot.command_line.parsing` — ``--config file.yaml`` plus flag overrides into dataclasses
  (:func:`~hf_icot.command_line.parsing.parse_config`);
* :mod:`~hf_icot.command_line.arguments` — a recipe's data and model arguments and
  :func:`~hf_icot.command_line.arguments.parse_recipe_args` (with :class:`hf_icot.training.config.ICoTConfig`);
* :mod:`~hf_icot.command_line.recipe` — :class:`~hf_icot.command_line.recipe.RecipeRun`, the steps every recipe
  repeats, and :func:`~hf_icot.command_line.recipe.run_main`, a recipe's ``__main__``.

The main names are importable from here (loaded on first use: importing this package loads no torch).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "parse_config": "hf_icot.command_line.parsing",
    "ScriptArguments": "hf_icot.command_line.arguments",
    "ModelArguments": "hf_icot.command_line.arguments",
    "parse_recipe_args": "hf_icot.command_line.arguments",
    "RecipeRun": "hf_icot.command_line.recipe",
    "run_main": "hf_icot.command_line.recipe",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
