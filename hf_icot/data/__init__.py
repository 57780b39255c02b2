"""Data: loading task datasets, the text↔ids encoding rules, the collator, word-level tokenizers.

* :mod:`~hf_icot.data.loading` — published configs (a Hub repo or a folder) with part of their CoT removed
  (:func:`load_icot_dataset`), a run's splits, the reference's text files;
* :mod:`~hf_icot.data.encoding` — how an example becomes token ids and generated ids become text, the one contract
  training, generation and evaluation share;
* :mod:`~hf_icot.data.collator` — :class:`~hf_icot.data.collator.ICoTCollator`, batches rendered at the exact
  optimizer step (torch);
* :mod:`~hf_icot.data.tokenization` — word-level tokenizers built offline, GPT-2 tokenizers prepared for ICoT.

The loaders are importable from here (``from hf_icot.data import load_icot_dataset``, as published dataset cards
print it); importing this package does not load torch.
"""

from hf_icot.data.loading import (
    load_icot_dataset,
    load_run_data,
    read_evaluation_split,
    read_reference_file,
    run_splits,
    split_order,
    truncate_dataset,
)

__all__ = [
    "load_icot_dataset",
    "load_run_data",
    "read_evaluation_split",
    "read_reference_file",
    "run_splits",
    "split_order",
    "truncate_dataset",
]
