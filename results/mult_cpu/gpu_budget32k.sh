#!/usr/bin/env bash
# M1's budget32k runs on a borrowed GPU machine through the harness, inside a time budget, packing the records and
# run logs into OUT/records.tgz every 15 s (a run cut short by the budget leaves its log, with the steps it reached).
#
#   bash results/mult_cpu/gpu_budget32k.sh OUT SECONDS [PATTERN...]
#
# PATTERN: harness --only patterns (default: 'mult3x3_stepwise250_budget32k_s2').
#
# The runs take --use_cpu false (runs.yaml), so they train on the GPU there and on the CPU anywhere else. One run at a
# time: this 0.8 M-parameter model is bound by kernel launches, and runs sharing one GPU slow each other down.
set -u
out=${1:?give the folder the records are packed into}
budget=${2:?give the time budget in seconds}
shift 2
[ $# -gt 0 ] || set -- 'mult3x3_stepwise250_budget32k_s2'
study=results/mult_cpu
mkdir -p "$out"

pack() {
    # shellcheck disable=SC2046
    tar czf "$out/records.tmp" $(ls -d "$study"/runs/*budget32k* 2>/dev/null) \
        $(find outputs/mult_cpu -maxdepth 1 -name '*budget32k*.log' 2>/dev/null) 2>/dev/null
    mv -f "$out/records.tmp" "$out/records.tgz"
}

(while sleep 15; do pack; done) &
packer=$!
trap 'kill $packer 2>/dev/null; pack' EXIT
timeout -s TERM "$budget" python -m hf_icot.studies run "$study" --only "$@" --jobs 1 --threads 1
echo "gpu_budget32k: harness ended (exit $?) at $(date +%T)"
