"""``python -m hf_icot.studies``: run a study's sweep, print its commands, show where it stands, write the ledger.

    python -m hf_icot.studies run results/semiautomata --jobs 2 --threads 1 --commit
    python -m hf_icot.studies commands results/semiautomata      # one shell line per run still to do
    python -m hf_icot.studies slurm results/semiautomata --partition cpu --time 02:00:00   # a Slurm job array
    python -m hf_icot.studies status results/semiautomata
    python -m hf_icot.studies adopt results/semiautomata         # record runs kept before the harness existed
    python -m hf_icot.studies claims                             # results/CLAIMS.md and READMEs' verdict tables

Run it from the repository root: the sweep's commands and run folders are relative to it.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

from hf_icot.errors import PREEMPTED_EXIT_STATUS
from hf_icot.studies.claims import INDEX_FILE, LedgerError
from hf_icot.studies.claims_index import write_claims_index
from hf_icot.studies.sweep import RECORD_FILE, SweepError, load_sweep

PROG = "python -m hf_icot.studies"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0], allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run what is missing of a sweep, recording each run as it lands")
    run.add_argument("study", help="the study's results folder, holding runs.yaml (e.g. results/semiautomata)")
    run.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    run.add_argument(
        "--threads", type=int, default=None, help="CPU threads per run (OMP_NUM_THREADS; default: as set)"
    )
    run.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help="only these runs: shell patterns matched against the names with their seed suffix (e.g. "
        "'counter7_*_s0', or 'claim_x_*' for every seed of claim_x)",
    )
    run.add_argument("--retry-failed", action="store_true", help="also run again the runs recorded as failed")
    run.add_argument("--commit", action="store_true", help="git-commit each run's record as it lands (its files only)")
    commands_parser = commands.add_parser("commands", help="print one shell line per run still to do")
    commands_parser.add_argument("study", help="the study's results folder, holding runs.yaml")
    commands_parser.add_argument("--all", action="store_true", help="every run, recorded ones too")
    slurm = commands.add_parser(
        "slurm", help="write a Slurm job-array script and a manifest of the runs still to do (sbatch the script)"
    )
    slurm.add_argument("study", help="the study's results folder, holding runs.yaml")
    slurm.add_argument("--partition", default=None, help="sbatch --partition (default: the cluster's)")
    slurm.add_argument("--time", default=None, help="sbatch --time per task, e.g. 02:00:00 (default: the cluster's)")
    slurm.add_argument(
        "--cpus-per-task", type=int, default=1, help="sbatch --cpus-per-task, also each run's threads (default 1)"
    )
    slurm.add_argument("--max-parallel", type=int, default=None, help="at most this many tasks at once (--array %%M)")
    slurm.add_argument("--retry-failed", action="store_true", help="also run the runs recorded as failed")
    slurm.add_argument(
        "--out", default=None, help="folder for job.sh, manifest.txt and logs/ (default: outputs/slurm/<study>)"
    )
    status = commands.add_parser("status", help="where each run of a sweep stands")
    status.add_argument("study", help="the study's results folder, holding runs.yaml")
    adopt = commands.add_parser(
        "adopt", help="record the runs whose records were kept before the harness (a record folder with no sweep.json)"
    )
    adopt.add_argument("study", help="the study's results folder, holding runs.yaml")
    claims = commands.add_parser(
        "claims", help=f"write results/{INDEX_FILE} and each study README's verdict table from every claims.csv"
    )
    claims.add_argument("--results", default="results", help="the folder of the studies (default: results)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "claims":
            print(f"wrote {write_claims_index(args.results)}")
            return 0
        sweep = load_sweep(args.study)
        sweep.check_records()  # records of another sweep definition are refused before anything runs
        if args.command == "run":
            from hf_icot.studies.runner import SweepRunner

            runner = SweepRunner(sweep, args.jobs, args.threads, commit=args.commit, retry_failed=args.retry_failed)
            outcomes = runner.run(sweep.select(args.only))
            failed = sorted(name for name, status in outcomes.items() if status == "failed")
            preempted = sorted(name for name, status in outcomes.items() if status == "preempted")
            if failed:
                print(f"failed: {', '.join(failed)} (see their {RECORD_FILE}); --retry-failed runs them again")
            if preempted:
                print(f"preempted: {', '.join(preempted)} (checkpoints kept); run the sweep again to resume them")
            return 1 if failed else PREEMPTED_EXIT_STATUS if preempted else 0
        if args.command == "commands":
            for run in sweep.runs:
                if args.all or run.state() not in ("recorded", "failed"):
                    print(run.shell_line())
            return 0
        if args.command == "slurm":
            from hf_icot.studies.slurm import write_slurm_job

            out = args.out or f"outputs/slurm/{sweep.study}"
            job = write_slurm_job(
                sweep, args.study, out, args.partition, args.time, args.cpus_per_task, args.max_parallel,
                args.retry_failed,
            )  # fmt: skip
            if job is None:
                print(f"{sweep.study}: every run is recorded; nothing to submit")
                return 0
            print(f"wrote {job.script} and {job.manifest} ({len(job.runs)} runs); submit with: sbatch {job.script}")
            return 0
        if args.command == "status":
            states = {run.name: run.state() for run in sweep.runs}
            for name, state in states.items():
                print(f"{state:9s} {name}")
            print(", ".join(f"{count} {state}" for state, count in Counter(states.values()).items()))
            return 0
        from hf_icot.studies.runner import adopt_records

        print(f"adopted {len(adopt_records(sweep))} record(s)")
        return 0
    except (SweepError, LedgerError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
