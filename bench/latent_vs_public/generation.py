"""Coconut's and CODI's own generation beside hf_icot's latent generation, on the same weights and the same questions.

    python bench/latent_vs_public/generation.py --coconut /tmp/coconut --codi /tmp/codi [--train-steps 60]

Their side runs their code from the checkouts given (nothing of it is committed): Coconut's ``Coconut.generate``
(``coconut.py``: one question at a time, its prompts from ``dataset.py``'s ``get_question_latent_dataset``; the answer
read as its ``run.py`` reads it) and CODI's ``test.py`` (its ``evaluation()`` itself: the latent passes, then greedy
decoding from the cache; its printed predictions parsed back). Ours: :func:`hf_icot.evaluation.generation_accuracy.
evaluate_generation` in ``latent`` mode with the layout's ``latent_format`` (``coconut`` / ``codi``), on the rows of
``data.py`` as ``latent_json`` builds them.

The weights: a 2-layer, 64-wide GPT-2 over the BPE of ``data.py``, trained here for ``--train-steps`` AdamW steps with
our loss in the method's format (so that it writes answers), then given to both sides — to Coconut's class as the model
it wraps, to CODI's ``test.py`` as the checkpoint it loads. Changed at run time only: Coconut's GPT-2 takes and returns
its cache as ``(k, v)`` tuples (``run.py``'s :func:`tuple_cache_lm`); CODI's ``test.py`` runs on the CPU in float32 —
its ``"cuda"`` (``Tensor.to``, ``Module.to``, ``torch.tensor`` / ``torch.zeros``) becomes the CPU, its model loads in
float32 and its bfloat16 cast is skipped — with ``gsm8k``'s test set replaced by ``data.py``'s CODI rows, each question
twice in a batch of 2 (its greedy step squeezes a batch of 1 away; two copies need no padding, which its later
passes, without an attention mask, would attend to). CODI's ids:
our tokenizer puts ``[PAD]``, ``<|start-latent|>``, ``<|end-latent|>`` right after the vocabulary its model loads with,
where CODI's ``pad``, ``bot`` and ``eot`` go.

Printed: continuations equal (the generated ids, theirs without the ``<eos>`` Coconut stops before / the decoded
text CODI prints) and answers equal (Coconut: the strings; CODI: its number against ours read after ``The answer
is:``), each out of the questions asked.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's root on the path, as for `python -m`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.latent_vs_public.data import (  # noqa: E402
    CODI_ROWS,
    GSM_ROWS,
    bpe_tokenizer,
    corpus,
    one_process_map,
    our_prepared,
)
from bench.latent_vs_public.run import load_module, tuple_cache_lm  # noqa: E402

#: (name, rows, c_thought, max_latent_stage, max_new_tokens as Coconut's run.py: 64 for GSM8K, 128 otherwise).
COCONUT_SETTINGS = [
    ("GSM8K (c=2, max 3, pad)", "gsm", 2, 3, 64),
    ("ProsQA/ProntoQA (c=1, max 6, pad)", "prosqa", 1, 6, 128),
]


def small_gpt2(vocab_size: int, seed: int = 0) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=1024, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def train_briefly(lm: Any, method: Any, examples: list[dict], step: int, steps: int) -> None:
    """``steps`` AdamW steps of the method's own loss on every example at once, rendered at schedule step ``step``."""
    import torch

    optimizer = torch.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.0)
    batch, _ = method.render(examples, step, False, None)
    for _ in range(steps):
        optimizer.zero_grad()
        method.loss(lm, latent_id=method.renderer.tokens.latent, **batch).loss.backward()
        optimizer.step()
    lm.eval()


def ours(lm: Any, tokenizer: Any, json_file: Path, layout: Any, max_new_tokens: int) -> list[dict]:
    """Our latent-mode predictions on the rows of ``json_file`` (``latent_json``)."""
    from datasets_builder import build_dataset
    from hf_icot.evaluation.generation_accuracy import evaluate_generation

    dataset, _ = build_dataset("latent_json", {"path": [str(json_file)]})
    split = next(iter(dataset.values()))
    _, predictions = evaluate_generation(
        lm, tokenizer, split, modes=["latent"], layout=layout, max_new_tokens=max_new_tokens, batch_size=8,
        return_predictions=True,
    )  # fmt: skip
    return predictions["latent"]


# -- Coconut --------------------------------------------------------------------------------------------------------


def coconut_generation(coconut_repo: Path, files: dict[str, Path], steps: int) -> list[dict]:
    import torch

    from hf_icot.curriculum import build_schedule

    dataset_module = load_module(coconut_repo / "dataset.py", "their_coconut_dataset")
    coconut_module = load_module(coconut_repo / "coconut.py", "their_coconut")
    tokenizer = bpe_tokenizer(corpus(json.loads(files["prosqa"].read_text())), files["prosqa"].parent / "gpt2-bpe")
    tokenizer.pad_token = tokenizer.eos_token  # Coconut's run.py
    results = []
    for name, rows, c, max_stage, max_new_tokens in COCONUT_SETTINGS:
        options = {
            "latent_format": "coconut",
            "c_thought": c,
            "max_latent_stage": max_stage,
            "pad_latent_to_max": True,
        }
        schedule = build_schedule("coconut", options)
        schedule.bind(1)  # one step per epoch: step s is stage s
        examples, method = our_prepared(files[rows], tokenizer, schedule)
        lm = small_gpt2(len(tokenizer))
        train_briefly(lm, method, examples, max_stage + 1, steps)
        markers = method.renderer.tokens
        eos = method.renderer.eos
        theirs_model = coconut_module.Coconut(tuple_cache_lm(lm), markers.latent, markers.start, markers.end, eos)
        with one_process_map():
            base = dataset_module.get_dataset(str(files[rows]), tokenizer)
        for stage in (1, max_stage + 1):
            configs = SimpleNamespace(max_latent_stage=max_stage, pad_latent_to_max=True, c_thought=c)
            with one_process_map():
                prompts = dataset_module.get_question_latent_dataset(
                    stage, base, configs, markers.start, markers.latent, markers.end
                )
            mine = ours(lm, tokenizer, files[rows], schedule.layout_at(stage), max_new_tokens)
            same_ids = same_answers = 0
            for prompt, prediction in zip(prompts, mine):
                ids = torch.tensor([prompt["input_ids"]])
                with torch.no_grad():
                    out = theirs_model.generate(ids, torch.ones_like(ids), max_new_tokens=max_new_tokens)[0].tolist()
                text = tokenizer.decode(out, skip_special_tokens=True)
                their_answer = text.split("#")[-1].replace(",", "").strip()
                generated = prediction["generated_ids"]
                generated = generated[:-1] if generated and generated[-1] == tokenizer.eos_token_id else generated
                same_ids += out[len(prompt["input_ids"]) :] == generated
                same_answers += their_answer == prediction["generated_answer"]
            right = sum(prediction["answer_correct"] for prediction in mine)
            results.append(
                {
                    "setting": name,
                    "stage": stage,
                    "ids": same_ids,
                    "answers": same_answers,
                    "right": right,
                    "n": len(mine),
                }
            )
    return results


# -- CODI -----------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def cpu_for_cuda(module: Any):
    """Run ``module``'s code on the CPU in float32: ``"cuda"`` becomes the CPU in ``Tensor.to``, ``Module.to`` and its
    ``torch.tensor`` / ``torch.zeros``, and ``Module.to(torch.bfloat16)`` does nothing."""
    import torch

    tensor_to, module_to, their_torch = torch.Tensor.to, torch.nn.Module.to, module.torch

    def cpu(value: Any) -> Any:
        return "cpu" if isinstance(value, str) and value.startswith("cuda") else value

    def to_tensor(self, *args, **kwargs):
        return tensor_to(self, *[cpu(a) for a in args], **{k: cpu(v) for k, v in kwargs.items()})

    def to_module(self, *args, **kwargs):
        args = [cpu(a) for a in args if a is not torch.bfloat16]
        return module_to(self, *args, **kwargs) if args or kwargs else self

    class CpuTorch:
        def __getattr__(self, name: str) -> Any:
            return getattr(torch, name)

        @staticmethod
        def tensor(*args, device=None, **kwargs):
            return torch.tensor(*args, **kwargs)

        @staticmethod
        def zeros(*args, device=None, **kwargs):
            return torch.zeros(*args, **kwargs)

    torch.Tensor.to, torch.nn.Module.to, module.torch = to_tensor, to_module, CpuTorch()
    try:
        yield
    finally:
        torch.Tensor.to, torch.nn.Module.to, module.torch = tensor_to, module_to, their_torch


def their_codi_predictions(codi_repo: Path, folder: Path, rows: list[dict], remove_eos: bool) -> list[tuple]:
    """CODI's ``test.py`` ``evaluation()`` on ``rows``: per question, the text it decoded and its prediction."""
    import torch

    if str(codi_repo) not in sys.path:
        sys.path.insert(0, str(codi_repo))
    with contextlib.redirect_stdout(io.StringIO()):
        test = load_module(codi_repo / "test.py", "their_codi_test")
    model_module = sys.modules["src.model"]
    loader = model_module.AutoModelForCausalLM.from_pretrained

    class Float32Loader:  # CODI loads float16 (bfloat16 with --bf16): float32 for the comparison
        @staticmethod
        def from_pretrained(*args, **kwargs):
            kwargs["torch_dtype"] = torch.float32
            kwargs.pop("resume_download", None)
            return loader(*args, **kwargs)

    model_module.AutoModelForCausalLM = Float32Loader
    # Each question twice, in batches of 2: its greedy step squeezes a batch of 1 to nothing, and two copies need no
    # padding (which its later passes, without an attention mask, would attend to).
    twice = [{"question": r["question"], "answer": r["answer"]} for r in rows for _ in range(2)]
    test.load_dataset = lambda *args: {"test": twice}
    model_args = model_module.ModelArguments(model_name_or_path=str(folder), lora_init=True, ckpt_dir=str(folder))
    data_args = model_module.DataArguments(data_name="gsm8k", batch_size=2)
    training_args = model_module.TrainingArguments(
        output_dir=str(folder / "out"), report_to="none", use_lora=False, use_prj=True, prj_dim=64, greedy=True,
        num_latent=6, inf_latent_iterations=6, remove_eos=remove_eos,
    )  # fmt: skip
    test.data_args = data_args  # its extract_answer_number reads the global its __main__ sets
    printed = io.StringIO()
    with cpu_for_cuda(test), contextlib.redirect_stdout(printed):
        test.evaluation(model_args, data_args, training_args)
    blocks = re.findall(
        r"Question \d+ Starts\.\.\.\nQ: .*?\n(.*?)\nQuestion \d+ Ends\nPrediction=(\S+);", printed.getvalue(), re.S
    )
    return [(text, float(value)) for text, value in blocks[::2]]


def codi_generation(codi_repo: Path, work: Path, steps: int) -> list[dict]:
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from hf_icot.curriculum import build_schedule
    from hf_icot.curriculum.layout import END_LATENT_TOKEN, LATENT_TOKEN, START_LATENT_TOKEN

    codi_file = work / "gsm8k_aug" / "gsm8k_aug_train.json"
    results = []
    for remove_eos in (False, True):
        folder = work / f"gpt2-codi-{int(remove_eos)}"  # CODI picks modules by the model's name: it must say gpt2
        their_tokenizer = bpe_tokenizer(corpus([]), folder, markers=(LATENT_TOKEN,))
        vocabulary = len(their_tokenizer)
        small_gpt2(vocabulary).save_pretrained(folder)  # what CODI loads before resizing; its weights come below
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_special_tokens({"pad_token": "[PAD]"})
        tokenizer.add_tokens([START_LATENT_TOKEN, END_LATENT_TOKEN], special_tokens=True)
        assert tokenizer.convert_tokens_to_ids(["[PAD]", START_LATENT_TOKEN, END_LATENT_TOKEN]) == [
            vocabulary, vocabulary + 1, vocabulary + 2,
        ]  # fmt: skip
        options = {"latent_format": "codi", "remove_eos": remove_eos, "num_latent": 6, "use_prj": True, "prj_dim": 64}
        schedule = build_schedule("codi", options)
        examples, method = our_prepared(codi_file, tokenizer, schedule, options)
        lm = small_gpt2(len(tokenizer))
        method.attach_modules(lm, seed=0)
        train_briefly(lm, method, examples, 0, steps)
        state = {f"codi.{k}": v.detach().clone() for k, v in lm.state_dict().items() if "latent_projection" not in k}
        state.update({f"prj.{k}": v.detach().clone() for k, v in lm.latent_projection.state_dict().items()})
        # The checkpoint test.py loads into the model it resizes from the base saved above.
        save_file(state, str(folder / "model.safetensors"))
        theirs = their_codi_predictions(codi_repo, folder, CODI_ROWS, remove_eos)
        mine = ours(lm, tokenizer, codi_file, schedule.layout, 256)  # test.py generates at most 256 tokens
        same_text = same_answers = 0
        for (text, value), prediction in zip(theirs, mine):
            same_text += text == tokenizer.decode(prediction["generated_ids"], skip_special_tokens=True)
            try:
                our_value = float(prediction["generated_answer"].replace(",", ""))
            except ValueError:
                our_value = float("inf")
            same_answers += our_value == value
        name = f"CODI GSM8K-Aug, remove_eos {str(remove_eos).lower()}"
        right = sum(prediction["answer_correct"] for prediction in mine)
        results.append({"setting": name, "ids": same_text, "answers": same_answers, "right": right, "n": len(mine)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coconut", type=Path, required=True, help="a checkout of facebookresearch/coconut")
    parser.add_argument("--codi", type=Path, required=True, help="a checkout of zhenyi4/codi")
    parser.add_argument("--prosqa-rows", type=int, default=16, help="first rows of Coconut's prosqa_valid.json")
    parser.add_argument("--train-steps", type=int, default=60, help="AdamW steps before generating")
    args = parser.parse_args()
    for flag, path, needed in (("--coconut", args.coconut, "coconut.py"), ("--codi", args.codi, "test.py")):
        if not (path / needed).is_file():
            sys.exit(f"error: {flag} {str(path)!r} has no {needed}; give a checkout of the repository.")
    import torch

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp())
    prosqa = json.loads((args.coconut / "data" / "prosqa_valid.json").read_text())[: args.prosqa_rows]
    files = {"prosqa": work / "prosqa" / "prosqa_valid.json", "gsm": work / "gsm" / "gsm_valid.json"}
    for name, rows in (("prosqa", prosqa), ("gsm", GSM_ROWS)):
        files[name].parent.mkdir()
        files[name].write_text(json.dumps(rows))
    (work / "gsm8k_aug").mkdir()
    (work / "gsm8k_aug" / "gsm8k_aug_train.json").write_text(json.dumps(CODI_ROWS))
    print("| Coconut setting | stage | continuations equal | answers equal | answers right |\n|---|---|---|---|---|")
    for result in coconut_generation(args.coconut, files, args.train_steps):
        n = result["n"]
        counts = f"{result['ids']}/{n} | {result['answers']}/{n} | {result['right']}/{n}"
        print(f"| {result['setting']} | {result['stage']} | {counts} |")
    print("\n| CODI setting | continuations equal | answers equal | answers right |\n|---|---|---|---|")
    for result in codi_generation(args.codi, work, args.train_steps):
        n = result["n"]
        print(f"| {result['setting']} | {result['ids']}/{n} | {result['answers']}/{n} | {result['right']}/{n} |")


if __name__ == "__main__":
    main()
