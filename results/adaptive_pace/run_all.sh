#!/usr/bin/env bash
# bash results/adaptive_pace/run_all.sh — every run of results/adaptive_pace/ (adaptive pace, fixed paces, end to
# end, on 3x3 multiplication and 8-sparse parity over 20 bits), then the table and plots. Run from the repository
# root. A run whose record is in results/adaptive_pace/runs/NAME/ is kept (the script resumes). ONLY=REGEX runs just
# the runs whose name matches and skips the analysis, so two shells can share the list (this is how the committed
# runs were made, one thread each: ONLY='^mult_(adaptive|fixed100|e2e)$' beside ONLY='^mult_fixed(175|250)$', then
# ONLY='_max' beside ONLY='^parity_(adaptive|fixed200|e2e)$', then ONLY='^parity_fixed(100|400)$' beside
# ONLY='_sequence').
set -euo pipefail
# One thread per run: two runs shared the 2 cores. Every figure is in steps and examples, never seconds.
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
OUT=outputs/adaptive_pace
RECORDS=results/adaptive_pace/runs
mkdir -p "$OUT" "$RECORDS"

run() {  # run NAME CONFIG [FLAGS...]: one recipe run into $OUT/NAME; its log, curves and scores into $RECORDS/NAME
  local name=$1 config=$2; shift 2
  if [[ -n ${ONLY:-} && ! $name =~ $ONLY ]]; then return; fi
  if [[ -f $RECORDS/$name/run.json ]]; then echo "kept $name"; return; fi
  local start=$SECONDS
  python recipes/icot_gpt2.py --config "$config" --disable_tqdm true "$@" --output_dir "$OUT/$name" \
    --overwrite_output_dir true > "$OUT/$name.log" 2>&1
  mkdir -p "$RECORDS/$name"
  cp "$OUT/$name/training_log.json" "$OUT/$name/eval_results.json" "$RECORDS/$name/"
  python - "$name" "$config" "$((SECONDS - start))" "$@" > "$RECORDS/$name/run.json" <<'PY'
import json, sys
name, config, wall, *flags = sys.argv[1:]
command = " ".join(["python recipes/icot_gpt2.py --config", config, *flags, f"--output_dir outputs/adaptive_pace/{name}"])
print(json.dumps({"run": name, "config": config, "flags": flags, "command": command, "wall_s": int(wall),
                  "threads": 1}, indent=2))
PY
  echo "done $name in $((SECONDS - start)) s"
}

MULT=recipes/configs/adaptive_pace_mult3x3.yaml    # 64,000 training questions = 1,000 steps per epoch
PARITY=recipes/configs/adaptive_pace_parity8.yaml  # 38,400 training questions = 600 steps per epoch
# Fixed paces: the reference's stepwise schedule, one epoch (mult) or two (parity) of full CoT, then one token every
# P steps (remove_per_epoch = steps per epoch / P), smoothing and optimizer resets as in the adaptive runs.
FIXED=(--schedule stepwise)

# 3x3 multiplication (24 CoT tokens), 8,000 steps at most (512,000 examples)
run mult_adaptive $MULT
run mult_fixed100 $MULT "${FIXED[@]}" --pretrain_epochs 1 --remove_per_epoch 10
run mult_fixed175 $MULT "${FIXED[@]}" --pretrain_epochs 1 --remove_per_epoch 5.714285714285714
run mult_fixed250 $MULT "${FIXED[@]}" --pretrain_epochs 1 --remove_per_epoch 4
run mult_e2e $MULT --schedule no_cot --max_steps 4000
# the adaptive rule with a tighter cap: a token that is not absorbed within 500 steps goes anyway
run mult_adaptive_max500 $MULT --max_steps_per_removal 500
# 8-sparse parity over 20 bits (7 CoT tokens), 5,000 steps at most (320,000 examples); end to end 3,000
run parity_adaptive $PARITY
run parity_fixed100 $PARITY "${FIXED[@]}" --pretrain_epochs 2 --remove_per_epoch 6
run parity_fixed200 $PARITY "${FIXED[@]}" --pretrain_epochs 2 --remove_per_epoch 3
run parity_fixed400 $PARITY "${FIXED[@]}" --pretrain_epochs 2 --remove_per_epoch 1.5
run parity_e2e $PARITY --schedule no_cot --max_steps 3000
# the rule reading the whole-sequence accuracy: the answer-token one is 1.0 while the last kept CoT token is the parity
run parity_adaptive_sequence $PARITY --adaptive_metric sequence

if [[ -z ${ONLY:-} ]]; then
  python results/adaptive_pace/make_results.py
fi
