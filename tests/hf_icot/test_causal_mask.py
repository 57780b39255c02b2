"""No attention mask where it cannot matter (hf_icot.levers.causal_mask): the same loss and gradients without it on
right-padded ICoT batches, the mask kept where it matters, and ICoTTrainer's forward without it."""

from __future__ import annotations

import datasets
import pytest
import torch
from transformers import AutoModelForCausalLM

from hf_icot.cot import PLACEHOLDER_TOKEN, TruncationSpec
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.levers.causal_mask import is_causal_lm, needless_attention_mask, without_needless_mask
from tests.hf_icot.test_labelled_logits import FAMILIES, icot_like_batch, loss_and_gradients
from tests.hf_icot.tiny_task import counting_examples


def rendered_batch(spec: TruncationSpec) -> dict[str, torch.Tensor]:
    """A rendered batch of 8 counting examples of 4 to 7 letters (so rows are right-padded), cut by ``spec``."""
    rows = [example for length in (4, 5, 6, 7) for example in counting_examples(length, n_test=2)[1]]
    tokenizer = build_word_level_tokenizer(rows, extra_tokens=[PLACEHOLDER_TOKEN])
    collator = ICoTCollator(tokenizer)
    prepared = collator.prepare_dataset(datasets.Dataset.from_list(rows))[0]
    examples = list(prepared)
    batch = collator.render(examples, [spec] * len(examples))
    assert (batch["attention_mask"] == 0).any(), "the rows must differ in length"
    return batch


def loss_of(model, batch):
    return model(**batch).loss


@pytest.mark.parametrize(
    "spec",
    [
        TruncationSpec("token", "none"),
        TruncationSpec("token", "left", 2, saturate=True),
        TruncationSpec("token", "left", 2, "pad", saturate=True),  # placeholders are attended: mask 1
        TruncationSpec("token", "all"),
    ],
    ids=["full", "left2", "left2_pad", "all"],
)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_right_padded_batches_give_the_same_loss_and_gradients_without_the_mask(family, spec):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = FAMILIES[family].__class__.from_dict({**FAMILIES[family].to_dict(), "vocab_size": 64})
    model = AutoModelForCausalLM.from_config(config).eval()  # sdpa, transformers' default
    batch = rendered_batch(spec)
    lean = without_needless_mask(model, batch)
    assert "attention_mask" not in lean and "attention_mask" in batch
    loss, gradients = loss_and_gradients(model, loss_of, model, batch)
    lean_loss, lean_gradients = loss_and_gradients(model, loss_of, model, lean)
    assert abs(loss - lean_loss) <= 1e-6
    assert gradients.keys() == lean_gradients.keys()
    for name, gradient in gradients.items():
        torch.testing.assert_close(lean_gradients[name], gradient, atol=1e-6, rtol=1e-5, msg=name)


def test_the_mask_is_kept_where_it_matters():
    right = icot_like_batch("right", keep_position=False)
    assert needless_attention_mask(right)
    # Left padding, kept positions (transformers reads a jump in position_ids as another packed sequence when no
    # mask is given), a hole inside a row, a label on padding.
    assert not needless_attention_mask(icot_like_batch("left", keep_position=False))
    assert not needless_attention_mask(icot_like_batch("right", keep_position=True))
    holed = {**right, "attention_mask": right["attention_mask"].clone()}
    holed["attention_mask"][0, 4] = 0
    assert not needless_attention_mask(holed)
    labelled_padding = {**right, "labels": right["labels"].clone()}
    labelled_padding["labels"][3, -1] = 5
    assert not needless_attention_mask(labelled_padding)
    # A model that is not one of transformers' causal LMs keeps it whatever the batch.
    assert not is_causal_lm(torch.nn.Linear(2, 2))
    assert without_needless_mask(torch.nn.Linear(2, 2), right) is right
    # Where the mask would change the loss, it is kept, so the loss is the masked one.
    model = AutoModelForCausalLM.from_config(FAMILIES["gpt2"]).eval()
    left = icot_like_batch("left", keep_position=False)
    assert without_needless_mask(model, left) is left
    assert abs(model(**left).loss - model(**{k: v for k, v in left.items() if k != "attention_mask"}).loss) > 1e-4


def test_icot_trainer_forwards_right_padded_batches_without_the_mask(tmp_path):
    from hf_icot.curriculum import Stepwise
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    train, _ = counting_examples(6)
    tokenizer = build_word_level_tokenizer(train)
    config = FAMILIES["gpt2"].__class__.from_dict(
        {**FAMILIES["gpt2"].to_dict(), "vocab_size": len(tokenizer), "eos_token_id": tokenizer.eos_token_id}
    )
    model = AutoModelForCausalLM.from_config(config)
    seen: list[bool] = []
    model.register_forward_pre_hook(lambda _, args, kwargs: seen.append("attention_mask" in kwargs), with_kwargs=True)
    args = ICoTConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=3, report_to="none", use_cpu=True,
        logging_steps=1, save_strategy="no", evaluate_each_stage=False,
    )  # fmt: skip
    # Removal smoothing draws a different count per example: rows of different lengths, right-padded.
    trainer = ICoTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        schedule=Stepwise(remove_per_epoch=2, removal_smoothing_lambda=1.0),
    )
    trainer.train()
    assert seen and not any(seen)
