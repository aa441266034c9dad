"""A translation run's jobs after training: temperature scaling on its tokens, beam-search decodes
of its test set at a grid of temperatures, and its metrics.

* :func:`calibrate_tokens` reads the run's ``token_logits.npz``
  (:mod:`focalcal.translation.token_profile`), fits each temperature-scaling calibrator on the
  validation tokens over the profile's temperature grid (by val ECE, 15 equal-width bins, or by
  val NLL) and measures test ECE, NLL and error before and after, per target token. It writes
  ``calibration.json`` (the fitted temperatures), ``token_metrics.csv`` and ``token_curve.csv``
  (val and test ECE and NLL at every decode temperature).
* :func:`decode_run` loads the finished run's model (:func:`finished_model`: its final weights,
  no trainer, the test split only) and beam-searches the test set with the softmax at one
  temperature (:func:`decode_grid`: at each temperature of the grid, the model loaded once); it writes the hypotheses (one sentence a line) and a JSON with the corpus BLEU,
  sacrebleu's signature, the beam settings and the sha256 of the checkpoint decoded. :func:`decode_calibrated` does
  the same at a calibrator's fitted temperature (BLEU after temperature scaling).
* :func:`translation_metrics` joins them: the run's ``metrics.csv`` (the rows every run's
  calibration has, plus ``bleu`` per calibrator, ``bleu_best_temperature`` and the decode grid's
  range), so the study
  table, the paper tables and the claims read a translation run as any other, and
  ``temperature_sweep.csv`` (token ECE, NLL and BLEU per decode temperature).

The decode grid is the config's ``decode_temperatures``. Torch-free at import: the Snakefile
plans with it at parse time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from focalcal import catalog
from focalcal.calibration.temperature import MUKHOTI_GRID_NAME
from focalcal.files.artefacts import atomic_write_json, atomic_write_text, read_csv, read_json
from focalcal.training.run_files import CHECKPOINT_SHA256

# Beam search as Vaswani et al. 2017 §6.1, the set-up mukhoti2020 §5.2 follows: beam size 4,
# length penalty alpha = 0.6 (Wu et al. 2016); each sentence at most its source length + 50
# tokens (focalcal.translation.beam_search.EXTRA_LENGTH).
BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
DECODE_BATCH_SENTENCES = 256  # sentences beam-searched together (memory and speed, not results)
# The calibrator roles a token profile supports; each fits a temperature on the profile's grid by
# its spec's objective (none: the model as trained, T = 1).
TOKEN_ROLES = ("raw", "ts_ece", "ts_nll")
# metrics.csv rows of a translation run: the lowest and highest temperature it was decoded at
DECODE_GRID_MIN, DECODE_GRID_MAX = "decode_grid_min", "decode_grid_max"
CURVE_COLUMNS = ("temperature", "bins", "val_ece", "val_nll", "test_ece", "test_nll")
SWEEP_COLUMNS = (*CURVE_COLUMNS, "bleu")


TOKEN_FIT = {"temperatures": MUKHOTI_GRID_NAME, "n_bins": 15, "binning": "width"}  # what fit_temperature does


def _same(value, fixed) -> bool:
    """Whether a spec's option states the token fit's own value (numbers compared as numbers)."""
    if isinstance(fixed, int) and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) == float(fixed)
    return value == fixed


def token_objective(key: str, resolved: dict) -> str | None:
    """The temperature objective of calibrator ``key`` (its resolved spec) on a token profile."""
    role = catalog.calibrator_role(resolved)
    if role not in TOKEN_ROLES:
        raise ValueError(f"calibrator {key!r} ({catalog.ROLE_LABELS.get(role, role)}) cannot be fitted on a "
                         f"translation run's token profile; use one of the roles {sorted(TOKEN_ROLES)}")
    # The token profile fits one set-up (token_profile.fit_temperature: mukhoti2020's grid, 15
    # equal-width bins); a spec may state it, but one asking for another is refused, not fitted as this one.
    build = resolved["build"]
    changed = [option for option, value in build.items() if option not in ("name", "objective")
               and (option not in TOKEN_FIT or not _same(value, TOKEN_FIT[option]))]
    if changed:
        raise ValueError(f"calibrator {key!r}: {', '.join(f'{o}={build[o]!r}' for o in changed)} cannot be fitted on "
                         f"a translation run's token profile, which fits its temperature with {TOKEN_FIT}")
    return catalog.ROLES[role].spec.get("objective")


def _bins_of(ece_bins) -> int:
    """The bin count of the curves: 15 (mukhoti2020's ECE) when the config reports it, else its first."""
    bins = [int(b) for b in ece_bins]
    if not bins:
        raise ValueError("ece_bins is empty: the token ECE needs a bin count")
    return 15 if 15 in bins else bins[0]


def _mean(values) -> float:
    import numpy as np

    return float(np.mean(values))


def calibrate_tokens(profile_path, calibrators: dict[str, dict], ece_bins, params_path, metrics_path, curve_path,
                     curve_temperatures) -> list[dict]:
    """Fit ``calibrators`` (key -> resolved spec) on the val tokens of ``profile_path``; write
    ``calibration.json``, the test metrics per calibrator and the val/test curves over
    ``curve_temperatures`` (the config's ``decode_temperatures``). Every value is per target token (top label, padding excluded)."""
    from focalcal.files import sidecar
    from focalcal.pipeline.calibrate import LOGITS_SHA256, rows_to_csv
    from focalcal.translation.token_profile import fit_temperature, read_token_profile

    profiles = read_token_profile(profile_path)
    val, test = profiles["val"], profiles["test"]
    params: dict[str, object] = {}
    rows: list[dict] = []
    error = 1.0 - _mean(test.correct)
    for key, spec in calibrators.items():
        objective = token_objective(key, spec)
        temperature = 1.0 if objective is None else float(fit_temperature(val, objective=objective))
        params[key] = {"spec": spec, "fitted": {"name": "temperature_scaling", "objective": objective,
                                                "temperature": temperature, "fitted_on": "val tokens"}}
        rows.append({"calibrator": key, "metric": "error", "bins": "", "value": error})
        rows.append({"calibrator": key, "metric": "nll", "bins": "", "value": _mean(test.nll(temperature))})
        rows += [{"calibrator": key, "metric": "ece", "bins": int(bins), "value": float(test.ece(temperature, n_bins=int(bins)))}
                 for bins in ece_bins]
        if objective is not None:
            rows.append({"calibrator": key, "metric": "temperature", "bins": "", "value": temperature})
    params[LOGITS_SHA256] = sidecar.digest_file(profile_path).sha256
    bins = _bins_of(ece_bins)
    curve = [{"temperature": float(t), "bins": bins, "val_ece": float(val.ece(t, n_bins=bins)),
              "val_nll": _mean(val.nll(t)), "test_ece": float(test.ece(t, n_bins=bins)), "test_nll": _mean(test.nll(t))}
             for t in curve_temperatures]
    atomic_write_text(json.dumps(params, indent=1, sort_keys=True) + "\n", params_path)
    atomic_write_text(rows_to_csv(rows), metrics_path)
    atomic_write_text(rows_to_csv(curve, header=CURVE_COLUMNS), curve_path)
    return rows


# ---------------------------------------------------------------------------- decoding


def decode_split(model, sources, references, detokenise, temperature: float, *, beam_size: int = BEAM_SIZE,
                 length_penalty: float = LENGTH_PENALTY, batch_sentences: int = DECODE_BATCH_SENTENCES):
    """Beam-search every source sentence (int id arrays, no BOS/EOS) at softmax temperature
    ``temperature``; return the detokenised hypotheses in input order and their corpus BLEU
    against ``references`` (:class:`focalcal.translation.bleu.BleuScore`).

    Sentences are batched by length (longest first) and fed as the trainer feeds them (ids + EOS)."""
    import numpy as np
    import torch

    from focalcal.data.translation import pad_batch
    from focalcal.translation.beam_search import beam_search
    from focalcal.translation.bleu import corpus_bleu

    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source sentences but {len(references)} references")
    order = np.argsort([-len(s) for s in sources], kind="stable")
    device = next(model.parameters()).device
    hypotheses: list[str | None] = [None] * len(sources)
    with torch.no_grad():
        for start in range(0, len(order), batch_sentences):
            chosen = order[start:start + batch_sentences]
            source = pad_batch([sources[i] for i in chosen], add_bos=False, add_eos=True).to(device)
            found = beam_search(model, source, beam_size=beam_size, length_penalty=length_penalty,
                                temperature=float(temperature))
            for index, ids in zip(chosen, found, strict=True):
                hypotheses[int(index)] = detokenise(ids)
    return hypotheses, corpus_bleu(hypotheses, list(references))


def beam_settings(beam_size: int = BEAM_SIZE, length_penalty: float = LENGTH_PENALTY) -> dict:
    from focalcal.translation.beam_search import EXTRA_LENGTH

    return {"beam_size": beam_size, "length_penalty": length_penalty,
            "max_length": f"source length + {EXTRA_LENGTH} (EOS included)"}


def write_decode(json_path, text_path, hypotheses: list[str], score, temperature: float, settings: dict,
                 **extra) -> dict:
    """The hypotheses (one a line, at ``text_path``) and the JSON of their BLEU."""
    if any("\n" in line for line in hypotheses):
        raise ValueError("a hypothesis holds a line break; one sentence a line is the hypotheses file's format")
    atomic_write_text("".join(line + "\n" for line in hypotheses), text_path)
    record = {"split": "test", "temperature": float(temperature), "bleu": float(score.score),
              "signature": str(score.signature), "sentences": len(hypotheses), "hypotheses": Path(text_path).name,
              **settings, **extra}
    atomic_write_json(record, json_path)
    return record


def finished_model(run_dir, data_root, threads: int = 1):
    """(model, corpus, sha256 of the checkpoint) of a finished run, for decoding its test set.

    The model is built from ``run_config.json`` and loaded with the checkpoint's final weights
    (:func:`~focalcal.training.checkpoint.final_weights`: those ``token_logits.npz`` was dumped
    from); no trainer is built, so no optimizer, no loss and no training split: the corpus
    loads a split on its first use, and a decode reads the test set and the vocabulary only."""
    import torch

    from focalcal.paths import RUN_CONFIG
    from focalcal.training import RunConfig
    from focalcal.training.checkpoint import final_weights, foreign_checkpoint, load_checkpoint
    from focalcal.training.device import choose_device
    from focalcal.training.factories import build_model, load_dataset
    from focalcal.training.run_files import RunPaths, checkpoint_sha256
    from focalcal.training.translation import check_token_ids

    torch.set_num_threads(max(1, int(threads)))
    paths = RunPaths(Path(run_dir))
    config = RunConfig.from_dict(read_json(paths.root / RUN_CONFIG))
    if not paths.checkpoint.exists():
        raise FileNotFoundError(f"no checkpoint at {paths.checkpoint}; train the run first")
    sha256 = checkpoint_sha256(paths.root)
    device = choose_device(config.device).device
    state = load_checkpoint(paths.checkpoint, device)
    foreign = foreign_checkpoint(state, config)
    if foreign:
        raise ValueError(f"{paths.checkpoint} {foreign}; it is not this run's checkpoint")
    if state.get("finished_at") is None:
        raise RuntimeError(f"{paths.checkpoint} holds an unfinished run ({state['epochs_done']} epochs); "
                           "finish training first")
    dataset = load_dataset(config, Path(data_root))
    model = build_model(config, dataset)
    model.load_state_dict(final_weights(state))
    model.to(device).eval()
    corpus = dataset.corpus
    check_token_ids(corpus, corpus.vocab_size, config.dataset["name"], ("test",), ("source",))  # the ids it embeds
    return model, corpus, sha256


def decode_run(run_dir, data_root, temperature: float, json_path, text_path, threads: int = 1) -> dict:
    """Decode the finished run's test set at ``temperature``; write its hypotheses and BLEU, with
    the sha256 of the checkpoint decoded (``focalcal verify`` names a decode of another one)."""
    return decode_grid(run_dir, data_root, [temperature], [json_path], [text_path], threads)[0]


def decode_grid(run_dir, data_root, temperatures, json_paths, text_paths, threads: int = 1) -> list[dict]:
    """:func:`decode_run` at each of ``temperatures`` in turn, the model and the test set loaded once.

    One process for a run's grid instead of one per temperature: on the CPU a decode's start-up
    (torch, the checkpoint, the corpus) is most of a small model's decode. Each temperature's
    beam search is the one :func:`decode_run` does alone, so its files are the same bytes."""
    temperatures = [float(t) for t in temperatures]
    if not (len(temperatures) == len(json_paths) == len(text_paths)):
        raise ValueError(f"{len(temperatures)} temperatures but {len(json_paths)} JSON and {len(text_paths)} "
                         "hypotheses paths; give one of each per temperature")
    model, corpus, sha256 = finished_model(run_dir, data_root, threads)
    records = []
    for temperature, json_path, text_path in zip(temperatures, json_paths, text_paths, strict=True):
        hypotheses, score = decode_split(model, corpus.test.source, corpus.test.references, corpus.detokenise,
                                         temperature)
        records.append(write_decode(json_path, text_path, hypotheses, score, temperature, beam_settings(),
                                    **{CHECKPOINT_SHA256: sha256}))
    return records


def fitted_temperature(calibration_path, calibrator: str) -> float:
    """The temperature ``calibrator`` fitted on the val tokens (``calibration.json``)."""
    params = read_json(calibration_path)
    if calibrator not in params:
        raise ValueError(f"{calibration_path} has no calibrator {calibrator!r}; it has "
                         f"{sorted(k for k in params if not k.startswith('_'))}")
    return float(params[calibrator]["fitted"]["temperature"])


def decode_calibrated(run_dir, data_root, calibration_path, calibrator: str, json_path, text_path,
                      threads: int = 1) -> dict:
    """Decode the test set at the temperature ``calibrator`` fitted on the val tokens."""
    temperature = fitted_temperature(calibration_path, calibrator)
    model, corpus, sha256 = finished_model(run_dir, data_root, threads)
    hypotheses, score = decode_split(model, corpus.test.source, corpus.test.references, corpus.detokenise, temperature)
    return write_decode(json_path, text_path, hypotheses, score, temperature, beam_settings(), calibrator=calibrator,
                        **{CHECKPOINT_SHA256: sha256})


# ------------------------------------------------------------------------- the metrics


def _bleu(path) -> float:
    record = read_json(path)
    if "bleu" not in record:
        raise ValueError(f"{path} has no BLEU; re-make the decode")
    return float(record["bleu"])


def translation_metrics(token_metrics_path, curve_path, decodes: dict, calibrated: dict, metrics_path,
                        sweep_path) -> None:
    """The run's ``metrics.csv`` and ``temperature_sweep.csv``.

    ``decodes``: decode temperature -> its JSON (the grid; it holds T = 1);
    ``calibrated``: calibrator key -> the JSON of its decode at its fitted temperature, or
    None for the uncalibrated model (its BLEU is the T = 1 decode's). Each calibrator gets a
    ``bleu`` row; every one also gets ``bleu_best_temperature``, the grid temperature of the
    highest test BLEU (the same for all: the model's, not the calibrator's), and the grid's
    lowest and highest temperature (:data:`DECODE_GRID_MIN`, :data:`DECODE_GRID_MAX`): a best
    temperature says nothing about temperatures outside them.
    """
    import pandas as pd

    from focalcal.pipeline.calibrate import rows_to_csv

    bleu = {round(float(t), 6): _bleu(path) for t, path in decodes.items()}
    if 1.0 not in bleu:
        raise ValueError(f"the decode grid {sorted(bleu)} lacks T = 1, the BLEU of the model as trained")
    metrics = read_csv(token_metrics_path, dtype={"calibrator": str, "metric": str})
    best = max(sorted(bleu), key=lambda t: bleu[t])  # the lowest temperature among ties
    rows = metrics.to_dict("records")
    for key in dict.fromkeys(metrics["calibrator"]):
        if key not in calibrated:
            raise ValueError(f"{token_metrics_path} has calibrator {key!r} but no decode for it was given")
        path = calibrated[key]
        rows.append({"calibrator": key, "metric": "bleu", "bins": "", "value": bleu[1.0] if path is None else _bleu(path)})
        rows.append({"calibrator": key, "metric": "bleu_best_temperature", "bins": "", "value": float(best)})
        rows.append({"calibrator": key, "metric": DECODE_GRID_MIN, "bins": "", "value": float(min(bleu))})
        rows.append({"calibrator": key, "metric": DECODE_GRID_MAX, "bins": "", "value": float(max(bleu))})
    for row in rows:
        bins = row["bins"]
        row["bins"] = "" if bins == "" or pd.isna(bins) else int(bins)
    curve = read_csv(curve_path)
    temperatures = [round(float(t), 6) for t in curve["temperature"]]
    missing = sorted(set(bleu) - set(temperatures))
    if missing:
        raise ValueError(f"{curve_path} has no token metrics at decode temperature(s) {missing}; re-make it")
    curve["bleu"] = [bleu.get(t, math.nan) for t in temperatures]
    curve = curve[[t in bleu for t in temperatures]]
    atomic_write_text(rows_to_csv(rows), metrics_path)
    atomic_write_text(rows_to_csv(curve.to_dict("records"), header=SWEEP_COLUMNS), sweep_path)


# ---------------------------------------------------------------------------- the plan


def calibrated_decodes(plan, run) -> dict[str, str | None]:
    """Calibrator key -> the JSON of the run's decode at its fitted temperature (None for the
    uncalibrated model, whose BLEU is the T = 1 decode's), for every calibrator the plan gives it."""
    from focalcal.paths import calibrated_decode

    return {key: None if token_objective(key, spec) is None else calibrated_decode(run.path, key)
            for key, spec in plan.calibrators[run.path].items()}


def grid_decodes(run_path: str, temperatures) -> dict[float, str]:
    """Decode temperature -> the JSON of the run's test decode at it, over ``temperatures`` (the
    config's ``decode_temperatures``)."""
    from focalcal.paths import translation_decode

    return {float(t): translation_decode(run_path, t) for t in temperatures}
