#!/usr/bin/env bash
# The GPU check in one command, for a machine with a CUDA GPU (torch with CUDA and torchvision; no
# snakemake, jsonschema, mnist1d or relplot needed), from the repository root:
#   OUT=/some/folder bash bench/gpu_check.sh            # the full check: about 8 minutes on an H200
#   QUICK=1 OUT=/some/folder bash bench/gpu_check.sh    # --quick: about 3 minutes
# It runs `python -m bench.bench_gpu --out "$OUT"`: one epoch of every study recipe under compile: auto
# (PASS/FAIL each), full epochs of each architecture against the authors' loop, and packed runs
# without and with CUDA MPS (started and stopped by the bench where it may run). Under $OUT:
# gpu_results.json and gpu_table.md (copy the JSON to bench/gpu_results.json, then
# `python -m bench.bench_gpu --render bench/gpu_results.json` writes the table into bench/README.md),
# bench_gpu.txt (everything printed, every recipe's line included) and machine.txt.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  grep -m1 "model name" /proc/cpuinfo; nproc; } > "$OUT/machine.txt" 2>&1
timeout "${BENCH_TIMEOUT:-570}" python3 -m bench.bench_gpu ${QUICK:+--quick} --out "$OUT" > "$OUT/bench_gpu.txt" 2>&1
echo "bench_gpu exit $?" >> "$OUT/bench_gpu.txt"
grep -v "^PASS" "$OUT/bench_gpu.txt" | tail -60
cat "$OUT/machine.txt"
