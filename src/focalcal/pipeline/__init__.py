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
process), calibration and training pull torch in. The names below load on first use, so that
``focalcal calibrate`` (which needs :mod:`~focalcal.pipeline.calibrate` only, numpy) runs without
the workflow's packages (yaml, jsonschema) of the config and the plan.
"""

from importlib import import_module

_EXPORTS = {
    "ConfigError": "config", "check_config_files": "config", "check_configfile_conflicts": "config",
    "load_config_file": "config", "load_config_files": "config", "validate_config": "config",
    "check_entries": "entries",
    "Plan": "plan", "Run": "plan", "RunConflictError": "plan", "build_plan": "plan", "check_run_directories": "plan",
}

__all__ = ["ConfigError", "Plan", "Run", "RunConflictError", "build_plan", "check_config_files",
           "check_configfile_conflicts", "check_entries", "check_run_directories", "load_config_file",
           "load_config_files", "validate_config"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
