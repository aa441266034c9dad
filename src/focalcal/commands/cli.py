"""Command line: `focalcal calibrate`, `focalcal train`, `focalcal export-logits`,
`focalcal plan`, `focalcal verify`, `focalcal build-kernels` (also `python -m focalcal`).

`build_parser` makes the parser that `main` runs and the docs' CLI reference is rendered from.
Help texts are plain text, so that `focalcal --help` reads as written in a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _read_config(path: str) -> dict:
    import yaml

    text = Path(path).read_text()
    return json.loads(text) if path.endswith(".json") else yaml.safe_load(text)


DESCRIPTION = (
    "focalcal: focal-loss calibration. Compare calibrators on your own logits (calibrate), train one run and dump "
    "its logits (train, export-logits), price a study before it runs (plan), check the workflow's results (verify), "
    "compile the CPU kernels (build-kernels). Also run as python -m focalcal."
)


def build_parser() -> argparse.ArgumentParser:
    """The `focalcal` command's parser, every subcommand and option; the docs' CLI reference is rendered from it.

    Returns:
        The parser `main` runs; its subcommands are the choices of its one subparsers action
        (`dest="command"`).

    Examples:
        >>> from focalcal.commands.cli import build_parser
        >>> args = build_parser().parse_args(["calibrate", "logits.npz", "--gamma", "3"])
        >>> args.command, args.logits, args.gamma, args.bins
        ('calibrate', 'logits.npz', 3.0, 15)
    """
    parser = argparse.ArgumentParser(prog="focalcal", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("train", "train (or resume) one run and dump its logits"),
        ("export-logits", "re-dump logits.npz from a finished run's checkpoint, without training"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--config", required=True, help="run config (YAML or JSON): dataset, model, loss, recipe, seed")
        sub.add_argument("--run-dir", required=True, help="run directory (checkpoint, history.csv, logits.npz, run.json)")
        sub.add_argument("--data-root", default="data", help="where datasets live or are generated (default: data)")
        sub.add_argument("--numerics", choices=("pinned", "native"), default="pinned",
                         help="pinned (default): AVX2 kernels and MKL's vendor-neutral path, bit-identical on every x86-64 machine; native: the "
                              "machine's widest kernels (focalcal.core.pinned_numerics)")
        sub.add_argument("--threads", type=int, default=1, help="CPU threads (pinned: part of the numerics; default 1)")
        if name == "train":
            sub.add_argument("--no-export", action="store_true", help="train only; do not write logits.npz")
            sub.add_argument("--progress", choices=("auto", "bar", "lines"), default="auto",
                             help="auto (default): a progress bar when stderr is a terminal, else lines; bar: a "
                                  "progress bar; lines: a line on stderr every 30 s (cluster logs)")
    kernels = commands.add_parser("build-kernels", help="compile the CPU kernels (fused losses, focal TS grid) once (shared by every checkout)")
    kernels.add_argument("--numerics", choices=("pinned", "native"), default="pinned",
                         help="build for the pinned AVX2 target (default, what workflow jobs load) or the machine's own")
    _add_calibrate_parser(commands)
    sub = commands.add_parser("plan", help="each study's training budget in GPU-hours, before it runs")
    sub.add_argument("configfile", nargs="+", help="workflow config (e.g. config/studies/mukhoti2020.yaml), and "
                     "any overlays after it, merged as snakemake --configfile merges them")
    sub.add_argument("--gpu-results", default="bench/gpu_results.json",
                     help="what python -m bench gpu measured (default: bench/gpu_results.json)")
    sub.add_argument("--gpu", help="the GPU the studies will run on (default: the one measured)")
    sub.add_argument("--schema", default="workflow/schemas/config.schema.yaml", help="the workflow's config schema")
    _add_verify_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one `focalcal` command; `argv` defaults to the process's arguments.

    Args:
        argv: the arguments after `focalcal` (e.g. `["verify", "."]`); `None` reads `sys.argv[1:]`.

    Returns:
        The exit status: 0 done; 1 when `verify` found damage or `build-kernels` built a kernel short;
        2 for a bad config, logits file, option or output folder, or a disk that cannot be written (said in one
        line on stderr).

    Examples:
        A workflow directory without results/ is refused in one line on stderr, with status 2:

        >>> from focalcal.commands.cli import main
        >>> main(["verify", "no-such-workflow-directory"])
        2
    """
    args = build_parser().parse_args(argv)
    if args.command == "plan":
        return _plan(args)
    if args.command == "build-kernels":
        from focalcal.core.pinned_numerics import pin

        pin(args.numerics, 1, reexec=True)  # the kernels are built for torch's CPU capability, which this pins
        return _build_kernels()
    if args.command == "verify":
        return _verify(args)
    if args.command == "calibrate":
        return _calibrate(args)

    from focalcal.core.pinned_numerics import pin

    pin(args.numerics, args.threads, reexec=True)  # numpy is loaded by now: restarts this command pinned
    import torch

    from focalcal.training import RunConfig, export_run_logits, train_run

    torch.set_num_threads(args.threads)

    try:
        config = RunConfig.from_dict(_read_config(args.config))
    except (ValueError, TypeError) as error:
        print(f"focalcal: invalid run config {args.config}: {error}", file=sys.stderr)
        return 2
    from focalcal.files.artefacts import write_error_line

    try:
        if args.command == "train":
            progress = {"auto": None, "bar": True, "lines": False}[args.progress]
            train_run(config, args.run_dir, data_root=args.data_root, progress=progress, export=not args.no_export)
        else:
            export_run_logits(config, args.run_dir, data_root=args.data_root)
    except OSError as error:  # a full disk, a read-only file system: the files already there are kept
        line = write_error_line(error)
        if line is None:
            raise
        print(f"focalcal {args.command}: {line}", file=sys.stderr)
        return 2
    return 0



def _plan(args) -> int:
    from focalcal.pipeline import ConfigError, build_plan, load_config_files, validate_config
    from focalcal.pipeline.budget import describe, load_gpu_results, study_budgets

    try:
        plan = build_plan(validate_config(load_config_files(args.configfile), args.schema))
        results = load_gpu_results(args.gpu_results)
    except (ConfigError, ValueError, OSError) as error:
        print(f"focalcal plan: {error}", file=sys.stderr)
        return 2
    print(describe(study_budgets(plan, results), results, args.gpu_results, args.gpu))
    return 0


def _add_calibrate_parser(commands) -> None:
    from focalcal.commands.calibrator_choice import (
        CALIBRATORS,
        COSTS,
        DEFAULT_CALIBRATORS,
        MAX_CLASSES_QUADRATIC,
        QUADRATIC_IN_K,
    )

    sub = commands.add_parser(
        "calibrate", help="fit and compare calibrators on a model's own val/test logits; write a report",
        description="Fit calibrators on the validation logits, measure them on the test logits with 95 % "
                    "bootstrap intervals, and write calibration.json, metrics.csv, reliability diagrams and "
                    "index.html. LOGITS: an .npz with val_logits, val_labels, test_logits, test_labels "
                    "(optional class_names), or a folder of <key>.npy files. Fitting costs, on N validation rows "
                    "of K classes: " + "; ".join(f"{key} {cost}" for key, cost in COSTS.items()) + ". By default "
                    f"{' and '.join(QUADRATIC_IN_K)} are skipped above K = {MAX_CLASSES_QUADRATIC}, with a line "
                    "saying so; naming them in --calibrators fits them anyway.")
    sub.add_argument("logits", metavar="LOGITS", help=".npz file or folder of .npy files")
    sub.add_argument("--calibrators", type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
                     help=f"comma-separated, from: {', '.join(CALIBRATORS)} (default: {', '.join(DEFAULT_CALIBRATORS)};"
                          " psi only with --gamma)")
    sub.add_argument("--gamma", type=float, help="the model's training focal-loss γ (enables psi)")
    sub.add_argument("--inputs", choices=("logits", "probabilities"), default="logits",
                     help="what the score arrays hold (default: logits); probabilities are checked and their log "
                          "is taken (a probability of exactly 0 is refused)")
    sub.add_argument("--out", default="calibration_report", help="output folder (default: calibration_report)")
    sub.add_argument("--bins", type=int, default=15, help="bins of the binned metrics (default: 15)")
    sub.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (default: 200)")
    sub.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples (default: 0)")
    sub.add_argument("--no-smooth", action="store_true", help="skip smECE and the smooth reliability curves")


def _calibrate(args) -> int:
    from focalcal.commands.calibrate_command import check_numeric_options
    from focalcal.files.artefacts import write_error_line

    try:
        check_numeric_options(args.bins, args.resamples, args.seed, prefix="--")  # before any work
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        return _compare(args)
    except OSError as error:  # a full disk, a read-only file system: the previous report is kept
        line = write_error_line(error)
        if line is None:
            raise
        print(f"focalcal calibrate: {line}", file=sys.stderr)
        return 2


def _compare(args) -> int:
    import contextlib

    from focalcal.commands.allocator import keep_freed_arrays
    from focalcal.commands.calibrate_command import compare_calibrators, output_folder
    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.logits_file import read_logits

    keep_freed_arrays()  # this process (and its forked second one) reuses its freed arrays
    with contextlib.ExitStack() as stack:
        try:
            resolve_calibrators(args.calibrators, args.gamma)  # bad names fail before the logits are read
            folder = stack.enter_context(output_folder(args.out))  # so does a bad or busy --out
            logits = read_logits(args.logits, inputs=args.inputs)
        except ValueError as error:
            print(f"focalcal calibrate: {error}", file=sys.stderr)
            return 2
        print(f"focalcal calibrate: {logits.source}: {len(logits.val_labels)} val and {len(logits.test_labels)} "
              f"test samples, {logits.num_classes} classes", flush=True)
        compare_calibrators(logits, folder, args.calibrators, args.gamma, n_bins=args.bins,
                            n_resamples=args.resamples, seed=args.seed, smooth=not args.no_smooth,
                            progress=lambda line: print(line, flush=True))
    return 0


def _add_verify_parser(commands) -> None:
    sub = commands.add_parser(
        "verify", help="check every artefact under results/ against its checksum sidecar, and that each run's "
                       "files belong together; list the damaged and mismatched ones",
        description="Hash every file under WORKDIR/results that has a <name>.sha256 sidecar and list each damaged "
                    "or missing one with the command that re-makes it. Then check that each run's files belong "
                    "together: its checkpoint's fingerprint is its run_config.json's, its run.json and logits.npz "
                    "were dumped from that checkpoint, its calibration was fitted on those logits; each file that "
                    "is not of its run is listed as mismatched, with its re-make command. Last, one 'repair:' "
                    "command re-makes every file listed and what depends on each, in dependency order. Exit status "
                    "1 when any is damaged or mismatched.")
    sub.add_argument("workdir", nargs="?", default=".", metavar="WORKDIR",
                     help="the workflow directory holding results/ (default: .)")
    sub.add_argument("--configfile", nargs="+", default=[], metavar="FILE",
                     help="the config file(s) the workflow ran with, named in the re-make commands")
    sub.add_argument("--snakefile", help="the workflow's Snakefile, when it is not the one snakemake finds in WORKDIR "
                     "(WORKDIR/workflow/Snakefile)")


def _verify(args) -> int:
    from focalcal.commands.verify import MISMATCHED, UNVERIFIED, remove_leftovers, verify_tree
    from focalcal.files.remake import repair_command, set_workflow

    set_workflow(args.snakefile, args.configfile)
    try:
        checked, damaged = verify_tree(args.workdir, progress=lambda line: print(line, flush=True))
    except FileNotFoundError as error:
        print(f"focalcal verify: {error}", file=sys.stderr)
        return 2
    for part in remove_leftovers(args.workdir):
        print(f"removed: {part}: a partial write that a killed process left")
    for damage in damaged:
        print(f"{damage.kind}: {damage.path}: {damage.problem}\n  re-make it: {damage.remake}")
    repair = repair_command(damage.path for damage in damaged)
    if repair is not None:
        print("To re-make every file above, and what depends on each, in dependency order, run this one command "
              f"(in place of the ones above):\nrepair: {repair}")
    mismatched = sum(damage.kind == MISMATCHED for damage in damaged)
    unverified = sum(damage.kind == UNVERIFIED for damage in damaged)
    print(f"focalcal verify: {checked} artefacts checked, {len(damaged) - mismatched - unverified} damaged"
          + (f", {unverified} without their checksum file" if unverified else "")
          + (f", {mismatched} not of their run" if mismatched else ""))
    return 1 if damaged else 0


def _build_kernels() -> int:
    import warnings

    from focalcal.calibration import _grid_kernel
    from focalcal.losses import _fused

    status = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        library = _fused.build()
    if library is None:
        reason = caught[-1].message if caught else "unknown"
        print(f"focalcal: no fused kernels; losses will use the eager PyTorch path ({reason})", file=sys.stderr)
        status = 1
    else:
        print(f"focalcal: fused CPU loss kernels ready: {library}")
    try:
        print(f"focalcal: focal temperature scaling's grid kernel ready: {_grid_kernel.build()}")
    except Exception as error:  # noqa: BLE001 — no C compiler, no libmvec: the grid runs on the torch path
        print(f"focalcal: no grid kernel; focal temperature scaling will use the PyTorch path ({error})",
              file=sys.stderr)
        status = 1
    return status

if __name__ == "__main__":
    sys.exit(main())
