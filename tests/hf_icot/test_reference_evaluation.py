"""Evaluation modes on hand-built cases: the reference protocol (free generation, ``#### answer`` with commas
removed), free generation of keep_position models that close an empty CoT, and which speeds are reported."""

from __future__ import annotations

import torch
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.encoding import encode_prompt
from hf_icot.evaluation.generation_accuracy import evaluate_generation, reportable_metrics
from tests.hf_icot.test_evaluation import FILLER, WORDS, ScriptedConfig, _word_level_tokenizer

EXAMPLES = [
    {"question": "1 2 * 3 4", "cot": ["5 6", "+ 7 8"], "answer": "9 0"},
    {"question": "2 * 3", "cot": ["6 7", "+ 8 9"], "answer": "0 1"},
    {"question": "3 4 * 5 6", "cot": ["7 8", "+ 9 0"], "answer": "1 2"},
]


class PositionScriptedLM(PreTrainedModel, GenerationMixin):
    """Writes its script after a known prompt only while every continuation token sits at the position the script
    gives it (``config.scripts[prompt] = (continuation ids, position of its first token)``); otherwise the filler."""

    config_class = ScriptedConfig

    def __init__(self, config):
        super().__init__(config)
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.post_init()
        self.generation_config.use_cache = False

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        logits = torch.zeros((*input_ids.shape, self.config.vocab_size))
        for row in range(input_ids.shape[0]):
            real = attention_mask[row].bool()
            tokens = input_ids[row][real].tolist()
            positions = position_ids[row][real].tolist()
            next_id = self.config.filler_id
            for prompt, (script, first_position) in self.config.scripts.items():
                prompt_ids = [int(i) for i in prompt.split()]
                written = tokens[len(prompt_ids) :]
                placed = positions[: len(prompt_ids)] == list(range(len(prompt_ids))) and positions[
                    len(prompt_ids) :
                ] == list(range(first_position, first_position + len(written)))
                if tokens[: len(prompt_ids)] == prompt_ids and written == script[: len(written)] and placed:
                    next_id = script[len(written)] if len(written) < len(script) else self.config.filler_id
            logits[row, -1, next_id] = 1.0
        return CausalLMOutput(logits=logits + self.anchor)


def _model(tokenizer, scripts):
    table = {}
    for example, (text, first_position) in zip(EXAMPLES, scripts):
        prompt = encode_prompt(example["question"], tokenizer, "explicit")
        table[" ".join(map(str, prompt))] = (tokenizer.convert_tokens_to_ids(text.split()), first_position)
    config = ScriptedConfig(scripts=table, filler_id=tokenizer.convert_tokens_to_ids(FILLER), vocab_size=len(WORDS))
    return PositionScriptedLM(config)


def test_keep_position_free_generation_moves_an_empty_cot_where_the_full_cot_ended():
    tokenizer = _word_level_tokenizer()
    prompt_length = [len(encode_prompt(ex["question"], tokenizer, "explicit")) for ex in EXAMPLES]
    # 0 and 1 internalized their CoT (5 tokens): their <eos> comes at prompt + 5; 2 writes its CoT, positions run on.
    model = _model(
        tokenizer,
        [
            ("<eos> #### 9 0 <eos>", prompt_length[0] + 5),
            ("<eos> #### 0 2 <eos>", prompt_length[1] + 5),
            ("7 8 + 9 0 <eos> #### 1 2 <eos>", prompt_length[2]),
        ],
    )
    kept = SequenceLayout(fill="keep_position")
    metrics = evaluate_generation(model, tokenizer, EXAMPLES, modes=["explicit", "reference"], layout=kept)
    assert metrics["explicit/answer_em"] == 2 / 3  # 0 and 2 right, 1 answers 0 2
    assert metrics["explicit/cot_em"] == 1 / 3  # only 2 wrote its CoT
    assert metrics["reference/answer_em"] == 2 / 3
    assert "reference/cot_em" not in metrics
    # Without keep_position nothing moves: the internalized rows fall off their script.
    plain = evaluate_generation(model, tokenizer, EXAMPLES, modes=["explicit"])
    assert plain["explicit/answer_em"] == 1 / 3


def test_reference_mode_reads_the_answer_as_the_reference_does():
    tokenizer = _word_level_tokenizer()
    n = [len(encode_prompt(ex["question"], tokenizer, "explicit")) for ex in EXAMPLES]
    model = _model(
        tokenizer,
        [
            ("5 6 + 7 8 <eos> #### 9 0 <eos>", n[0]),  # right in both modes
            # A #### inside the CoT: explicit reads the answer after the CoT's <eos> (right), the reference reads from
            # the first #### ("#### 7 #### 0 1", wrong).
            ("6 7 #### 7 <eos> #### 0 1 <eos>", n[1]),
            ("7 8 + 9 0 <eos> 1 2 <eos>", n[2]),  # no ####: the reference reads the whole text "7 8 + 9 0 1 2"
        ],
    )
    metrics = evaluate_generation(model, tokenizer, EXAMPLES, modes=["explicit", "reference"])
    assert metrics["explicit/answer_em"] == 2 / 3 and metrics["explicit/cot_em"] == 2 / 3
    assert metrics["reference/answer_em"] == 1 / 3


def test_speeds_are_reported_only_for_modes_whose_answers_are_right():
    metrics = {
        "test/implicit/answer_em": 1.0,
        "test/implicit/examples_per_s": 100.0,
        "test/explicit/answer_em": 0.0,
        "test/explicit/examples_per_s": 300.0,
        "test/explicit/tokens_per_s": 900.0,
        "test/reference/answer_em": 0.6,
        "test/reference/examples_per_s": 50.0,
        "validation/explicit/answer_em": 0.2,
        "validation/explicit/examples_per_s": 10.0,
    }
    kept = reportable_metrics(metrics)
    assert "test/explicit/examples_per_s" not in kept and "test/explicit/tokens_per_s" not in kept
    assert kept["test/explicit/answer_em"] == 0.0  # the score stays; only the speed goes
    assert kept["test/implicit/examples_per_s"] == 100.0 and kept["test/reference/examples_per_s"] == 50.0
    assert kept["validation/explicit/examples_per_s"] == 10.0  # the best of its split
