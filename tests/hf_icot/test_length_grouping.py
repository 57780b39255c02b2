"""``train_sampling_strategy="group_by_length"`` on ICoTTrainer: batches of like lengths (less padding), the same
batches on every run, and a resumed run continues with the batches of the uninterrupted one."""

import datasets
import torch

from hf_icot.cot import example_features
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_example, tiny_gpt2


def mixed_length_counting(n: int = 96) -> datasets.Dataset:
    """Counting questions of 2 to 9 letters: sequences from 9 to 23 tokens."""
    generator = torch.Generator().manual_seed(0)
    rows = []
    for index in range(n):
        length = 2 + index % 8
        letters = tuple("ab"[int(bit)] for bit in torch.randint(0, 2, (length,), generator=generator))
        rows.append(counting_example(letters))
    return datasets.Dataset.from_list(rows, features=example_features())


def run(tmp_path, name, strategy, max_steps=12, resume=None, save_steps=None):
    torch.set_num_threads(1)
    train = mixed_length_counting()
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / f"init-{name}", n_layer=1, n_embd=32)
    args = ICoTConfig(
        output_dir=str(tmp_path / name), schedule="stepwise", remove_per_epoch=2, max_steps=max_steps,
        per_device_train_batch_size=8, train_sampling_strategy=strategy, learning_rate=1e-3, report_to="none",
        use_cpu=True, disable_tqdm=True, seed=3, keep_stage_checkpoints=False, evaluate_each_stage=False,
        save_strategy="steps" if save_steps else "no", save_steps=save_steps or 500,
    )  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    batches = {}
    fetch = trainer.get_batch_samples

    def keep(*fetch_args, **kwargs):
        step = trainer.state.global_step
        rendered, items = fetch(*fetch_args, **kwargs)
        batches[step] = rendered[0]["input_ids"].clone(), rendered[0]["attention_mask"].clone()
        return rendered, items

    trainer.get_batch_samples = keep
    trainer.train(resume_from_checkpoint=resume)
    return trainer, batches


def padding_efficiency(batches) -> float:
    return sum(mask.sum().item() for _, mask in batches.values()) / sum(mask.numel() for _, mask in batches.values())


def test_length_grouped_batches_pad_less_and_are_deterministic(tmp_path):
    trainer, grouped = run(tmp_path, "grouped", "group_by_length")
    assert trainer.train_dataset["length"][:3] == [
        len(q) + n + len(a) + 3
        for q, n, a in zip(
            trainer.train_dataset["question_ids"][:3],
            trainer.train_dataset["n_cot_tokens"][:3],
            trainer.train_dataset["answer_ids"][:3],
        )
    ]
    _, again = run(tmp_path, "again", "group_by_length")
    _, shuffled = run(tmp_path, "random", "random")
    assert all(torch.equal(grouped[s][0], again[s][0]) for s in grouped)
    assert padding_efficiency(grouped) > padding_efficiency(shuffled) + 0.1
    assert padding_efficiency(grouped) > 0.85


def test_length_grouped_run_resumes_with_the_same_batches(tmp_path):
    _, whole = run(tmp_path, "whole", "group_by_length", max_steps=16, save_steps=6)
    _, resumed = run(
        tmp_path, "whole", "group_by_length", max_steps=16, resume=str(tmp_path / "whole" / "checkpoint-6")
    )
    assert sorted(resumed) == list(range(6, 16))
    assert all(torch.equal(whole[s][0], resumed[s][0]) for s in resumed)
