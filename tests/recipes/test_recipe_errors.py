"""Bad input through the recipe's command line: each is one sentence naming the value and what to give instead,
raised before any training, with nothing written to ``--output_dir``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from recipes import icot_gpt2
from tests.recipes.conftest import TASK_ARGS, multiplication_texts, recipe_args, run_recipe

SCRATCH = '{"n_layer": 1, "n_embd": 16, "n_head": 2}'


def _error(argv: list[str]) -> str:
    """The recipe's error for ``argv``: one line, and the run folder never created."""
    output_dir = Path(argv[argv.index("--output_dir") + 1])
    with pytest.raises(ValueError) as caught:
        run_recipe(argv)
    message = str(caught.value)
    assert "\n" not in message and message.endswith("."), message
    assert not output_dir.exists(), "nothing is written before the run starts"
    return message


def _parse_error(argv: list[str]) -> str:
    """The error ``argv`` gets while the recipe parses its arguments (before any data or model)."""
    with pytest.raises(ValueError) as caught:
        icot_gpt2.parse_args(argv)
    message = str(caught.value)
    assert "\n" not in message and message.endswith("."), message
    return message


def _scratch_args(output_dir: Path, *extra: str, scratch: str = SCRATCH) -> list[str]:
    """:func:`recipe_args` with a model built from scratch instead of a model folder."""
    argv = recipe_args("unused", output_dir, *extra)
    at = argv.index("--model_name_or_path")
    argv[at : at + 2] = ["--scratch_model", scratch]
    return argv


def _from_folder(argv: list[str], folder: Path | str, config: str | None = None) -> list[str]:
    """``argv`` reading ``folder`` (``--dataset_name_or_path``) instead of building the task on the fly."""
    at = argv.index("--task")
    argv[at : at + 4] = ["--dataset_name_or_path", str(folder), *(["--dataset_config", config] if config else [])]
    return argv


def _reference_folder(tmp_path: Path, stems: list[str]) -> Path:
    """A dataset folder built by datasets_builder from reference text files, one split per file stem."""
    from datasets_builder import publish
    from datasets_builder.tasks import reference_text

    source = tmp_path / "text"
    source.mkdir()
    lines = multiplication_texts()
    for index, stem in enumerate(stems):
        (source / f"{stem}.txt").write_text("\n".join(lines[8 * index : 8 * index + 8]) + "\n")
    folder = tmp_path / "published"
    publish.build_config(folder, "reference_text", reference_text.Params(path=[str(source)], config="mult"))
    return folder


@pytest.fixture(scope="module")
def two_configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset folder holding mult_2x2 and mult_3x2."""
    from datasets_builder import publish, registry

    folder = tmp_path_factory.mktemp("data") / "multiplication"
    for a_digits in (2, 3):
        params = registry.make_params("multiplication", **{**TASK_ARGS, "a_digits": a_digits})
        publish.build_config(folder, "multiplication", params, progress=False)
    return folder


# ---------------------------------------------------------------------------------------------------------------
# Data


def test_eval_splits_naming_a_missing_split(tiny_gpt2: Path, tmp_path: Path) -> None:
    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", "--eval_splits", "validation", "tset"))
    assert message == "--eval_splits names 'tset', which the dataset lacks; it has train, validation, test."


def test_dataset_without_a_train_split(tiny_gpt2: Path, tmp_path: Path) -> None:
    folder = _reference_folder(tmp_path, ["valid", "test"])
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), folder))
    assert message.startswith("the dataset has no train split (it has ")
    assert "validation" in message and "test" in message and message.endswith("give one with a train split.")


def test_dataset_with_only_a_train_split(tiny_gpt2: Path, tmp_path: Path) -> None:
    folder = _reference_folder(tmp_path, ["train"])
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), folder))
    assert message == "the dataset has only a train split; the final evaluation needs a validation or test split."


def test_dataset_folder_missing_or_hub_id_offline(tiny_gpt2: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no_such_data"
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), missing))
    assert message == (
        f"no dataset found at '{missing}': the folder does not exist; give a folder written by "
        "`python -m datasets_builder build`, or a Hub dataset id."
    )
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), "nobody/no-such-data", "cfg"))
    assert message == (
        "no dataset found at 'nobody/no-such-data': it is not in the local cache and HF_HUB_OFFLINE is set; "
        "unset it, or give a local folder."
    )
    (tmp_path / "empty").mkdir()
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), tmp_path / "empty"))
    assert message.startswith(f"no dataset found at '{tmp_path / 'empty'}': ")
    assert message.endswith("give a folder written by `python -m datasets_builder build`.")


def test_dataset_folder_whose_card_lists_a_deleted_file(tiny_gpt2: Path, tmp_path: Path) -> None:
    folder = _reference_folder(tmp_path, ["train", "valid"])
    deleted = next((folder / "mult").glob("train-*.parquet"))
    deleted.unlink()
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), folder, "mult"))
    assert message == (
        f"no dataset found at '{folder}': its card lists '{deleted}', which is missing; rebuild it with "
        "`python -m datasets_builder build`."
    )


def test_dataset_config_unknown_or_not_chosen(two_configs: Path, tiny_gpt2: Path, tmp_path: Path) -> None:
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), two_configs, "mult_4x4"))
    assert message == f"config 'mult_4x4' is not in '{two_configs}'; available: mult_2x2, mult_3x2."
    message = _error(_from_folder(recipe_args(tiny_gpt2, tmp_path / "out"), two_configs))
    assert message == f"'{two_configs}' has configs mult_2x2, mult_3x2; pick one with --dataset_config."


def test_task_unknown_or_with_an_unknown_parameter(tiny_gpt2: Path, tmp_path: Path) -> None:
    argv = recipe_args(tiny_gpt2, tmp_path / "out")
    argv[argv.index("multiplication")] = "multiplikation"
    message = _error(argv)
    assert message == (
        "task 'multiplikation' is unknown; allowed: ambiguity, latent_json, multiplication, parity, reference_text, "
        "semiautomaton."
    )
    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", task_args={**TASK_ARGS, "a_digit": 2}))
    assert message == (
        "parameter 'a_digit' is unknown for task 'multiplication'; "
        "allowed: a_digits, b_digits, train_size, validation_size, test_size, seed."
    )


# ---------------------------------------------------------------------------------------------------------------
# Model


def test_scratch_model_with_an_unknown_field(tmp_path: Path) -> None:
    """GPT2Config takes any keyword, so without our check the typo would be ignored and the run would go on."""
    message = _error(_scratch_args(tmp_path / "out", scratch='{"n_layer": 1, "n_wings": 2}'))
    assert message == (
        "--scratch_model field 'n_wings' is not a GPT2Config field; the gpt2 fields spelled nearest are n_inner, "
        "scale_attn_weights, tie_word_embeddings (GPT2Config's documentation lists the others)."
    )
    message = _error(_scratch_args(tmp_path / "out", scratch='{"n_layers": 1}'))
    assert message.startswith("--scratch_model field 'n_layers' is not a GPT2Config field (did you mean 'n_layer');")
    assert len(message) < 300


def test_scratch_model_of_an_unknown_family_or_one_without_a_causal_lm_head(tmp_path: Path) -> None:
    message = _error(_scratch_args(tmp_path / "out", scratch='{"model_type": "gtp2"}'))
    assert message == (
        "--scratch_model model_type 'gtp2' is unknown to transformers; use a causal LM family such as gpt2, llama, "
        "qwen2 or mistral."
    )
    message = _error(_scratch_args(tmp_path / "out", scratch='{"model_type": "t5"}'))
    assert message.startswith("--scratch_model model_type 't5' has no causal LM head in transformers; use a causal LM")


def test_scratch_model_setting_what_the_tokenizer_sets(tmp_path: Path) -> None:
    message = _error(_scratch_args(tmp_path / "out", scratch='{"n_layer": 1, "vocab_size": 100}'))
    assert message == (
        "--scratch_model field 'vocab_size' is set from the word-level tokenizer built from the data; leave it out."
    )


def test_model_folder_whose_tokenizer_has_no_eos(tiny_gpt2: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = tmp_path / "no_eos"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((tiny_gpt2 / name).read_bytes())
    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2)
    tokenizer.eos_token = None
    tokenizer.save_pretrained(folder)
    message = _error(recipe_args(folder, tmp_path / "out"))
    assert message.startswith("the tokenizer has no eos token, which hf_icot puts between question, CoT and answer;")


# ---------------------------------------------------------------------------------------------------------------
# Run folder and push


def test_output_dir_naming_an_existing_file(tiny_gpt2: Path, tmp_path: Path) -> None:
    """Refused while parsing: before, the data were built and Trainer then failed with a FileExistsError."""
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    message = _parse_error(recipe_args(tiny_gpt2, taken))
    assert message == f"output_dir '{taken}' is a file; give a folder (new, or one to write into)."
    assert taken.read_text() == "mine\n"


def test_push_to_hub_without_hub_model_id(tiny_gpt2: Path, tmp_path: Path) -> None:
    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", "--push_to_hub"))
    assert message == "--push_to_hub needs --hub_model_id USER/NAME, the model repo to push to."


# ---------------------------------------------------------------------------------------------------------------
# Flag values, refused while parsing


# fmt: off
BAD_FLAGS = [
    (["--max_train_examples", "0"], "--max_train_examples 0 is not allowed; it must be >= 1."),
    (["--max_eval_examples", "-2"], "--max_eval_examples -2 is not allowed; it must be >= 1."),
    (["--use_peft", "--lora_r", "0"], "--lora_r 0 is not allowed; it must be >= 1."),
    (["--use_peft", "--lora_dropout", "1.5"], "--lora_dropout 1.5 is not allowed; it must be in [0, 1)."),
    (["--scratch_model", "[2]"], "--scratch_model '[2]' is not a JSON object; write e.g. '{\"a\": 1}'."),
    (["--eval_modes", "implicit", "bogus"], "evaluation mode 'bogus' is unknown; allowed: 'implicit', "
     "'explicit', 'reference', 'latent', 'hint=k' or 'latent=k' with k >= 0."),
    (["--max_new_tokens", "0"], "max_new_tokens 0 is not allowed; it must be >= 1."),
    (["--per_device_train_batch_size", "0"], "per_device_train_batch_size 0 is not allowed; it must be >= 1."),
    (["--per_device_eval_batch_size", "0"], "per_device_eval_batch_size 0 is not allowed; it must be >= 1."),
    (["--gradient_accumulation_steps", "0"], "gradient_accumulation_steps 0 is not allowed; it must be >= 1."),
    (["--generation_eval_examples", "0"], "generation_eval_examples 0 is not allowed; it must be >= 1."),
    (["--remove_unused_columns", "true"], "remove_unused_columns=True would drop question/cot/answer before "
     "the ICoT collator; keep it False."),
    (["--removal_fill", "blank"], "fill 'blank' is not allowed; choose one of drop, pad, keep_position."),
    (["--removal_side", "middle"], "stepwise removal side 'middle' is not allowed; choose one of left, right."),
    (["--removal_unit", "step"], "stepwise unit 'step' is not allowed; choose one of token."),
    (["--remove_per_epoch", "0"], "remove_per_epoch 0.0 is not allowed; it must be > 0."),
    (["--pretrain_epochs", "-1"], "pretrain_epochs -1 is not allowed; it must be >= 0."),
    (["--length_hint"], "length hints are for the mixture schedule; stepwise takes hint=False."),
    (["--schedule", "staged", "--steps_per_stage", "0"], "steps_per_stage 0 is not allowed; it must be >= 1."),
    (["--schedule", "staged", "--stage_length", "0"], "stage_length 0.0 is not allowed; it must be > 0."),
    (["--schedule", "staged", "--final_remove_all"], "final_remove_all needs num_stages, the number of stages "
     "before the final one."),
    (["--schedule", "log_icot", "--num_levels", "0"], "num_levels 0 is not allowed; it must be >= 1."),
    (["--schedule", "mixture", "--mixture_weights", "-1"], "mixture weights [-1.0] are not allowed; give >= 0 "
     "numbers with a sum > 0."),
    (["--schedule", "mixture", "--mixture_weights", "1", "--mixture_max_length", "3"], "give mixture weights "
     "or mixture max_length, not both: weights already fix the lengths."),
]
# fmt: on


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(flags) for flags, _ in BAD_FLAGS])
def test_bad_flag_value_is_one_sentence(flags: list[str], message: str, tmp_path: Path) -> None:
    argv = _scratch_args(tmp_path / "out", *flags)
    if "--scratch_model" in flags:  # the flag under test replaces the valid one
        at = argv.index("--scratch_model")
        del argv[at : at + 2]
    assert _parse_error(argv) == message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("schedule", "stepwize", "schedule 'stepwize' is unknown; allowed: full_cot, no_cot, stepwise, staged, "
         "log_icot, mixture, adaptive, coconut, codi, pccot."),
        ("too_long", "truncate", "too_long 'truncate' is not allowed; choose one of error, skip."),
    ],
)  # fmt: skip
def test_bad_choice_in_a_config_file_is_one_sentence(key: str, value: str, message: str, tmp_path: Path) -> None:
    """argparse checks choices of flags only; a YAML value reaches the config's own check."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"task": "parity", "scratch_model": {}, key: value}))
    assert _parse_error(["--config", str(config), "--output_dir", str(tmp_path / "out")]) == message


def test_bad_choice_on_the_command_line_is_one_line_with_a_pointer_to_help(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as caught:
        icot_gpt2.parse_args(_scratch_args(tmp_path / "out", "--schedule", "stepwize"))
    assert caught.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "usage:" not in stderr
    assert stderr.rstrip().endswith(
        "error: argument --schedule: invalid choice: 'stepwize' (choose from 'full_cot', 'no_cot', 'stepwise', "
        "'staged', 'log_icot', 'mixture', 'adaptive', 'coconut', 'codi', 'pccot'); see --help."
    )
    with pytest.raises(SystemExit):
        icot_gpt2.parse_args(_scratch_args(tmp_path / "out", "--learning_rate", "fast"))
    stderr = capsys.readouterr().err
    assert stderr.rstrip().endswith(
        "error: argument --learning_rate/--learning-rate: invalid float value: 'fast'; see --help."
    )
    assert not (tmp_path / "out").exists()


def test_scratch_args_without_the_bad_flag_parse(tmp_path: Path) -> None:
    """The baseline of the parametrized cases above: the same command line without the bad value is accepted."""
    script_args, args, model_args = icot_gpt2.parse_args(_scratch_args(tmp_path / "out"))
    assert script_args.task == "multiplication" and json.loads(SCRATCH) == model_args.scratch_model
    assert args.output_dir == str(tmp_path / "out") and not os.path.exists(args.output_dir)
