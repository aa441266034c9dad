# What the rules share: the config's checks, the plan (runs, calibrators, studies), the
# report's plan (figures, tables, pages), where every file lives (focalcal.paths), the data
# root and the per-run resource functions. Included first by the Snakefile; the logic lives
# in focalcal.pipeline and focalcal.report.

from focalcal import paths
from focalcal.pipeline import (
    build_plan,
    check_config_files,
    check_entries,
    check_run_directories,
    validate_config,
)
from focalcal.files.remake import set_workflow
from focalcal.core.pinned_numerics import pin_workflow
from focalcal.pipeline.plan import SHARED_GPU_GROUP
from focalcal.pipeline.workflow_lock import hold_output_lock, may_write_outputs
from focalcal.paths import one_of
from focalcal.report.rules import study_artifact_names
from focalcal.report.targets import report_plan
from focalcal.training.lock import refuse_if_trained_elsewhere

check_config_files(workflow.overwrite_configfiles or workflow.configfiles)
# The re-make commands that error messages print name this Snakefile and these config files,
# so that they run as printed (jobs inherit the setting).
set_workflow(workflow.main_snakefile, workflow.overwrite_configfiles)
validate_config(config, os.path.join(workflow.basedir, "schemas/config.schema.yaml"))
# CPU numerics pinned to AVX2 kernels (training.numerics): set before torch is first imported
# here, so the fused kernels are built for that target and every job inherits the pins.
pin_workflow(config)
# Builds every loss and calibrator of the config (imports torch): in the main
# process only, not again in each job that re-parses this file (cluster jobs).
if workflow.is_main_process:
    check_entries(config)
PLAN = build_plan(config)
check_run_directories(PLAN)
# One workflow per results folder (focalcal.pipeline.workflow_lock): a run that may write
# results/ holds its lock from here to its end; a second one stops here, naming the holder. Taken
# once the config passed every check above, so that a refused config leaves no results/ behind.
if workflow.is_main_process and may_write_outputs(sys.argv[1:]):
    hold_output_lock(paths.RESULTS, os.path.dirname(workflow.basedir))

# The fused CPU loss kernels and focal TS's grid kernel are compiled once, before the first job (the Snakefile's
# onstart, or `make venv`), into a build every checkout shares; a job only loads it and
# never compiles.
os.environ.setdefault("FOCALCAL_KERNEL_BUILD", "never")
# The checkout the conda envs of workflow/envs/ install focalcal from (--use-conda)
os.environ[paths.CHECKOUT_ENV] = os.path.dirname(workflow.basedir)

DATA_ROOT = config["data_root"]


# On a cluster one run's train, export and calibrate (or segmentation evaluation) jobs are one
# group: one submission, one allocation, one queue wait; each stays its own rule and target.
# Ignored locally. profiles/slurm sets how many runs' groups share a submission; runs that
# share GPUs (training.runs_per_gpu = N > 1) are their own group, N of them per submission.
def RUN_GROUP(wildcards):
    return PLAN.run_group(PLAN.run(wildcards))


# N runs sharing GPUs per submission, unless --group-components names the group itself
if SHARED_GPU_GROUP not in workflow.group_settings.group_components:
    workflow.group_settings.group_components = (
        workflow.group_settings.group_components.set(
            SHARED_GPU_GROUP, config["training"]["runs_per_gpu"]
        )
    )
RUN = paths.RUN_PATTERN
# The model wildcard of the rules that train (or use a checkpoint) and of import_logits: a
# run's model key says which of the two makes its files.
TRAINED_MODELS = one_of(PLAN.model_keys(imported=False))
IMPORTED_MODELS = one_of(PLAN.model_keys(imported=True))
# The dataset wildcard of the export and calibration rules: a translation corpus's run dumps
# token_logits.npz (export_token_logits) and is calibrated on its tokens (translation.smk), any
# other trained run dumps logits.npz (export_logits) and is calibrated on it (calibrate.smk).
TRANSLATION_DATASETS = one_of({run.dataset for run in PLAN.translation_runs()})
LOGITS_DATASETS = one_of(
    {run.dataset for run in PLAN.runs.values() if not run.translation}
)
# A dataset's ready marker, the input of every job that reads the data set
DATA_READY = paths.ready_marker(DATA_ROOT)

# The report's plan: which figures, tables and pages the config supports (figures.smk,
# report.smk and rule all)
REPORT_PLAN = report_plan(PLAN)
FIGURE_STUDIES, FIGURE_NAMES = study_artifact_names(REPORT_PLAN, "figure")
TABLE_STUDIES, TABLE_NAMES = study_artifact_names(REPORT_PLAN, "table")


def kept(**outputs):
    """A rule's named outputs (a path or a list of paths each) as update() outputs, each with its
    checksum sidecar declared beside it as ``<name>_checksum``, after every output itself (so
    ``snakemake.output[0]`` stays the first file).

    Snakemake deletes a job's plain outputs before it runs and again when it fails: a re-make
    that fails (a damaged input, a crashed job) would cost a good output that no
    other command had touched. An update() output is kept while the job runs, and copied aside
    and put back if the job fails; its sidecar goes with it, so a put-back file never carries the
    checksum of the attempt that failed (every writer replaces the sidecar with its file). The
    rules whose outputs a user may re-make declare them through this, all but prepare_data (its
    marker's sidecar would become an output, and a marker written without one would then re-plan
    the data set, which plans nothing behind it, as data.smk says) and report_check (a failed
    check must leave no result, never the verdict on an earlier report)."""
    declared, checksums = {}, {}
    for name, value in outputs.items():
        declared[name] = update(value)
        checksums[f"{name}_checksum"] = update(
            [paths.checksum(str(path)) for path in value]
            if isinstance(value, list)
            else paths.checksum(str(value))
        )
    return {**declared, **checksums}


def run_resource(name):
    """The resource ``name`` (threads, mem_mb, runtime, gpu, gpu_slots, gres) of the run a job's wildcards
    name: training, logit export and segmentation evaluation load the run's model and data.
    """
    return lambda wildcards: PLAN.train_resources(PLAN.run(wildcards))[name]


def not_trained_elsewhere(wildcards):
    """No input: fails the DAG, when another process trains the run, before Snakemake starts a
    job that could only be refused (and, failing, would put the live run's outputs back as they
    were when it started: kept()). Dry runs and --touch write nothing and go on."""
    if not (workflow.dryrun or workflow.touch):
        refuse_if_trained_elsewhere(
            PLAN.run(wildcards).run_dir,
            "this Snakemake would delete its outputs to train it again",
        )
    return []
