"""The logic behind the Snakemake workflow, importable and testable without Snakemake.

* :mod:`~focalcal.pipeline.config` — validate a workflow config (JSON schema with defaults,
  then cross-references between its tables) and catch config files that define one key
  two ways, or give one key twice.
* :mod:`~focalcal.pipeline.entries` — check every table entry's parameters against the
  library (builds the losses and calibrators; imports torch, so the main process only).
* :mod:`~focalcal.pipeline.plan` — expand the studies into the deduplicated pool of runs,
  once at parse time, and refuse to reuse a run directory made with other settings.
* :mod:`~focalcal.pipeline.calibrate` — fit every calibrator of one run on its validation
  logits and measure it on the test logits.
* :mod:`~focalcal.pipeline.tables` — gather one study's metrics into a tidy table.

Parsing a config and planning runs import neither torch nor the training code, so a dry
run of thousands of jobs stays fast; only the entry check (once, in Snakemake's main
process), calibration and training pull torch in.
"""

from focalcal.pipeline.config import (
    ConfigError,
    check_config_files,
    check_configfile_conflicts,
    load_config_file,
    load_config_files,
    validate_config,
)
from focalcal.pipeline.entries import check_entries
from focalcal.pipeline.plan import Plan, Run, RunConflictError, build_plan, check_run_directories

__all__ = [
    "ConfigError",
    "Plan",
    "Run",
    "RunConflictError",
    "build_plan",
    "check_config_files",
    "check_configfile_conflicts",
    "check_entries",
    "check_run_directories",
    "load_config_file",
    "load_config_files",
    "validate_config",
]
