"""The study harness: sweeps of seeded runs that survive sessions, aggregation over seeds, and the claims ledger.

* :mod:`~hf_icot.studies.sweep` — a study's sweep file (``results/<study>/runs.yaml``: name → command, arguments,
  seeds) and where each run stands;
* :mod:`~hf_icot.studies.runner` — runs what is missing, N at a time, recording (and committing) each run as it lands;
* :mod:`~hf_icot.studies.statistics` — mean, spread and 95% interval per sweep point;
* :mod:`~hf_icot.studies.claims` — ``results/<study>/claims.csv`` and ``results/CLAIMS.md``;
* :mod:`~hf_icot.studies.rules` — each ledger row's rule as code (``results/<study>/rules.py``), registered only when
  made-up figures reach each of its branches; equivalence tests for claims of no effect; the knife-edge flag;
* :mod:`~hf_icot.studies.report` — the results kit every ``make_results.py`` shares (records, tables, plots, the τ
  crossing of a logged curve);
* :mod:`~hf_icot.studies.league` — a league of ``<task>_<curriculum>_s<seed>`` runs: its table and curves.

``python -m hf_icot.studies --help`` is the command line. Nothing here imports torch.
"""
