"""Every study's committed records belong to its sweep file: a moved script or config that its ``runs.yaml`` does not
list under ``moved_from`` would make its recorded runs another definition (and the harness would refuse them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_icot.studies.sweep import RECORD_FILE, SWEEP_FILE, load_sweep

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted(path.parent for path in (REPO / "results").rglob(SWEEP_FILE))  # results/semiautomata/paper too


def test_the_studies_are_found() -> None:
    assert {study.name for study in STUDIES} >= {"parity", "marginals", "curricula", "adaptive_pace", "mult_cpu"}


@pytest.mark.parametrize("study", STUDIES, ids=lambda study: study.relative_to(REPO / "results").as_posix())
def test_every_record_is_a_run_of_the_sweep_under_its_definition(study: Path) -> None:
    sweep = load_sweep(study)
    sweep.check_records()  # raises on a record of another definition, or of no run of the file
    recorded = {run.name for run in sweep.runs if run.record() is not None}
    assert recorded == {path.parent.name for path in sweep.records_dir.glob(f"*/{RECORD_FILE}")}
    for run in sweep.runs:
        for part in run.argv:
            if part.endswith((".py", ".yaml")):
                assert (REPO / part).is_file(), f"{run.name} runs {part}, which does not exist"
