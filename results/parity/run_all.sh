#!/usr/bin/env bash
# bash results/parity/run_all.sh — every run of results/parity/, one after the other, then the tables and plots.
# A run whose folder already holds eval_results.json is kept (the script resumes). Run from the repository root.
set -euo pipefail
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1
OUT=outputs/parity
mkdir -p "$OUT"

run() {  # run NAME ARGS...: one recipe run into $OUT/NAME, its log and wall time beside it
  local name=$1; shift
  if [[ -f $OUT/$name/eval_results.json ]]; then echo "kept $name"; return; fi
  local start=$SECONDS
  python recipes/parity.py "$@" --output_dir "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "{\"run\": \"$name\", \"wall_s\": $((SECONDS - start))}" > "$OUT/$name/wall_time.json"
  echo "done $name in $((SECONDS - start)) s"
}

A=recipes/configs/parity_log_icot.yaml
G=recipes/configs/parity_gpt2_log_icot.yaml
B=recipes/configs/parity_linear_attention.yaml
C=recipes/configs/parity_mlp_mixture.yaml
run a_log_icot --config $A
run a_stepwise --config $A --schedule stepwise --remove_per_epoch 4 --removal_unit token
run a_no_cot --config $A --schedule no_cot
run b_stepwise --config $B
run b_no_cot --config $B --schedule no_cot
run c_mixture --config $C
run c_no_cot --config $C --schedule no_cot --removal_unit token --length_hint false
run gpt2_log_icot --config $G
run gpt2_stepwise --config $G --schedule stepwise --remove_per_epoch 4 --removal_unit token
# A at a smaller size, where the same recipe has room to learn level 1 (8-sparse parity over 16 bits, L = 3)
run a_log_icot_n16_k8 --config $A --task_args '{"n_bits": 16, "k": 8, "train_size": 32000}' \
  --scratch_model '{"n_bits": 16, "k": 8, "num_layers": 3}' --stage_length 250 --max_steps 1000
python results/parity/make_results.py --runs "$OUT" --out results/parity
