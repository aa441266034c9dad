"""Where every artefact of the workflow lives, relative to the workflow directory (the one
holding ``results/``).

The rules name their outputs through these functions, and the readers (the report, the
re-make commands, ``focalcal verify``) find them the same way, so a file's place is written
once. Each function takes the run path or study key it files under, which may be a
Snakemake wildcard pattern: ``logits(RUN_PATTERN)`` is the export rule's output and
``logits(run.path)`` one run's file. Imports nothing, so the Snakefile, the rule scripts and
the torch-free planning modules all use it for free.
"""

from __future__ import annotations

import os
import re

DEFAULT_CONFIG = "config/config.yaml"  # the config a run without --configfile uses
RESULTS = "results"
RUNS = f"{RESULTS}/runs"  # one folder per training run: checkpoint, history, logits
CALIBRATION = f"{RESULTS}/calibration"  # per run: fitted calibrators and their test metrics
SEGMENTATION = f"{RESULTS}/segmentation"  # per segmentation run: test-fold scores, sample masks
TABLES = f"{RESULTS}/tables"  # one tidy table per study; paper tables in <study>/; the claims
FIGURES = f"{RESULTS}/figures"  # <study>/<name>.png, theory/<name>.png, claims/<page>.png
REPORT = f"{RESULTS}/report"  # the HTML report
LOGS = f"{RESULTS}/logs"  # one log per job: <rule>/<target>.log
BENCHMARKS = f"{RESULTS}/benchmarks"  # Snakemake's benchmark of a job: <rule>/<target>.tsv

# A run's path below RUNS, CALIBRATION and SEGMENTATION; the rules use it as their wildcard
# pattern, so a path and its wildcards are one fact.
RUN_PATTERN = "{dataset}/{model}/{loss}/{recipe}/seed{seed}"

# The files of a run directory.
RUN_CONFIG = "run_config.json"  # what determined the run, written first by the training job
CHECKPOINT = "checkpoint.pt"
HISTORY = "history.csv"
RELIABILITY = "train_reliability.csv"
GRADIENT_NORMS = "train_gradient_norms.csv"
LOGITS = "logits.npz"
# A translation run's per-token dump of val/test under teacher forcing (focalcal.translation.token_profile)
TOKEN_LOGITS = "token_logits.npz"
DECODE = "decode"  # a translation run's beam-search decodes of its test set, one pair of files per temperature
RUN_INFO = "run.json"
STAGED_EXPORT = "staged_export"  # what the training job wrote for the run's next job, before that job publishes it
# The files of a run's calibration and of a segmentation run's evaluation.
CALIBRATION_PARAMS = "calibration.json"
METRICS = "metrics.csv"
SAMPLES = "samples.npz"
# The files of a translation run's calibration: the token-level metrics and curves before BLEU
# joins them, and every temperature's token metrics with its BLEU (the merged sweep).
TOKEN_METRICS = "token_metrics.csv"
TOKEN_CURVE = "token_curve.csv"
TEMPERATURE_SWEEP = "temperature_sweep.csv"

THEORY = "theory"  # the figures folder of the theory figures, which need no runs
CLAIMS = "claims"
CLAIMS_TABLE = f"{TABLES}/{CLAIMS}.csv"  # one row per claim x study
CLAIMS_PAIRS = f"{TABLES}/{CLAIMS}_pairs.csv"  # every pair behind those verdicts
CLAIMS_FIGURES = f"{FIGURES}/{CLAIMS}"  # forest plots: <paper>.png per page, index.png for all
REPORT_INDEX = f"{REPORT}/index.html"
REPORT_MANIFEST = f"{REPORT}/manifest.json"  # the planned figures, tables and studies
INVENTORY = f"{REPORT}/runs.csv"  # one row per run: epochs, training time, device, health
REPORT_SCREENSHOT = f"{REPORT}/index.png"
BROWSER_CHECK = f"{REPORT}/browser_check.json"

READY = "ready"  # <data_root>/ready/<dataset>.json: the marker of a prepared data set

# The environment variable naming the checkout (the folder of pyproject.toml) that the conda
# envs of workflow/envs/ install focalcal from; the workflow sets it to its own.
CHECKOUT_ENV = "FOCALCAL_CHECKOUT"
# Where Snakemake looks for a workflow directory's own Snakefile, in its order.
SNAKEFILE_CHOICES = ("Snakefile", "snakefile", "workflow/Snakefile", "workflow/snakefile")


def run_dir(run: str = RUN_PATTERN) -> str:
    return f"{RUNS}/{run}"


def run_file(run: str, name: str) -> str:
    """A file of the run directory (``name``: one of the run file names above)."""
    return f"{run_dir(run)}/{name}"


def token_logits(run: str = RUN_PATTERN) -> str:
    """A translation run's ``token_logits.npz``: what its token-level calibration reads."""
    return run_file(run, TOKEN_LOGITS)


def translation_decode(run: str = RUN_PATTERN, temperature="{temperature}") -> str:
    """A translation run's test-set decode at softmax temperature ``temperature`` (BLEU and its
    sacrebleu signature, JSON); ``temperature`` a number, or a wildcard pattern as it is."""
    return f"{run_dir(run)}/{DECODE}/T{_temperature(temperature)}.json"


def translation_hypotheses(run: str = RUN_PATTERN, temperature="{temperature}") -> str:
    """The detokenised hypotheses of that decode, one line per test sentence, beside its JSON."""
    return f"{run_dir(run)}/{DECODE}/T{_temperature(temperature)}.txt"


def _temperature(temperature) -> str:
    """A temperature as its file names write it: two decimals (1 -> "1.00"); a string as it is."""
    return temperature if isinstance(temperature, str) else f"{float(temperature):.2f}"


def calibration_dir(run: str = RUN_PATTERN) -> str:
    return f"{CALIBRATION}/{run}"


def calibrated_decode(run: str = RUN_PATTERN, calibrator: str = "{calibrator}") -> str:
    """The test-set decode of a translation run at the temperature calibrator ``calibrator``
    fitted on its validation tokens (BLEU after temperature scaling)."""
    return f"{calibration_dir(run)}/{DECODE}/{calibrator}.json"


def calibrated_hypotheses(run: str = RUN_PATTERN, calibrator: str = "{calibrator}") -> str:
    """The detokenised hypotheses of that decode, one line per test sentence, beside its JSON."""
    return f"{calibration_dir(run)}/{DECODE}/{calibrator}.txt"


def evaluation_dir(run: str = RUN_PATTERN) -> str:
    """Where a segmentation run's evaluation (metrics, sample masks, run.json) goes."""
    return f"{SEGMENTATION}/{run}"


CHECKSUM = ".sha256"  # <file>.sha256 beside an artefact: its size and sha256 (focalcal.files.sidecar)


def checksum(path: str) -> str:
    """The checksum sidecar of ``path``: the rules declare it beside an update() output, so that
    Snakemake keeps and restores the pair together."""
    return path + CHECKSUM


def ready_marker(data_root: str, dataset: str = "{dataset}") -> str:
    return f"{data_root}/{READY}/{dataset}.json"


def data_root_from_marker(marker: str) -> str:
    """``<data_root>`` of a dataset's ready marker. Rules infer it from their own files rather
    than reading the config's data root, as Snakemake's lint asks: a hard-coded prefix breaks
    where jobs do not share the file system."""
    return os.path.dirname(os.path.dirname(marker))


def log(job: str, target: str) -> str:
    """The log of the job of rule (or rule family) ``job`` that makes ``target``."""
    return f"{LOGS}/{job}/{target}.log"


def benchmark(job: str, target: str) -> str:
    return f"{BENCHMARKS}/{job}/{target}.tsv"


def study_table(study: str = "{study}") -> str:
    """A study's tidy table: one row per run x calibrator x metric."""
    return f"{TABLES}/{study}.csv"


def paper_table(study: str = "{study}", name: str = "{name}") -> str:
    return f"{TABLES}/{study}/{name}.csv"


def figure(folder: str = "{study}", name: str = "{name}") -> str:
    """A figure: ``folder`` is its study, :data:`THEORY` or :data:`CLAIMS`."""
    return f"{FIGURES}/{folder}/{name}.png"


def report_page(notebook: str = "{notebook}") -> str:
    return f"{REPORT}/{notebook}.html"


def executed_notebook(notebook: str = "{notebook}") -> str:
    return f"{REPORT}/notebooks/{notebook}.ipynb"


def is_own_snakefile(snakefile, workdir) -> bool:
    """Whether a plain ``snakemake`` in ``workdir`` runs ``snakefile``: it is the first of
    :data:`SNAKEFILE_CHOICES` there that exists (or the first of them, when none does)."""
    snakefile = os.path.abspath(snakefile)
    for choice in SNAKEFILE_CHOICES:
        candidate = os.path.abspath(os.path.join(workdir, choice))
        if candidate == snakefile:
            return True
        if os.path.exists(candidate):
            return False
    return False


def one_of(names) -> str:
    """A wildcard constraint matching exactly ``names`` (nothing at all when there are none)."""
    names = sorted(set(names))
    return "|".join(re.escape(name) for name in names) if names else "(?!)"
