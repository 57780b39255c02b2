"""Every YAML under recipes/ and every study's configs (walked recursively) parse and are what they say, each beside
the script that reads it; every recipe and study script answers --help with all its options; the READMEs name only
files that exist; config files and flags combine as documented."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
import yaml

from recipes import icot_gpt2
from tests import forked
from tests.recipes.conftest import REPO

RECIPES = REPO / "recipes"
YAML_FILES = sorted(p for p in RECIPES.rglob("*") if p.suffix in (".yaml", ".yml"))
#: A study's own script and its configs live in its folder: results/<study>/train.py, results/<study>/configs/.
STUDY_CONFIGS = sorted((REPO / "results").glob("*/configs/**/*.yaml"))
CONFIGS = sorted((RECIPES / "configs").rglob("*.yaml")) + STUDY_CONFIGS
ACCELERATE = sorted((RECIPES / "accelerate").rglob("*.yaml"))
#: The recipes: the scripts of recipes/, and the studies' training scripts.
SCRIPTS = sorted(p for p in RECIPES.glob("*.py") if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))
SCRIPTS += sorted((REPO / "results").glob("*/train.py"))
#: A script a config or README names: recipes/<name>.py or results/<study>/<name>.py.
SCRIPT = r"(?:recipes|results/\w+)/\w+\.py"


def _uses_icot_arguments(script: Path) -> bool:
    """Whether a recipe takes the ICoT arguments (ScriptArguments, ModelArguments, ICoTConfig)."""
    return "parse_recipe_args" in script.read_text(encoding="utf-8")


def _script_of(config: Path) -> Path:
    """The recipe a config's opening comment runs."""
    return REPO / re.search(SCRIPT, config.read_text(encoding="utf-8").splitlines()[0]).group(0)


ICOT_CONFIGS = [p for p in CONFIGS if _uses_icot_arguments(_script_of(p))]


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_walk_finds_every_yaml() -> None:
    assert len(YAML_FILES) == len(CONFIGS) - len(STUDY_CONFIGS) + len(ACCELERATE) >= 10
    assert {p.parts[-3] for p in STUDY_CONFIGS} >= {"parity", "marginals"}
    assert {p.name for p in CONFIGS} >= {"quickstart.yaml", "icot_gpt2_4x4.yaml", "icot_gpt2_gsm8k.yaml"}
    assert {p.name for p in ACCELERATE} >= {"single_process.yaml", "cpu.yaml", "ddp.yaml", "ddp_cpu.yaml", "fsdp.yaml"}


@pytest.mark.parametrize("path", YAML_FILES, ids=_relative)
def test_yaml_parses_to_a_mapping_and_opens_with_its_command(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert isinstance(yaml.safe_load(text), dict)
    first = text.splitlines()[0]
    assert first.startswith("# ") and _relative(path) in text.split("\n\n")[0], "the opening comment runs this file"
    for script in re.findall(SCRIPT, text):
        assert (REPO / script).is_file(), script


@pytest.mark.parametrize("path", CONFIGS, ids=_relative)
def test_a_config_lives_beside_the_script_that_reads_it(path: Path) -> None:
    """recipes/configs/ holds the configs of recipes/ scripts; results/<study>/configs/ those of the study's script."""
    script = _script_of(path)
    assert script.is_file(), script
    assert script.parent == path.parent.parent, f"{_relative(path)} is read by {_relative(script)}: move it beside it"


@pytest.mark.parametrize("path", ICOT_CONFIGS, ids=_relative)
def test_recipe_config_fills_the_recipe_arguments(path: Path) -> None:
    script_args, training_args, model_args = icot_gpt2.parse_args(["--config", str(path)])
    values = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert training_args.output_dir == values["output_dir"] and training_args.schedule == values["schedule"]
    assert script_args.task == values.get("task") and script_args.task_args == values.get("task_args")
    assert (model_args.model_name_or_path, model_args.scratch_model) == (
        values.get("model_name_or_path"),
        values.get("scratch_model"),
    )


def test_reference_configs_keep_the_reference_settings() -> None:
    for size in (4, 5, 7, 9):
        config = str(RECIPES / "configs" / f"icot_gpt2_{size}x{size}.yaml")
        script_args, args, model_args = icot_gpt2.parse_args(["--config", config])
        assert model_args.model_name_or_path == "gpt2" and script_args.task_args["a_digits"] == size
        assert (args.remove_per_epoch, args.removal_smoothing_lambda, args.removal_side) == (8, 4.0, "left")
        assert args.reset_optimizer and args.learning_rate == 5e-5 and args.per_device_train_batch_size == 32
        assert args.max_grad_norm == 1.0 and args.optim.value == "adamw_torch"


#: What each accelerate config's opening comment promises, as the values accelerate loads from it.
FSDP_PROMISES = {
    "fsdp_version": 2,  # FSDP2
    "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",  # each transformer block is one shard unit
    "fsdp_state_dict_type": "FULL_STATE_DICT",  # rank 0 saves one plain safetensors model
    "fsdp_offload_params": False,
    "fsdp_activation_checkpointing": False,
}
ACCELERATE_PROMISES = {
    # one process, the GPU if there is one, else the CPU (use_cpu false lets accelerate choose)
    "single_process.yaml": {"distributed_type": "NO", "num_processes": 1, "use_cpu": False, "mixed_precision": "no"},
    # one process on the CPU with all its cores (use_cpu is what makes the launcher give it one thread per core)
    "cpu.yaml": {"distributed_type": "NO", "num_processes": 1, "use_cpu": True, "mixed_precision": "no"},
    # DDP over 8 GPUs, fp32 as the stepwise-ICoT reference trains
    "ddp.yaml": {"distributed_type": "MULTI_GPU", "num_processes": 8, "use_cpu": False, "mixed_precision": "no"},
    # DDP over 2 CPU processes (gloo), what the tests run
    "ddp_cpu.yaml": {"distributed_type": "MULTI_GPU", "num_processes": 2, "use_cpu": True, "mixed_precision": "no"},
    # FSDP2 over 8 GPUs in bf16
    "fsdp.yaml": {"distributed_type": "FSDP", "num_processes": 8, "use_cpu": False, "mixed_precision": "bf16"},
}


@pytest.mark.parametrize("path", ACCELERATE, ids=_relative)
def test_accelerate_config_holds_what_its_comment_promises(path: Path) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    assert path.name in ACCELERATE_PROMISES, f"add what {path.name}'s comment promises to ACCELERATE_PROMISES"
    config = load_config_from_file(str(path))
    loaded = {
        "distributed_type": config.distributed_type.value,
        "num_processes": config.num_processes,
        "use_cpu": config.use_cpu,
        "mixed_precision": config.mixed_precision,
    }
    assert loaded == ACCELERATE_PROMISES[path.name]
    assert (config.num_machines, config.machine_rank, config.compute_environment.value) == (1, 0, "LOCAL_MACHINE")
    if config.distributed_type.value == "FSDP":
        assert {key: config.fsdp_config.get(key) for key in FSDP_PROMISES} == FSDP_PROMISES
    else:
        assert config.fsdp_config == {}


@pytest.mark.parametrize("script", SCRIPTS, ids=_relative)
def test_recipe_answers_help_with_every_option(script: Path) -> None:
    # what the user reads; its start-up time is bench/bench_start_up.py's (here forked from a pre-imported server)
    result = forked.run([script, "--help"], env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    from hf_icot.command_line.arguments import ModelArguments, ScriptArguments
    from hf_icot.training.config import ICoTConfig

    if _uses_icot_arguments(script):
        classes = (ScriptArguments, ModelArguments, ICoTConfig)
    else:  # the marginals recipe: its own arguments and the plain TrainingArguments
        from transformers import TrainingArguments

        from results.marginals import train as marginals_train

        classes = (marginals_train.MarginalsArguments, TrainingArguments)
    names = [f.name for cls in classes for f in dataclasses.fields(cls) if f.init]
    missing = [name for name in names if f"--{name}" not in result.stdout]
    assert not missing and "--config" in result.stdout


def test_push_command_help_is_truthful() -> None:
    result = forked.run(["-m", "hf_icot.publishing.hub", "push", "--help"], timeout=60)
    assert result.returncode == 0
    for option in ("output_dir", "--repo", "--private", "--revision", "HF_TOKEN"):
        assert option in result.stdout, option


@pytest.mark.parametrize(
    "folder", [RECIPES, *sorted({p.parents[1] for p in STUDY_CONFIGS})], ids=lambda p: _relative(p) or "."
)
def test_readme_names_only_existing_files_and_every_config(folder: Path) -> None:
    """recipes/README.md for recipes/, results/<study>/configs/README.md for a study's configs."""
    readme_path = RECIPES / "README.md" if folder == RECIPES else folder / "configs" / "README.md"
    readme = readme_path.read_text(encoding="utf-8")
    prefix = _relative(folder)
    mentioned = set(re.findall(rf"(?:{prefix}/)?(?:configs|accelerate)/[\w.]+\.yaml|{SCRIPT}", readme))
    for name in mentioned:
        path = REPO / name if name.startswith(("recipes/", "results/")) else folder / name
        assert path.is_file(), name
    for path in [*CONFIGS, *ACCELERATE]:
        if path.is_relative_to(folder):
            assert _relative(path) in readme or path.relative_to(folder).as_posix() in readme, path.name


@pytest.mark.parametrize(
    "spelling",
    [
        ["--config", "{config}", "--task_args", '{"a_digits": 5}', "--scratch_model", '{"n_layer": 2}'],
        ["--config={config}", '--task_args={"a_digits": 5}', '--scratch_model={"n_layer": 2}'],
        ["--task_args", '{"a_digits": 5}', "--config", "{config}", '--scratch_model={"n_layer": 2}'],
    ],
    ids=["spaced", "equals", "config-last"],
)
def test_flags_override_the_config_and_mappings_merge(tmp_path: Path, spelling: list[str]) -> None:
    config = tmp_path / "run.yaml"
    values = yaml.safe_load((RECIPES / "configs" / "quickstart.yaml").read_text())
    values["task"], values["task_args"] = "multiplication", {"a_digits": 4, "b_digits": 4, "train_size": 80}
    config.write_text(yaml.safe_dump(values))
    argv = [part.replace("{config}", str(config)) for part in spelling] + ["--learning_rate", "3e-4", "--use_peft"]
    script_args, args, model_args = icot_gpt2.parse_args(argv)
    assert args.learning_rate == 3e-4 and model_args.use_peft
    assert script_args.task_args == {"a_digits": 5, "b_digits": 4, "train_size": 80}
    assert model_args.scratch_model == {**values["scratch_model"], "n_layer": 2}


def test_a_mapping_flag_without_a_mapping_in_the_file_is_taken_as_given(tmp_path: Path) -> None:
    script_args, _, _ = icot_gpt2.parse_args(
        ["--task", "parity", "--task_args", '{"k": 3}', "--scratch_model", "{}", "--output_dir", "unused"]
    )
    assert script_args.task_args == {"k": 3}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "multiplication"], "give exactly one of --model_name_or_path"),
        (["--model_name_or_path", "gpt2"], "give exactly one of --dataset_name_or_path"),
        (["--task", "multiplication", "--model_name_or_path", "gpt2", "--task_args", "[1]"], "is not a JSON object"),
        (["--task", "multiplication", "--model_name_or_path", "gpt2", "--merge_adapter"], "needs --use_peft"),
    ],
)
def test_inconsistent_arguments_say_what_to_give(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        icot_gpt2.parse_args([*argv, "--output_dir", "unused"])


def test_config_file_missing_malformed_or_not_a_mapping_is_one_sentence(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ValueError, match=rf"^config file {re.escape(str(missing))} does not exist; give the path"):
        icot_gpt2.parse_args(["--config", str(missing)])
    broken = tmp_path / "broken.yaml"
    broken.write_text("task: parity\nschedule: [stepwise\n  lr: 3\n")
    with pytest.raises(ValueError) as caught:
        icot_gpt2.parse_args(["--config", str(broken)])
    assert re.fullmatch(
        rf"config file {re.escape(str(broken))} is not valid YAML at line \d+, column \d+ \(.+\); .*",
        str(caught.value),
    )
    assert "\n" not in str(caught.value)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="holds a list; it must be a mapping of flags"):
        icot_gpt2.parse_args(["--config", str(listed)])


def test_unknown_config_key_is_named(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("task: multiplication\nmodel_name_or_path: gpt2\nlearning_rat: 0.1\n")
    with pytest.raises(ValueError, match="learning_rat"):
        icot_gpt2.parse_args(["--config", str(config)])
