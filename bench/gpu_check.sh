#!/usr/bin/env bash
# The GPU check in one command, for a machine with a CUDA GPU (torch with CUDA and torchvision; no
# snakemake, jsonschema, mnist1d or relplot needed), from the repository root:
#   OUT=/some/folder bash bench/gpu_check.sh            # the full check: at most 8.5 minutes of bench on an H200
#   QUICK=1 OUT=/some/folder bash bench/gpu_check.sh    # --quick: about 4 minutes
#   BENCH_ARGS="--arch densenet121 --loops inductor_cudagraphs --runs '' --packing ''" OUT=... bash bench/gpu_check.sh
# It runs `python -m bench.bench_gpu --out "$OUT"`, in this order: one epoch of one study recipe per
# model under compile: auto (PASS/FAIL each; --recipes all: every one, about 75 s more); the run
# section (Trainer.fit of a planned ResNet-50 and ResNet-20 run, 2 epochs each, every epoch's
# training, evaluation, diagnostics, checkpoint and the rest); full epochs of each architecture
# against the authors' loop (their whole epoch too: training, three validation passes, the save),
# in cudagraphs, and ResNet-50 also in inductor_cudagraphs, with model FLOPs against the GPU's bf16
# peak; packed runs (1, 2, 4) of ResNet-50, ResNet-20, the MLP and the text CNN without and with
# CUDA MPS (started and stopped by the bench where it may run); last, inductor_cudagraphs for the
# other architectures. Its estimate from bench/gpu_results.json (and assumed set-up and compile
# costs) is 509 s up to those last loops (220 s more); its budget (510 s, --quick 240 s) skips what
# would go past it, those last loops first, so the whole check ends within about 9 minutes.
# Under $OUT: gpu_results.json and gpu_table.md (copy the JSON to bench/gpu_results.json, then
# `python -m bench.bench_gpu --render bench/gpu_results.json` writes the table into bench/README.md),
# bench_gpu.txt (everything printed, every recipe's line included) and machine.txt.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  grep -m1 "model name" /proc/cpuinfo; nproc; } > "$OUT/machine.txt" 2>&1
eval "timeout ${BENCH_TIMEOUT:-570} python3 -m bench.bench_gpu ${QUICK:+--quick} --out \"\$OUT\" ${BENCH_ARGS:-}" \
  > "$OUT/bench_gpu.txt" 2>&1
echo "bench_gpu exit $?" >> "$OUT/bench_gpu.txt"
grep -v "^PASS" "$OUT/bench_gpu.txt" | tail -80
cat "$OUT/machine.txt"
