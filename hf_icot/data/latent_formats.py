"""The text formats of continuous-thought sequences (``latent_format`` of
:class:`hf_icot.curriculum.layout.SequenceLayout`): how a question, its CoT steps and its answer become token ids, what
stands between them and the latent markers, and how an answer is read back from generated ids. The collator prepares
a dataset's ids with it, the latent renderer (:mod:`hf_icot.methods.latent_batches`) lays training sequences out with
it and evaluation (:mod:`hf_icot.evaluation.prompts`) asks and reads with it, so training and generation agree. No
torch here.

In every format a student sequence is ::

    question · after_question · <|start-latent|> <|latent|>×n <|end-latent|> · after_end · kept steps · after_cot ·
    answer · <eos>

labelled from ``after_end`` on (never the question, the markers or the slots); a generation prompt stops after
``after_end``. CODI's teacher is ``question · after_question · CoT · after_question · answer · <eos>``, labelled after
the first ``after_question``.

* ``hf_icot`` — this toolkit's (:mod:`hf_icot.data.encoding`: each part tokenized after a space, without special
  tokens): ``question <eos> <|start-latent|> … <|end-latent|> [steps] <eos> #### answer <eos>``.
* ``coconut`` — the ids of Coconut's ``dataset.py`` (``get_dataset``, ``get_cot_latent_dataset``):
  ``tokenizer.encode(question + "\\n")`` with the tokenizer's special tokens (a BOS where it adds one), each step
  ``tokenizer.encode(step + "\\n")`` and ``tokenizer.encode("### " + answer)`` without, then ``<eos>``; nothing else
  between the parts and the markers. An answer is read as its ``run.py`` reads one: what follows the last ``#`` of the
  decoded text, commas removed, against the gold answer without commas.
* ``codi`` — the ids of CODI's ``train.py`` on GSM8K-Aug (its ``icot`` data): the question ``tokenizer(question)`` with
  special tokens, ``<eos>`` after it and after ``<|end-latent|>`` unless ``remove_eos``, then
  ``tokenizer("The answer is: " + answer)`` with a BOS the tokenizer adds taken off (CODI takes the first token off its
  CoTs and answers when the tokenizer starts them with one), and ``<eos>``; each part at most 256 tokens (its
  ``_tokenize_fn``). ``<|start-latent|>`` and ``<|end-latent|>`` take the places of its ``bot`` and ``eot``, ids it
  adds past the vocabulary; its latent thoughts are embeddings without a token, our ``<|latent|>`` slots. The student
  carries no CoT; the teacher's CoT is the kept steps joined by single spaces, tokenized as one text as CODI joins and
  tokenizes GSM8K-Aug's. CODI distils at the last token of ``The answer is:``, or at the token after it for models
  whose name says llama or qwen (their tokenizers write the space before a number as a token of its own; CODI adds one
  to the position by the model's name, which this reads from the tokenizer's ``name_or_path``). Its ``test.py`` asks a question stripped, with its double spaces made
  single (:meth:`LatentFormat.ask`); an answer is what follows the last ``The answer is:`` (``test.py`` scores the last
  number of the text). CODI decodes without its ``eot`` (its logits stop before the last
  vocabulary row), so latent generation never picks ``<|end-latent|>`` in this format
  (:attr:`LatentFormat.never_generated`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hf_icot.cot import ANSWER_PREFIX, tokenize_steps
from hf_icot.curriculum.layout import END_LATENT_TOKEN, LATENT_FORMATS, SequenceLayout, check_choice
from hf_icot.data.encoding import checked_ids, encode_text, eos_id, special_prefix, split_generation, token_id

COCONUT_ANSWER_PREFIX = "### "
CODI_ANSWER_MARKER = "The answer is:"
#: CODI's ``_tokenize_fn`` truncates each part (question, CoT, answer) to this many tokens.
CODI_MAX_PART_TOKENS = 256


class LatentFormat:
    """One latent format for one tokenizer (see the module docstring).

    Args:
        tokenizer: the model's tokenizer (with an eos token).
        name: a :data:`~hf_icot.curriculum.layout.LATENT_FORMATS` name.
        remove_eos: CODI's ``remove_eos`` (``codi`` only).

    Raises:
        ValueError: an unknown format, ``remove_eos`` outside ``codi``, or a tokenizer without an eos token.
    """

    def __init__(self, tokenizer: Any, name: str = "hf_icot", remove_eos: bool = False) -> None:
        check_choice("latent_format", name, LATENT_FORMATS)
        SequenceLayout(fill="drop", unit="step", latent=True, latent_format=name, remove_eos=remove_eos)  # checks
        self.tokenizer, self.name, self.remove_eos = tokenizer, name, remove_eos
        self.eos = eos_id(tokenizer)
        separator = () if name == "coconut" or remove_eos else (self.eos,)
        self.after_question = separator
        self.after_end = separator if name == "codi" else ()
        self.after_cot = separator if name == "hf_icot" else ()
        marker = {"hf_icot": ANSWER_PREFIX, "coconut": COCONUT_ANSWER_PREFIX.strip(), "codi": CODI_ANSWER_MARKER}[name]
        self.marker_ids = self.answer_ids([marker], with_prefix=False)[0]

    @classmethod
    def of(cls, tokenizer: Any, layout: SequenceLayout) -> LatentFormat:
        """The format of a latent ``layout``."""
        return cls(tokenizer, layout.latent_format, layout.remove_eos)

    @property
    def eos_to_write(self) -> int:
        """The ``<eos>`` a continuation of a prompt writes: the one closing its answer, and in ``hf_icot`` the one
        closing its CoT first."""
        return len(self.after_cot) + 1

    @property
    def never_generated(self) -> int | None:
        """A token greedy decoding never picks: ``<|end-latent|>`` in ``codi`` (its ``eot``); else None."""
        return token_id(self.tokenizer, END_LATENT_TOKEN) if self.name == "codi" else None

    # -- text to ids ---------------------------------------------------------------------------------------------

    def question_ids(self, questions: Sequence[str]) -> list[list[int]]:
        """Each question's ids as the format's sequences start."""
        if self.name == "hf_icot":
            return [encode_text(question, self.tokenizer) for question in questions]
        if self.name == "coconut":
            return self._encode([question + "\n" for question in questions], special=True)
        return self._codi_part(questions, keep_bos=True)

    def step_ids(self, steps: Sequence[str]) -> list[list[int]]:
        """Each CoT step's ids as a student sequence carries it (``codi``: each step alone by CODI's rule, counted but
        never laid out: its student has no CoT and its teacher tokenizes the joined CoT, :meth:`cot_ids`)."""
        if self.name == "hf_icot":
            return [self.tokenizer.convert_tokens_to_ids(tokens) for tokens in tokenize_steps(steps, self.tokenizer)]
        if self.name == "coconut":
            return self._encode([step + "\n" for step in steps], special=False)
        return self._codi_part(steps, keep_bos=False)

    def answer_ids(self, answers: Sequence[str], with_prefix: bool = True) -> list[list[int]]:
        """Each answer's ids with the format's marker before it (without the closing ``<eos>``)."""
        if self.name == "hf_icot":
            texts = [f"{ANSWER_PREFIX} {answer}" if with_prefix else answer for answer in answers]
            return [encode_text(text, self.tokenizer) for text in texts]
        if self.name == "coconut":
            texts = [COCONUT_ANSWER_PREFIX + answer if with_prefix else answer for answer in answers]
            return self._encode(texts, special=False)
        texts = [f"{CODI_ANSWER_MARKER} {answer}".replace("####", "") if with_prefix else answer for answer in answers]
        return self._codi_part(texts, keep_bos=False)

    def cot_ids(self, cots: Sequence[Sequence[str]], sentences: bool = False) -> list[list[int]]:
        """The ids of teacher CoTs, each given by its steps: the steps' ids end to end (``hf_icot``, ``coconut``), or
        in ``codi`` the steps joined and tokenized as one text as CODI does: by single spaces (its GSM8k-Aug branch),
        or with ``sentences`` by ``". "`` and closed by ``".\\n"`` (its GSM8k-Aug-NL branch; no steps: no text)."""
        if self.name != "codi":
            return [[token for ids in self.step_ids(steps) for token in ids] for steps in cots]
        if sentences:
            return self._codi_part([". ".join(steps) + ".\n" if steps else "" for steps in cots], keep_bos=False)
        return self._codi_part([" ".join(steps) for steps in cots], keep_bos=False)

    def _encode(self, texts: list[str], special: bool) -> list[list[int]]:
        return self.tokenizer(texts, add_special_tokens=special)["input_ids"] if texts else []

    def _codi_part(self, texts: Sequence[str], keep_bos: bool) -> list[list[int]]:
        if not texts:
            return []
        rows = self.tokenizer(list(texts), max_length=CODI_MAX_PART_TOKENS, truncation=True)["input_ids"]
        bos = special_prefix(self.tokenizer)
        if keep_bos or not bos:
            return rows
        return [row[len(bos) :] if row[: len(bos)] == bos else row for row in rows]

    @property
    def separators(self) -> int:
        """The tokens a full-CoT sequence (CODI's teacher) adds to its question, CoT and answer ids, markers aside."""
        return 2 * len(self.after_question) + 1 if self.name != "hf_icot" else 3

    def prepared_columns(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        """The columns :meth:`hf_icot.data.collator.ICoTCollator.prepare_dataset` adds, in this format: each part
        tokenized by its rules in one tokenizer call per part over the batch; ``cot_tokens`` each step's tokens
        space-joined, ``length`` a full-CoT sequence's tokens without the markers.

        Raises:
            ValueError: naming the example, a part the tokenizer cannot represent or a CoT token with whitespace.
        """
        tokenizer, unk = self.tokenizer, self.tokenizer.unk_token_id
        example_ids = batch["example_id"] if "example_id" in batch else indices
        questions, answers = self.question_ids(batch["question"]), self.answer_ids(batch["answer"])
        steps = self.step_ids([step for steps in batch["cot"] for step in steps])
        names = ("example_id", "question_ids", "answer_ids", "cot_tokens", "cot_ids", "n_cot_tokens", "n_cot_steps")
        out: dict[str, list] = {name: [] for name in (*names, "length")}
        at = 0
        for index, question, question_ids, texts, answer, answer_ids in zip(
            example_ids, batch["question"], questions, batch["cot"], batch["answer"], answers
        ):
            row_steps, at = steps[at : at + len(texts)], at + len(texts)
            tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in row_steps]
            try:
                for text, ids in ((question, question_ids), (answer, answer_ids), *zip(texts, row_steps)):
                    checked_ids(text, ids, tokenizer, unk)
                if any(len(token.split()) != 1 for step in tokens for token in step):
                    raise ValueError("the tokenizer makes a CoT token with whitespace; hf_icot needs tokens without.")
            except ValueError as error:
                raise ValueError(f"example {index} ({self.name} format): {error}") from None
            cot_ids = [token for ids in row_steps for token in ids]
            values = (index, question_ids, answer_ids, [" ".join(step) for step in tokens], cot_ids, len(cot_ids))
            for name, value in zip(names, (*values, len(texts))):
                out[name].append(value)
            out["length"].append(len(question_ids) + len(cot_ids) + len(answer_ids) + self.separators)
        return out

    # -- sequences -----------------------------------------------------------------------------------------------

    def prompt(self, question_ids: Sequence[int], n_latent: int, markers: Sequence[int]) -> list[int]:
        """A generation prompt: the question, its separator, ``n_latent`` slots between the ``(start, latent, end)``
        marker ids, and what follows ``<|end-latent|>``."""
        start, latent, end = markers
        return [*question_ids, *self.after_question, start, *[latent] * n_latent, end, *self.after_end]

    def ask(self, question: str, n_latent: int, markers: Sequence[int]) -> list[int]:
        """The generation prompt of a question's text with ``n_latent`` slots (:meth:`prompt`), the question tokenized
        as the method's own evaluation asks it: as in training, except in ``codi``, whose ``test.py`` strips the
        question and makes its double spaces single first."""
        if self.name == "codi":
            question = question.strip().replace("  ", " ")
        return self.prompt(self.question_ids([question])[0], n_latent, markers)

    def sequence(
        self,
        question_ids: Sequence[int],
        kept_cot_ids: Sequence[int],
        answer_ids: Sequence[int],
        n_latent: int,
        markers: Sequence[int],
    ) -> tuple[list[int], int, int]:
        """A student sequence: its ids, the index of its first labelled token and the index of the token CODI distils
        at (:meth:`answer_offset`)."""
        prompt = self.prompt(question_ids, n_latent, markers)
        answer_start = len(prompt) + len(kept_cot_ids) + len(self.after_cot)
        ids = [*prompt, *kept_cot_ids, *self.after_cot, *answer_ids, self.eos]
        return ids, len(prompt) - len(self.after_end), answer_start + self.answer_offset(answer_ids)

    def teacher(
        self, question_ids: Sequence[int], cot_ids: Sequence[int], answer_ids: Sequence[int]
    ) -> tuple[list[int], int, int]:
        """CODI's teacher sequence: its ids, the index of its first labelled token (after the question's separator)
        and the index of the token distilled at."""
        first = len(question_ids) + len(self.after_question)
        answer_start = first + len(cot_ids) + len(self.after_question)
        ids = [*question_ids, *self.after_question, *cot_ids, *self.after_question, *answer_ids, self.eos]
        return ids, first, answer_start + self.answer_offset(answer_ids)

    def answer_offset(self, answer_ids: Sequence[int]) -> int:
        """The index, in ``answer_ids``, of the token whose hidden state CODI distils: the marker's last token (in
        ``codi``, the token after it for a tokenizer named llama or qwen, as CODI moves on by the model's name).

        Raises:
            ValueError: ``codi`` answer ids that do not hold the marker's ids (CODI's search would stop there too).
        """
        if self.name != "codi":
            return len(self.marker_ids) - 1
        marker, ids = list(self.marker_ids), list(answer_ids)
        found = next((i for i in range(len(ids) - len(marker) + 1) if ids[i : i + len(marker)] == marker), None)
        if found is None:
            raise ValueError(
                f"the answer ids {ids} do not hold those of {CODI_ANSWER_MARKER!r} ({marker}); CODI finds its "
                "distillation position by them, so this tokenizer cannot train in its format."
            )
        # CODI moves one token on for models named llama or qwen (their tokenizers write the space before a number as
        # a token of its own); it reads the name it loads the model and tokenizer by, as this reads the tokenizer's.
        name = str(getattr(self.tokenizer, "name_or_path", "")).lower()
        return found + len(marker) - (0 if "llama" in name or "qwen" in name else 1)

    # -- reading generations -------------------------------------------------------------------------------------

    def read(self, generated: Sequence[int]) -> tuple[str, str]:
        """``(cot_text, answer_text)`` of a continuation of one of this format's prompts (up to the ``<eos>`` that
        closes its answer); the answer ``""`` when the model wrote no marker."""
        if self.name == "hf_icot":
            return split_generation(generated, self.tokenizer, "explicit")
        ids = list(generated)
        ids = ids[: ids.index(self.eos)] if self.eos in ids else ids
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if self.name == "coconut":
            before = text.split("#")[0]
            cot = " ".join(line.strip() for line in before.split("\n") if line.strip())
            return cot, (text.split("#")[-1].replace(",", "").strip() if "#" in text else "")
        if CODI_ANSWER_MARKER not in text:
            return " ".join(text.split()), ""
        before, _, answer = text.rpartition(CODI_ANSWER_MARKER)
        return " ".join(before.split()), answer.strip()

    def gold_answer(self, answer: str) -> str:
        """The answer a generation must match: ``answer`` (``coconut``: without commas, as its ``run.py``)."""
        if self.name == "coconut":
            return answer.replace(",", "").strip()
        if self.name == "codi":
            return answer.replace("####", "").strip()
        return answer
