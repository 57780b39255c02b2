"""Methods as objects: the registry, each method's options through ICoTConfig, no method named outside its own file,
and the Coconut protocol's pieces (unconditional per-epoch resets, a start stage, marker rows from a named token)."""

import ast
from pathlib import Path

import pytest
import torch

from hf_icot.curriculum import build_schedule
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.methods import METHODS, Method, method_class, method_options
from hf_icot.methods.coconut import CoconutMethod
from hf_icot.methods.codi import CODIConfig, CODIMethod
from hf_icot.methods.pccot import PCCoTConfig, PCCoTMethod
from hf_icot.training.config import method_from_config, schedule_from_config
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, latent_config, tiny_gpt2

PACKAGE = Path(__file__).resolve().parents[2] / "hf_icot"


config = latent_config


@pytest.fixture(scope="module")
def task():
    train, test = counting_examples(length=6, n_test=16)
    return train, test, build_word_level_tokenizer([train, test], extra_tokens=[*LATENT_TOKENS, "<<"])


def test_the_registry_names_each_method_by_its_schedule_and_token_removal_runs_the_rest(tmp_path):
    assert METHODS == {"coconut": CoconutMethod, "codi": CODIMethod, "pccot": PCCoTMethod}
    assert method_class("stepwise") is Method and method_class("log_icot") is Method
    args = config(tmp_path, schedule="codi", use_prj=True, prj_dim=8, distill_loss_factor="2", num_latent=3)
    method = method_from_config(args, schedule_from_config(args))
    assert isinstance(method, CODIMethod) and method.config == CODIConfig(
        use_prj=True, prj_dim=8, distill_loss_factor=2.0
    )
    assert method.schedule.num_latent == 3 and method.latent
    assert not method_from_config(config(tmp_path), schedule_from_config(config(tmp_path))).latent
    # Each option is declared once, on its method's config, and says which method reads it.
    assert method_options()["use_prj"].help.startswith("codi: ")
    assert method_options()["latent_token_init"].help.startswith("coconut: ")
    assert method_options()["loss_gamma"].help.startswith("pccot: ")
    args = config(tmp_path, schedule="pccot", num_latent_tokens=24, num_iterations=3, loss_gamma=20.0,
                  use_layerwise_std=False)  # fmt: skip
    method = method_from_config(args, schedule_from_config(args))
    assert isinstance(method, PCCoTMethod) and method.config == PCCoTConfig(loss_gamma=20.0, use_layerwise_std=False)
    assert (method.schedule.num_latent_tokens, method.schedule.num_iterations) == (24, 3)
    assert method.schedule.layout.latent_iterations == 3 and method.schedule.layout.latent_slots(5) == 24
    # SIM-CoT's options are declared once (hf_icot/methods/simcot.py) and every latent method reads them.
    simcot = method_options()["simcot"]
    assert simcot.help.startswith("coconut/codi: add SIM-CoT") and set(simcot.fields) == {"coconut", "codi"}
    args = config(tmp_path, schedule="coconut", simcot=True, simcot_loss_factor=0.5)
    assert method_from_config(args, schedule_from_config(args)).config.simcot_loss_factor == 0.5


def test_no_method_is_named_by_type_outside_its_own_file():
    """The trainer, the collator and the losses call a method's hooks; only a method's own file knows its class."""
    kinds = ("Coconut", "CODI", "PCCoT")
    names = {*kinds, "LatentSchedule", "LatentMethod", *(f"{kind}Method" for kind in kinds)}
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                kinds = node.args[1]
                kinds = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                found += [f"{path.name}: {k.id}" for k in kinds if getattr(k, "id", None) in names]
    assert found == []


def test_coconut_resets_its_optimizer_at_every_epoch_boundary_whatever_the_cot(task, tmp_path):
    """Coconut's run.py rebuilds AdamW at every epoch: E epochs, E - 1 resets, also once no CoT is left (stages 2-4
    here keep none); epoch_while_cot is the stepwise reference's rule, which skips those."""
    torch.set_num_threads(1)
    train, _, tokenizer = task
    resets = {}
    for every in ("epoch", "epoch_while_cot"):
        model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
        args = config(tmp_path / every, schedule="coconut", max_latent_stage=1, num_train_epochs=5,
                      reset_optimizer_every=every, per_device_train_batch_size=24)  # fmt: skip
        trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
        trainer.train()
        resets[every] = trainer.optimizer_resets
        logs = [entry for entry in trainer.state.log_history if "loss" in entry]
        assert logs[-1]["cot/kept_tokens_mean"] == 0.0
    assert resets == {"epoch": 4, "epoch_while_cot": 2}


def test_coconut_starts_at_a_given_stage_and_refuses_one_past_the_last(task, tmp_path):
    schedule = build_schedule("coconut", {"start_stage": 2, "epochs_per_stage": 3, "c_thought": 2})
    schedule.bind(10, max_cot_steps=6)
    assert [schedule.stage(step) for step in (0, 29, 30, 60)] == [2, 2, 3, 4]
    assert schedule.latent_plans(0, [0], [6])[0].n_latent == 4  # stage 2 from the first step: 2 steps × c = 2
    with pytest.raises(ValueError, match=r"start_stage 5 is past the last stage 4 \(max_latent_stage 3"):
        build_schedule("coconut", {"start_stage": 5, "max_latent_stage": 3})
    train, _, tokenizer = task  # the longest CoT (6 steps) bounds it where max_latent_stage is unset
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    with pytest.raises(ValueError, match=r"start_stage 8 is past the last stage 7 \(max_latent_stage 6"):
        ICoTTrainer(model=model, args=config(tmp_path, schedule="coconut", start_stage=8), train_dataset=train,
                    processing_class=tokenizer)  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_coconut_copies_a_named_tokens_rows_into_the_latent_markers(task, tmp_path):
    train, _, tokenizer = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    source, markers = tokenizer.convert_tokens_to_ids("<<"), tokenizer.convert_tokens_to_ids(list(LATENT_TOKENS))
    assert not torch.equal(
        model.get_input_embeddings().weight[markers[0]], model.get_input_embeddings().weight[source]
    )
    ICoTTrainer(model=model, args=config(tmp_path, schedule="coconut", latent_token_init="<<"), train_dataset=train,
                processing_class=tokenizer)  # fmt: skip
    for weight in (model.get_input_embeddings().weight, model.get_output_embeddings().weight):
        assert all(torch.equal(weight[marker], weight[source]) for marker in markers)
    with pytest.raises(ValueError, match=r"latent_token_init '<<<' is not a token of the tokenizer's vocabulary"):
        ICoTTrainer(model=model, args=config(tmp_path, schedule="coconut", latent_token_init="<<<"),
                    train_dataset=train, processing_class=tokenizer)  # fmt: skip


def test_a_checkpoint_written_before_a_method_option_existed_resumes_and_another_value_is_refused(task, tmp_path):
    """A method option added later (SIM-CoT's on CODI) is at its default in an older checkpoint: that resumes; a
    checkpoint that trained with another value of an option is refused, naming it."""
    from hf_icot.runs.run_folder import run_identity
    from hf_icot.training.curriculum_state import restore_curriculum_state

    train, _, tokenizer = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    trainer = ICoTTrainer(model=model, args=config(tmp_path, schedule="codi", num_latent=2), train_dataset=train,
                          processing_class=tokenizer)  # fmt: skip
    older = {key: value for key, value in trainer.method.to_dict().items() if not key.startswith("simcot")}
    saved = {"schedule": trainer.schedule.to_dict(), "method": older, "previous_step_without_cot": False,
             "optimizer_resets": 0, "pace": {}, "run": run_identity(trainer.args)}  # fmt: skip
    restore_curriculum_state(trainer, saved, trainer.args.per_device_train_batch_size)
    with pytest.raises(ValueError, match="with use_prj True, but this run has use_prj False"):
        restore_curriculum_state(trainer, {**saved, "method": {**older, "use_prj": True}},
                                 trainer.args.per_device_train_batch_size)  # fmt: skip
