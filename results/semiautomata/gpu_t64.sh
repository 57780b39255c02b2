#!/usr/bin/env bash
# The claims at T = 64 (runs.yaml's T = 64 block: A6-counter64, A5-counter64, A3-counter64) on one GPU machine, many
# runs at once through the harness, inside a fixed time budget; every record that lands is packed into
# OUT/records.tgz as it lands, so a run cut short by the budget loses only the runs still in flight.
#
#   bash results/semiautomata/gpu_t64.sh OUT [SECONDS]      # e.g. bash results/semiautomata/gpu_t64.sh /tmp/t64 3600
#
# Phase 1: A6's 12 runs, A5's learning-rate screen on seed 0 (6 runs) and A3's depth-4 seeds 1-2 (2 runs).
# Phase 2: seeds 1-2 of each shape's chosen rate (A5-counter's rule: the best seed-0 implicit ID on test, the first
# rate of the grid on a tie), written into runs.yaml first (OUT/runs.yaml: the copy to commit beside the records).
# JOBS runs at once (default 16, one CPU thread each); STUDY is the study folder (default results/semiautomata).
set -u
out=${1:?give the folder the records are packed into}
budget=${2:-3600}
study=${STUDY:-results/semiautomata}
jobs=${JOBS:-16}
deadline=$(($(date +%s) + budget))
mkdir -p "$out"

pack() {  # every T = 64 record and run log so far, in one file (the device returns few files)
    local logs
    logs=$(find outputs -maxdepth 2 -name '*_t64_*.log' 2>/dev/null)
    # shellcheck disable=SC2086
    tar czf "$out/records.tmp" $(ls -d "$study"/runs/*_t64_* 2>/dev/null) $logs 2>/dev/null
    mv -f "$out/records.tmp" "$out/records.tgz"
    cp "$study/runs.yaml" "$out/runs.yaml"
}

phase() {  # phase NAME PATTERN...: the harness on PATTERN until the deadline
    local name=$1 left
    shift
    left=$((deadline - $(date +%s)))
    if [ "$left" -le 30 ]; then
        echo "gpu_t64: no time left for $name"
        return 1
    fi
    echo "gpu_t64: $name, $left s left"
    timeout -s TERM "$left" python -m hf_icot.studies run "$study" --only "$@" --jobs "$jobs" --threads 1
    echo "gpu_t64: $name ended (exit $?) at $(date +%T)"
}

(while sleep 20; do pack; done) &
packer=$!
trap 'kill $packer 2>/dev/null; pack' EXIT

phase "phase 1 (A6, A5's screen, A3)" 'claim_counter1[3457]_t64_left_s*' 'claim_counter7_t64_left_d*_s0' \
    'claim_counter7_t64_left_d4_lr1e-3_s[12]' || exit 0

chosen=$(python results/semiautomata/choose_t64_rates.py "$study")
[ -n "$chosen" ] || exit 0
# shellcheck disable=SC2086
phase "phase 2 (A5's chosen rates, seeds 1-2)" $chosen || exit 0
