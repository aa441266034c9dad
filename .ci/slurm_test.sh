#!/usr/bin/env bash
# Run config/test.yaml through a real one-node SLURM cluster on localhost with
# --profile profiles/slurm, check that the jobs went through SLURM and that the outputs are
# right, and tear the cluster down again.
#
#   sudo CI=true .ci/slurm_test.sh            # or FOCALCAL_SLURM_TEST=1 .ci/slurm_test.sh as root
#
# Needs root (it installs Debian's slurm-wlm and munge through .ci/system_packages.sh, if
# missing, and starts munged, slurmctld and slurmd). Without accounting (no slurmdbd) the
# executor plugin must query job states with squeue (its default, sacct, hangs), and squeue forgets finished jobs after MinJobAge, so
# MinJobAge is 300 s here (>= 120 s needed). The plugin's job step drops SLURM_CONF from the
# environment, so the config goes to the default /etc/slurm/slurm.conf.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON_BIN="${PYTHON_BIN:-$ROOT/.venv/bin}"
WORK="${SLURM_TEST_WORKDIR:-$(mktemp -d /tmp/focalcal-slurm.XXXXXX)}"
mkdir -p "$WORK"
CONF=/etc/slurm/slurm.conf
STATE=/var/spool/focalcal-slurm
LOGS=/var/log/focalcal-slurm

if [[ "$(id -u)" != 0 ]]; then
    echo "slurm_test: must run as root (it installs and starts SLURM)" >&2
    exit 2
fi
if [[ "${CI:-}" != "true" && "${FOCALCAL_SLURM_TEST:-}" != "1" ]]; then
    echo "slurm_test: refusing to install SLURM on this machine; set CI=true or FOCALCAL_SLURM_TEST=1" >&2
    exit 2
fi
if [[ -e "$CONF" && ! -e "$CONF.focalcal" ]] && ! grep -q "focalcal-ci" "$CONF"; then
    echo "slurm_test: $CONF exists and is not ours; refusing to overwrite a real cluster's config" >&2
    exit 2
fi

t0=$(date +%s)
step() { echo "[slurm_test +$(( $(date +%s) - t0 ))s] $*"; }

# ---------------------------------------------------------------- install
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    step "installing slurm-wlm and munge"
    "$ROOT/.ci/system_packages.sh"
fi
step "$(slurmctld -V)"

# ---------------------------------------------------------------- cluster up
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))   # leave 1 GiB to the OS

stop_daemons() {
    for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
        [[ -f "$pidfile" ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    for _ in $(seq 10); do
        pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || pgrep -x munged >/dev/null || break
        sleep 1
    done
}
teardown() {
    step "tearing the cluster down"
    stop_daemons
    rm -f "$CONF" "$CONF.focalcal"
    rm -rf "$STATE"
}

# A run that was killed before its teardown leaves daemons and a saved state behind; the
# state would bring back its jobs, holding the node as allocated. Start from nothing.
stop_daemons
rm -rf "$STATE" "$LOGS"
trap teardown EXIT

mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d" "$LOGS" /run/munge
touch "$CONF.focalcal"
cat > "$CONF" <<EOF
# focalcal-ci: a one-node cluster on localhost for .ci/slurm_test.sh (removed afterwards)
ClusterName=focalcal-ci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=300
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

step "starting munged, slurmctld, slurmd ($CPUS CPUs, $MEM_MB MB)"
[[ -s /etc/munge/munge.key ]] || { mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null \
    || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; }
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged
slurmctld
slurmd
for _ in $(seq 60); do
    sinfo -h -o "%t" 2>/dev/null | grep -qx "idle" && break
    sleep 1
done
sinfo
sinfo -h -o "%t" | grep -qx "idle" || { echo "slurm_test: node did not come up" >&2; tail -n 20 "$LOGS"/*.log >&2; exit 1; }
step "cluster up"

# ---------------------------------------------------------------- the workflow through SLURM
step "running config/test.yaml with --profile profiles/slurm in $WORK"
cd "$WORK"
"$PYTHON_BIN/snakemake" -s "$ROOT/workflow/Snakefile" --directory "$WORK" \
    --profile "$ROOT/profiles/slurm" \
    --configfile "$ROOT/config/test.yaml" \
    --slurm-status-command squeue \
    --slurm-no-account \
    --slurm-init-seconds-before-status-checks 2 \
    --slurm-keep-successful-logs \
    --seconds-between-status-checks 2 \
    --latency-wait 10 \
    2>&1 | tee "$WORK/snakemake.log"
status=${PIPESTATUS[0]}
[[ "$status" == 0 ]] || { echo "slurm_test: snakemake failed ($status)" >&2; exit 1; }

# ---------------------------------------------------------------- checks
step "checking that the jobs went through SLURM and the outputs are right"
submitted=$(grep -c "with SLURM jobid" "$WORK/snakemake.log" || true)
slurm_logs=$(find "$WORK/.snakemake/slurm_logs" -name "*.log" | wc -l)
completed=$(grep -c "_job_complete: JobId=.* done" "$LOGS/slurmctld.log" || true)
echo "sbatch submissions: $submitted; SLURM job logs: $slurm_logs; jobs completed by slurmctld: $completed"
# At least 8 train + 4 export_logits + 4 calibrate + 4 evaluate_segmentation jobs (figures and
# notebooks go through SLURM too; prepare_data, tables and the index are local rules).
expected=20
[[ "$submitted" -ge $expected ]] || { echo "slurm_test: expected >= $expected SLURM submissions, saw $submitted" >&2; exit 1; }
[[ "$slurm_logs" -ge $expected ]] || { echo "slurm_test: expected >= $expected SLURM job logs, found $slurm_logs" >&2; exit 1; }
# One submission per run: its train, export_logits and calibrate (or evaluate_segmentation)
# jobs are the group "run" (workflow/rules/common.smk), so no training job goes alone.
runs=$(find "$WORK/results/runs" -name checkpoint.pt | wc -l)
groups=$(grep -c "slurm_logs/group_run_" "$WORK/snakemake.log" || true)
alone=$(grep -cE "slurm_logs/rule_(train|export_logits|calibrate|evaluate_segmentation)/" "$WORK/snakemake.log" || true)
echo "runs: $runs; group submissions: $groups; run jobs submitted alone: $alone"
[[ "$groups" -eq "$runs" && "$alone" -eq 0 ]] \
    || { echo "slurm_test: expected one group submission per run ($runs), saw $groups (and $alone alone)" >&2; exit 1; }
[[ "$completed" -ge $expected ]] || { echo "slurm_test: slurmctld completed $completed jobs, expected >= $expected" >&2; exit 1; }
"$PYTHON_BIN/python" - "$WORK" <<'EOF'
import sys
from pathlib import Path

import pandas as pd

work = Path(sys.argv[1])
posterior = pd.read_csv(work / "results/tables/test_posterior.csv")
digits = pd.read_csv(work / "results/tables/test_digits.csv")
assert len(posterior) == 70, len(posterior)  # 2 runs x (11 + 12 + 12) rows, as tests/test_workflow_e2e.py
assert len(digits) == 69, len(digits)        # 3 runs (one at lr 100, collapsed) x (11 + 12), as tests/test_workflow_e2e.py
assert set(digits.calibrator) == {"uncalibrated", "ts_nll"}
assert posterior[posterior.metric == "kl_posterior"].value.notna().all()
segmentation = pd.read_csv(work / "results/tables/test_segmentation.csv")
assert len(segmentation) == 4 * 14, len(segmentation)  # 4 runs x (5 IoU + 5 HD + missed, accuracy, ECE, NLL)
assert sorted(segmentation.fold.unique()) == [0, 1]
for run in work.glob("results/runs/*/*/*/*/seed*"):
    assert (run / "checkpoint.pt").exists(), run
    evaluated = work / "results/segmentation" / run.relative_to(work / "results/runs")
    assert (run / "logits.npz").exists() or (evaluated / "metrics.csv").exists(), run
assert (work / "results/report/index.html").exists()
print("outputs OK:", len(posterior) + len(digits) + len(segmentation), "table rows")
EOF
step "SLURM end-to-end test passed"
