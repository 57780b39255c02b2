"""Build the trained tiny models that tests/hf_icot/test_generation_equivalence.py generates with.

    python -m tests.hf_icot.build_generation_fixture   # from the repository root

Two 2-layer GPT-2s (32 wide, 32 positions) trained with ICoTTrainer on counting questions of 4 to 6 letters (mixed
lengths, so generation batches are left-padded), with a token mixture, length hints and ``keep_position``: one removes
CoT tokens from the left, one from the right. Each is saved with its word-level tokenizer under
``tests/hf_icot/generation_fixture/<side>/`` (safetensors, about 110 kB). They are committed: the equivalence test
compares generations with outputs recorded from a trusted implementation, and training again on other hardware need
not give the same weights. Rebuilding changes the weights, so re-record the test's expected outputs after it.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import torch

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

FIXTURE = Path(__file__).resolve().parent / "generation_fixture"
LENGTHS = (4, 5, 6)
N_TEST = 8  # held out per length: the equivalence test's questions


def mixed_length_counting() -> tuple[datasets.Dataset, datasets.Dataset]:
    """Counting questions of every length in LENGTHS: train and a disjoint test set of N_TEST per length."""
    parts = [counting_examples(length=length, n_test=N_TEST) for length in LENGTHS]
    return (
        datasets.concatenate_datasets([train for train, _ in parts]),
        datasets.concatenate_datasets([test for _, test in parts]),
    )


def build(side: str, work: Path) -> Path:
    torch.set_num_threads(1)
    train, test = mixed_length_counting()
    tokenizer = build_word_level_tokenizer([train, test], max_hint_length=max(LENGTHS))
    model = tiny_gpt2(len(tokenizer), work / f"init-{side}", n_layer=2, n_embd=32, n_positions=32)
    args = ICoTConfig(
        output_dir=str(work / f"run-{side}"),
        schedule="mixture",
        length_hint=True,
        removal_side=side,
        removal_fill="keep_position",
        num_train_epochs=150,
        per_device_train_batch_size=16,
        learning_rate=3e-3,
        lr_scheduler_type="linear",
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    folder = FIXTURE / side
    trainer.model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        for side in ("left", "right"):
            print(build(side, Path(work)))
