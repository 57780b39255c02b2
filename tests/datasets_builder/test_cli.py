"""The command line: options derived from each task's Params, one-line errors with exit code 2, truthful --help."""

import dataclasses
import shlex
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import pytest

from datasets_builder import cli, publish, registry
from datasets_builder.tasks import ambiguity
from tests.hub_server import loopback_hub  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parents[2]


def run_main(argv, capsys):
    """Run the CLI in this process; returns (exit code, stdout, stderr)."""
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code, err, message_regex):
    import re

    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.fullmatch(r"python -m datasets_builder \w+: error: " + message_regex + r"\n", err), err


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], ["list", "build", "show", "push"]),
        (["list"], []),
        (["build"], ["--task", "--out", "--license", "--no-progress", "ambiguity", "reference_text"]),
        (["build", "--task", "ambiguity"], ["--out", "--no-progress"]),
        (["build", "--task", "reference_text"], ["--out", "--path", "--config", "--seed"]),
        (["show"], ["--config", "--split", "--truncation", "--num"]),
        (["push"], ["--repo", "--private", "--revision", "--token", "--message", "HF_TOKEN"]),
    ],
)
def test_help_of_every_command_names_its_real_options(argv, expected):
    result = subprocess.run(
        [sys.executable, "-m", "datasets_builder", *argv, "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    for option in expected:
        assert option in result.stdout
    if argv[:3] == ["build", "--task", "ambiguity"]:
        for param in dataclasses.fields(ambiguity.Params):
            assert f"--{param.name}" in result.stdout
            assert param.metadata["help"].split(" (")[0][:30] in " ".join(result.stdout.split())


def test_every_registered_task_follows_the_module_contract():
    assert {"ambiguity", "reference_text"} <= set(registry.task_names())
    for name in registry.task_names():
        registry.check_task_module(registry.get_task(name))


def test_list_names_every_task(capsys):
    code, out, _ = run_main(["list"], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == registry.task_names()


def test_build_then_show(tmp_path, capsys):
    out_dir = tmp_path / "data"
    argv = ["build", "--task", "ambiguity", "--n_bases", "5", "--k", "2", "--seed", "4", "--out", str(out_dir)]
    code, out, _ = run_main([*argv, "--no-progress"], capsys)
    config = ambiguity.Params(n_bases=5, k=2, seed=4).config_name()
    assert code == 0
    assert out.startswith(f"wrote config {config} (train 10, test 10) to {out_dir}; fingerprint sha256:")
    code, out, _ = run_main(["show", str(out_dir), "--config", config, "-n", "3", "--split", "train"], capsys)
    rows = datasets.load_dataset(str(out_dir), config, split="train")
    assert out.splitlines() == [f"{row['question']}|| #### {row['answer']}" for row in rows.select(range(3))]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["build", "--task", "nope", "--out", "x"], r"task 'nope' is unknown; allowed: ambiguity, .*\."),
        (["build", "--task", "ambiguity", "--k", "5000", "--out", "x"], r"k=5000 is larger than the 1296 distinct .*"),
        (["build", "--task", "ambiguity", "--n_bases", "0", "--out", "x"], r"n_bases=0 is not allowed; .*"),
        (["build", "--task", "ambiguity", "--direction", "up", "--out", "x"], r"argument --direction: invalid .*"),
        (["build", "--task", "reference_text", "--out", "x"], r"path is empty; give at least one file .*"),
    ],
)
def test_bad_build_input_is_one_line_with_exit_code_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, message)
    assert not (tmp_path / "x").exists()


def test_parity_k_beyond_n_is_one_line(capsys, tmp_path):
    if "parity" not in registry.task_names():
        pytest.skip("the parity task is not registered")
    code, _, err = run_main(["build", "--task", "parity", "--n_bits", "4", "--k", "8", "--out", str(tmp_path)], capsys)
    one_line_error(code, err, r"k=8 .*n_bits=4.*")


def test_parity_needs_two_bits_as_its_help_says(capsys, tmp_path):
    argv = ["build", "--task", "parity", "--k", "1", "--train_size", "2", "--validation_size", "1", "--test_size", "1"]
    code, _, err = run_main([*argv, "--n_bits", "1", "--out", str(tmp_path / "one")], capsys)
    one_line_error(
        code,
        err,
        r"n_bits=1 is not allowed; use n_bits >= 2, so that the train, validation and test splits can each hold a "
        r"distinct input\.",
    )
    assert not (tmp_path / "one").exists()
    code, out, _ = run_main([*argv, "--n_bits", "2", "--out", str(tmp_path / "two"), "--no-progress"], capsys)
    assert code == 0 and out.startswith("wrote config parity_n2_k1_chain (train 2, validation 1, test 1)")
    code, out, _ = run_main(["build", "--task", "parity", "--help"], capsys)
    assert code == 0 and "--n_bits N_BITS Input bits n (>= 2)." in " ".join(out.split())


def test_one_state_semiautomaton_is_refused_like_modulus_1(capsys, tmp_path):
    table = tmp_path / "one.json"
    table.write_text(
        '{"states": ["s"], "inputs": ["0", "1"], "start": "s", "transitions": {"s": {"0": "s", "1": "s"}}}'
    )
    argv = ["build", "--task", "semiautomaton", "--length", "4", "--train_size", "4", "--test_size", "2"]
    code, _, err = run_main(
        [*argv, "--kind", "table", "--table_path", str(table), "--out", str(tmp_path / "t")], capsys
    )
    one_line_error(
        code, err, r"table one\.json: 'states' lists the one state 's'; a semiautomaton needs at least 2 states, else "
        r"every answer is the same\."
    )  # fmt: skip
    code, _, err = run_main([*argv, "--kind", "counter", "--modulus", "1", "--out", str(tmp_path / "c")], capsys)
    one_line_error(code, err, r"modulus=1 is not allowed; C_n needs at least 2 states\.")
    assert not (tmp_path / "t").exists() and not (tmp_path / "c").exists()


def test_bad_show_input_is_one_line(tmp_path, capsys):
    out_dir = tmp_path / "data"
    reference = tmp_path / "ref"
    reference.mkdir()
    (reference / "valid.txt").write_text("1 2 * 3 4||3 6 + 0 4 #### 3 0 1\n")
    run_main(["build", "--task", "reference_text", "--path", str(reference), "--out", str(out_dir)], capsys)
    code, _, err = run_main(["show", str(out_dir), "--config", "nope"], capsys)
    one_line_error(code, err, rf"config 'nope' is not in '{out_dir}'; available: ref\.")
    code, _, err = run_main(["show", str(out_dir), "--config", "ref", "--truncation", "step:left:3"], capsys)
    one_line_error(code, err, r"validation example 0: cannot remove 3 steps from the left of a CoT of 2 steps; .*")
    code, out, _ = run_main(["show", str(out_dir), "--config", "ref", "--truncation", "step:left:1"], capsys)
    assert out == "1 2 * 3 4||+ 0 4 #### 3 0 1\n"


def test_push_through_the_cli_never_prints_the_token(built_folder, loopback_hub, capsys):  # noqa: F811
    code, out, err = run_main(
        ["push", str(built_folder), "--repo", "tester/cli", "--token", "hf_wrong_secret"], capsys
    )
    assert code == 1
    assert err.startswith(
        f"python -m datasets_builder push: error: pushing {built_folder} to tester/cli failed: the Hub at "
    )
    assert err.count("\n") == 1
    assert "hf_wrong_secret" not in out + err
    code, out, err = run_main(
        ["push", str(built_folder), "--repo", "tester/cli", "--token", loopback_hub.token], capsys
    )
    assert code == 0, err
    assert out.startswith(f"pushed {built_folder} to {loopback_hub.url}/datasets/tester/cli/commit/")
    assert loopback_hub.token not in out + err
    assert set(loopback_hub.files("tester/cli")) == {
        str(p.relative_to(built_folder)) for p in built_folder.rglob("*.*")
    }


@pytest.fixture
def built_folder(tmp_path, capsys):
    out_dir = tmp_path / "data"
    run_main(["build", "--task", "ambiguity", "--n_bases", "4", "--k", "2", "--out", str(out_dir)], capsys)
    return out_dir


@dataclass
class _FlagParams:
    flag: bool = field(default=True, metadata={"help": "A switch."})
    sizes: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "Some sizes."})
    rate: float = field(default=0.5, metadata={"help": "A rate."})
    seed: int = field(default=0, metadata={"help": "Seed."})

    def config_name(self) -> str:
        return f"flag{int(self.flag)}_{'_'.join(map(str, self.sizes))}"


def test_bool_and_list_fields_become_flag_pairs_and_nargs(monkeypatch):
    module = types.ModuleType("datasets_builder.tasks.flagged")
    module.TASK_NAME, module.DESCRIPTION, module.GENERATOR_VERSION = "flagged", "A task for this test.", "0"
    module.Params, module.build, module.card_details = _FlagParams, lambda p, progress=False: None, lambda p: {}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.TASK_MODULES, "flagged", "flagged")
    registry.check_task_module(module)
    argv = ["build", "--task", "flagged", "--out", "x", "--no-flag", "--sizes", "3", "4", "5", "--rate", "0.25"]
    args = cli.build_parser(argv).parse_args(argv)
    assert (args.param_flag, args.param_sizes, args.param_rate, args.param_seed) == (False, [3, 4, 5], 0.25, 0)
    assert registry.params_to_argv({"flag": False, "sizes": [3, 4, 5], "rate": 0.25}) == [
        "--no-flag", "--sizes", "3", "4", "5", "--rate", "0.25",
    ]  # fmt: skip


def test_the_cards_rebuild_command_reproduces_the_config(tmp_path, capsys):
    first = tmp_path / "first"
    run_main(
        ["build", "--task", "ambiguity", "--n_bases", "6", "--k", "2", "--direction", "az_to_b", "--out", str(first)],
        capsys,
    )
    (record,) = publish.read_configs(first).values()
    card = (first / "README.md").read_text()
    rebuild = shlex.split(card.split("* rebuild: `")[1].split("`")[0])
    assert rebuild[:4] == ["python", "-m", "datasets_builder", "build"] and rebuild[-2:] == ["--out", "DIR"]
    second = tmp_path / "second"
    code, _, _ = run_main([*rebuild[3:-1], str(second), "--no-progress"], capsys)
    assert code == 0
    assert publish.read_configs(second)[record["config_name"]]["fingerprint"] == record["fingerprint"]


def test_make_params_checks_names():
    params = registry.make_params("ambiguity", n_bases=3, k=2)
    assert (params.n_bases, params.k, params.seed) == (3, 2, 0)
    with pytest.raises(ValueError, match=r"^parameter 'kk' is unknown for task 'ambiguity'; allowed: n_bases, k, "):
        registry.make_params("ambiguity", kk=2)
    with pytest.raises(ValueError, match=r"^task 'nope' is unknown; allowed: "):
        registry.make_params("nope")
