#!/usr/bin/env bash
# bash results/semiautomata/run_all.sh — every run of results/semiautomata/ (CPU scale, seed 0), then the tables, plots
# and README. A run whose folder already holds eval_results.json is kept (the script resumes). Run from the repository
# root; about 40 minutes on 2 shared CPU cores.
set -euo pipefail
# One thread per run: on a 2-core machine shared with other jobs, two torch threads waiting on each other made a step
# up to 50x slower whenever another process took a core; one thread loses little on models this small.
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
OUT=outputs/semiautomata
CONFIG=recipes/configs/semiautomata_cpu.yaml
SEED=0
mkdir -p "$OUT"

run() {  # run NAME ARGS...: one recipe run into $OUT/NAME, its log and wall time beside it
  local name=$1; shift
  if [[ -f $OUT/$name/eval_results.json ]]; then echo "kept $name"; return; fi
  local start=$SECONDS
  python recipes/semiautomata.py --config $CONFIG --seed $SEED --disable_tqdm true "$@" --output_dir "$OUT/$name" \
    --overwrite_output_dir > "$OUT/$name.log" 2>&1
  echo "{\"run\": \"$name\", \"wall_s\": $((SECONDS - start))}" > "$OUT/$name/wall_time.json"
  echo "done $name in $((SECONDS - start)) s"
}

MIXTURE=(--schedule mixture --removal_unit step --length_hint true --eval_modes hint=0 hint=8 hint=16)
# C_7, T = 16, depth 4 (200 k parameters): the five regimes (claims 1, 2, 3, 4, 7)
run c7_t16_d4_full_cot_s$SEED --schedule full_cot
run c7_t16_d4_no_cot_s$SEED --schedule no_cot
run c7_t16_d4_left_s$SEED --removal_side left
run c7_t16_d4_right_s$SEED --removal_side right
run c7_t16_d4_mixture_s$SEED "${MIXTURE[@]}"
# prime C_7, C_11 vs composite C_6 = C_2 x C_3, C_10 = C_2 x C_5, left curriculum (claim 6)
run c6_t16_d4_left_s$SEED --task_args '{"modulus": 6}'
run c10_t16_d4_left_s$SEED --task_args '{"modulus": 10}'
run c11_t16_d4_left_s$SEED --task_args '{"modulus": 11}'
# deep and narrow at the same 200 k budget, left curriculum (claim 5)
run c7_t16_d16_left_s$SEED --scratch_model '{"depth": 16}'
# end to end at a longer T (claim 2: does it fail as T grows)
run c7_t24_d4_no_cot_s$SEED --schedule no_cot --task_args '{"length": 24}'
# The small records of every run (metrics, stages, probes, sizes, logs; no weights) are committed beside the results,
# so the tables and plots can be rebuilt without rerunning: make_results.py --runs results/semiautomata/runs
for folder in "$OUT"/*/; do
  name=$(basename "$folder"); mkdir -p "results/semiautomata/runs/$name"
  cp "$folder"/{eval_results,stage_metrics,stages,probes,model_size,schedule,splits,task_args,wall_time,training_log}.json \
    "results/semiautomata/runs/$name/"
done
python results/semiautomata/make_results.py --runs results/semiautomata/runs --out results/semiautomata
