#!/usr/bin/env bash
# bash results/marginals/run_all.sh — every run of results/marginals/, one after the other, then the Hessian around τ
# of the base run, the tables and the plots. A run whose folder holds run.json is kept (the script resumes). Run from
# the repository root. ONLY=REGEX runs just the runs whose name matches (and skips the analysis), so two shells can
# share the list, e.g. ONLY='nb(100|400|800|1000)_' and ONLY='nb200_|k5_nb400|k20_nb100'.
set -euo pipefail
# One thread per run: these runs shared the 2 cores with the semiautomata sweep (one thread each); every figure is in
# steps, not seconds.
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
OUT=outputs/marginals
CONFIG=recipes/configs/marginals.yaml
mkdir -p "$OUT"

run() {  # run NAME DIRECTION K N_BASES SEED [FLAGS...]: one recipe run into $OUT/NAME, its log and wall time beside it
  local name=$1 direction=$2 k=$3 n_bases=$4 seed=$5; shift 5
  if [[ -n ${ONLY:-} && ! $name =~ $ONLY ]]; then return; fi
  if [[ -f $OUT/$name/run.json ]]; then echo "kept $name"; return; fi
  local start=$SECONDS
  python recipes/marginals.py --config $CONFIG --disable_tqdm true --seed "$seed" \
    --task_args "{\"direction\": \"$direction\", \"k\": $k, \"n_bases\": $n_bases, \"seed\": $seed}" "$@" --output_dir "$OUT/$name" \
    > "$OUT/$name.log" 2>&1
  echo "{\"run\": \"$name\", \"wall_s\": $((SECONDS - start))}" > "$OUT/$name/wall_time.json"
  echo "done $name in $((SECONDS - start)) s"
}

STOP=(--stop_after_tau 0.3)
# the base run: K = 10, n_b = 200 (D = 2,000), with a checkpoint every 50 steps for the Hessian around τ
run bz_k10_nb200_lr1e-3_bs128_s0 bz_to_a 10 200 0 "${STOP[@]}" --save_strategy steps --save_steps 50 --save_only_model true
# seeds (claims 1, 2)
run bz_k10_nb200_lr1e-3_bs128_s1 bz_to_a 10 200 1 "${STOP[@]}"
run bz_k10_nb200_lr1e-3_bs128_s2 bz_to_a 10 200 2 "${STOP[@]}"
# K at fixed D = 2,000, and K at fixed n_b = 200 (claim 2)
run bz_k5_nb400_lr1e-3_bs128_s0 bz_to_a 5 400 0 "${STOP[@]}"
run bz_k20_nb100_lr1e-3_bs128_s0 bz_to_a 20 100 0 "${STOP[@]}"
run bz_k5_nb200_lr1e-3_bs128_s0 bz_to_a 5 200 0 "${STOP[@]}"
run bz_k20_nb200_lr1e-3_bs128_s0 bz_to_a 20 200 0 "${STOP[@]}"
# gradient noise: learning rate and batch size at the base task (claim 3)
run bz_k10_nb200_lr5e-4_bs128_s0 bz_to_a 10 200 0 "${STOP[@]}" --learning_rate 5e-4
run bz_k10_nb200_lr2e-3_bs128_s0 bz_to_a 10 200 0 "${STOP[@]}" --learning_rate 2e-3
run bz_k10_nb200_lr1e-3_bs64_s0 bz_to_a 10 200 0 "${STOP[@]}" --per_device_train_batch_size 64
run bz_k10_nb200_lr1e-3_bs256_s0 bz_to_a 10 200 0 "${STOP[@]}" --per_device_train_batch_size 256
# the reverse direction (A, z) -> B at the base task (claim 7); its K candidates coincide, so no candidate loss
run az_k10_nb200_lr1e-3_bs128_s0 az_to_b 10 200 0 --max_steps 3000 --measurements z_shuffle_gap selector_attention
# what kept today's builder + GPT-2 defaults at the unconditional plateau (issue item 1): one study setting changed
# at a time at the base task, then all three together
GPT2_INIT='{"initializer_range": 0.02, "tie_word_embeddings": true}'
DROPOUT='{"resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}'
TODAY='{"initializer_range": 0.02, "tie_word_embeddings": true, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}'
run setup_gpt2_init_nb200_s0 bz_to_a 10 200 0 "${STOP[@]}" --max_steps 3000 --scratch_model "$GPT2_INIT"
run setup_dropout_nb200_s0 bz_to_a 10 200 0 "${STOP[@]}" --max_steps 3000 --scratch_model "$DROPOUT"
run setup_free_first_chars_nb200_s0 bz_to_a 10 200 0 "${STOP[@]}" --max_steps 3000 --task_args \
  '{"k": 10, "n_bases": 200, "seed": 0, "distinct_first_chars": false}'
run setup_all_three_nb200_s0 bz_to_a 10 200 0 "${STOP[@]}" --max_steps 3000 --scratch_model "$TODAY" --task_args \
  '{"k": 10, "n_bases": 200, "seed": 0, "distinct_first_chars": false}'
# D at K = 10 (claim 2), up to the study's D = 10,000 (claim 1's plateau)
run bz_k10_nb100_lr1e-3_bs128_s0 bz_to_a 10 100 0 "${STOP[@]}"
run bz_k10_nb400_lr1e-3_bs128_s0 bz_to_a 10 400 0 "${STOP[@]}"
run bz_k10_nb800_lr1e-3_bs128_s0 bz_to_a 10 800 0 "${STOP[@]}" --diagnostics_interval 100 --max_steps 12000
# the study's own size, trained to 2τ so that the drop after τ is seen to its end (τ itself does not depend on where a
# run stops: training is deterministic)
run bz_k10_nb1000_lr1e-3_bs128_s0 bz_to_a 10 1000 0 --stop_after_tau 1.0 --diagnostics_interval 100 --max_steps 12000

if [[ -n ${ONLY:-} ]]; then exit 0; fi
python results/marginals/hessian_around_tau.py --run "$OUT/bz_k10_nb200_lr1e-3_bs128_s0"
# the small records of every run (no weights) beside the results, so the tables and plots rebuild without training
for folder in "$OUT"/*/; do
  name=$(basename "$folder"); mkdir -p "results/marginals/runs/$name"
  for file in run.json diagnostics.csv group_accuracy.csv ablation.json log_history.json hessian.csv wall_time.json; do
    if [[ -f $folder$file ]]; then cp "$folder$file" "results/marginals/runs/$name/"; fi
  done
done
python results/marginals/make_results.py --runs results/marginals/runs --out results/marginals
