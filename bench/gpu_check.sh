#!/usr/bin/env bash
# The GPU checks in one command, for a lent GPU machine (torch with CUDA; no snakemake, jsonschema,
# mnist1d or relplot needed), from the repository root:
#   OUT=/some/folder bash bench/gpu_check.sh
# (1) one short epoch of every distinct study recipe under compile: auto (bench.bench_study_recipes),
#     in 4 processes at once on the one GPU; (2) `python -m bench gpu --quick`. Results under $OUT.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/machine.txt" 2>&1
SHARDS=4
for k in $(seq 0 $((SHARDS - 1))); do
    timeout "${RECIPES_TIMEOUT:-300}" python3 -m bench.bench_study_recipes --device cuda --batches 5 --batch 64 \
        --shard "$k/$SHARDS" --out "/tmp/study_recipes_$k.json" > "/tmp/study_recipes_$k.txt" 2>&1 &
done
wait
cat /tmp/study_recipes_*.txt > "$OUT/study_recipes.txt"
python3 -c "import json, glob; print(json.dumps([json.load(open(f)) for f in sorted(glob.glob('/tmp/study_recipes_*.json'))]))" \
    > "$OUT/study_recipes.json"
grep -E "^(FAIL|study)|passed$" "$OUT/study_recipes.txt" | head -60
grep -h "^PASS" "$OUT/study_recipes.txt" | grep -v " cudagraphs " | head -40
timeout "${BENCH_TIMEOUT:-200}" python3 -m bench gpu --quick > "$OUT/bench_gpu_quick.txt" 2>&1
cp bench/gpu_results.json "$OUT/" 2>/dev/null
tail -40 "$OUT/bench_gpu_quick.txt"
cat "$OUT/machine.txt"
