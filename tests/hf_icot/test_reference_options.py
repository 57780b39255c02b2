"""Options that follow the stepwise-ICoT reference: no removal offsets during pretraining, ..."""

from __future__ import annotations

import math

from hf_icot.curriculum import Stepwise


def test_pretraining_removes_exactly_remove_start_from_without_offsets():
    schedule = Stepwise(remove_per_epoch=1, remove_start_from=3, removal_smoothing_lambda=4, pretrain_epochs=2)
    schedule.bind(100)
    ids = list(range(5000))
    # train.py: `if epoch < args.pretrain_epochs: to_remove.fill_(args.remove_start_from)`.
    for step in (0, 99, 199):
        assert {spec.count for spec in schedule.specs(step, ids)} == {3}
    # From then on each example adds an offset o with P(o) = (1 - e^-4) e^(-4 o): about 98.2% remove 3, 1.8% 4.
    after = [spec.count for spec in schedule.specs(200, ids)]
    assert set(after) <= {3, 4, 5, 6}
    assert abs(after.count(3) / len(ids) - (1 - math.exp(-4))) < 0.01
    assert after.count(4) > 0


def _config(tmp_path, **overrides):
    from hf_icot.training.config import ICoTConfig

    values = dict(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, learning_rate=3e-3, report_to="none",
        use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0,
    )  # fmt: skip
    values.update(overrides)
    return ICoTConfig(**values)


def test_max_len_train_skips_long_batches_counts_them_and_leaves_weights_alone(tmp_path):
    import torch

    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.training.trainer import ICoTTrainer
    from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

    train, _ = counting_examples(length=4, n_test=4)  # 12 examples of 13 tokens with the full CoT, 9 without
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    before = {name: value.clone() for name, value in model.named_parameters()}
    args = _config(tmp_path, schedule="full_cot", max_len_train=12, max_steps=3, logging_steps=1)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    assert trainer.skipped_long_batches == 3
    assert [entry for entry in trainer.state.log_history if "loss" in entry][-1]["cot/skipped_long_batches"] == 3
    assert all(torch.equal(before[name], value) for name, value in model.named_parameters())
    # Without CoT the batches fit (9 tokens): nothing is skipped and the model trains.
    args = _config(tmp_path, schedule="no_cot", max_len_train=12, max_steps=3)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    assert getattr(trainer, "skipped_long_batches", 0) == 0
    assert not all(torch.equal(before[name], value) for name, value in model.named_parameters())


def test_decay_all_parameters_decays_biases_and_layer_norms_as_the_reference(tmp_path):
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.runs.checkpoints import CheckpointedTrainer
    from hf_icot.training.trainer import ICoTTrainer
    from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

    train, _ = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    names = {name for name, _ in model.named_parameters()}
    default = ICoTTrainer(model=model, args=_config(tmp_path), train_dataset=train, processing_class=tokenizer)
    assert "transformer.ln_f.bias" not in default.get_decay_parameter_names(model)
    everything = ICoTTrainer(
        model=model, args=_config(tmp_path, decay_all_parameters=True), train_dataset=train, processing_class=tokenizer
    )
    assert set(everything.get_decay_parameter_names(model)) == names
    # The trainer without a curriculum (the marginals recipe's) honours the same flag.
    plain = CheckpointedTrainer(model=model, args=_config(tmp_path), train_dataset=train, processing_class=tokenizer)
    assert "transformer.ln_f.bias" not in plain.get_decay_parameter_names(model)
    plain_all = CheckpointedTrainer(
        model=model, args=_config(tmp_path, decay_all_parameters=True), train_dataset=train, processing_class=tokenizer
    )
    assert set(plain_all.get_decay_parameter_names(model)) == names


def test_best_epoch_rule_forgets_the_best_while_cot_remains():
    from hf_icot.training.selection import new_best_epochs

    records = [(0.9, True), (0.2, True), (0.5, False), (0.4, False), (0.5, False), (0.7, False), (0.6, False)]
    # Epochs 0-1 have CoT left: each is the new best (even 0.2 after 0.9); then 0.5 > 0.2, and only 0.7 beats it.
    assert new_best_epochs(records) == [True, True, True, False, False, True, False]


def test_best_epoch_callback_ends_with_the_selected_epochs_weights(tmp_path, monkeypatch):
    import torch

    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.training.selection import BestEpochCallback
    from hf_icot.training.trainer import ICoTTrainer
    from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

    train, test = counting_examples(length=4, n_test=4)  # 3 steps per epoch; no_cot: no CoT in any epoch
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = _config(tmp_path, schedule="no_cot", num_train_epochs=4)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    scores, snapshots = iter([0.25, 0.75, 0.5, 0.75]), []

    # Validation scores by epoch; the test split is asked at each new best.
    def scripted_accuracy(split, modes, metric_key_prefix):
        if split is test:
            return {f"{modes[0]}/answer_em": 1.0}
        snapshots.append({n: v.clone() for n, v in trainer.model.state_dict().items()})
        return {f"{modes[0]}/answer_em": next(scores)}

    monkeypatch.setattr(trainer, "evaluate_generation", scripted_accuracy)
    callback = BestEpochCallback(trainer, validation=train, test=test, mode="implicit")
    trainer.add_callback(callback)
    trainer.train()
    assert callback.best_epoch == 1  # 0.75 at epoch 1; epoch 3's 0.75 does not beat it
    assert [row["test"] for row in callback.summary()["epochs"]] == [1.0, 1.0, None, None]
    assert all(torch.equal(value, snapshots[1][name]) for name, value in trainer.model.state_dict().items())
    assert callback.flat_metrics()["selection/best_epoch"] == 1.0


def test_gpt2_positions_widen_with_copies_of_the_last_and_weights_reinitialize(tmp_path):
    import torch

    from hf_icot.modeling.loading import reinitialize_weights, widen_positions
    from tests.hf_icot.tiny_task import tiny_gpt2

    model = tiny_gpt2(20, tmp_path / "init", n_layer=1, n_embd=32, n_positions=16)
    old = model.transformer.wpe.weight.detach().clone()
    widen_positions(model, 24)
    wpe = model.transformer.wpe.weight
    assert wpe.shape == (24, 32) and model.config.n_positions == 24
    assert torch.equal(wpe[:16], old) and all(torch.equal(wpe[i], old[-1]) for i in range(16, 24))
    logits = model(torch.tensor([list(range(20))]), position_ids=torch.tensor([list(range(4, 24))])).logits
    assert logits.shape == (1, 20, 20)  # positions beyond the old 16 have embeddings
    before = model.transformer.h[0].mlp.c_fc.weight.detach().clone()
    reinitialize_weights(model)
    after = model.transformer.h[0].mlp.c_fc.weight
    assert not torch.equal(before, after) and abs(float(after.std()) - model.config.initializer_range) < 0.005


def test_reference_files_are_read_as_evaluation_splits(tmp_path):
    from hf_icot.data import read_reference_file

    path = tmp_path / "test.txt"
    path.write_text("John has 1,000 apples.||<<1000+234=1234>> #### 1,234\n\n2 * 3||6 #### 6\n", encoding="utf-8")
    split = read_reference_file(path)
    assert split.to_list() == [
        {"question": "John has 1,000 apples.", "cot": ["<<1000+234=1234>>"], "answer": "1,234"},
        {"question": "2 * 3", "cot": ["6"], "answer": "6"},
    ]
