"""The translation jobs: token-level temperature scaling against the full logits, and a decode's
BLEU against sacrebleu on its own output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from test_data_wmt14 import mirror  # noqa: F401  the fixture: WMT archives built in the real formats

from focalcal import metrics
from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES
from focalcal.files.artefacts import read_csv
from focalcal.files.sidecar import digest_file
from focalcal.pipeline.translation import calibrate_tokens
from focalcal.training import RunConfig
from focalcal.translation.token_profile import profile_from_logits, write_token_profile

VOCAB = 40
CURVE = (0.8, 1.0, 1.25, 2.5)  # decode temperatures: on the token grid, its 0.05 steps too
ROLES = {"uncalibrated": {"build": {"name": "identity"}},
         "ts_ece": {"build": {"name": "temperature_scaling", "objective": "ece", "temperatures": "mukhoti", "n_bins": 15}},
         "ts_nll": {"build": {"name": "temperature_scaling", "objective": "nll"}}}


def _split(generator, n_tokens: int, sharpness: float):
    """Overconfident logits (scaled by ``sharpness``) whose labels are right about 60 % of the time."""
    logits = torch.randn(n_tokens, VOCAB, generator=generator, dtype=torch.float64)
    labels = logits.argmax(1).clone()
    wrong = torch.rand(n_tokens, generator=generator) < 0.4
    labels[wrong] = torch.randint(0, VOCAB, (int(wrong.sum()),), generator=generator)
    return (logits * sharpness).float(), labels, torch.arange(n_tokens) // 7


@pytest.fixture(scope="module")
def splits():
    generator = torch.Generator().manual_seed(3)
    return {"val": _split(generator, 3000, 8.0), "test": _split(generator, 2500, 8.0)}


def _independent(logits, labels, temperature: float):
    """(ECE 15 bins, mean NLL) of the full softmax at ``temperature``, from the (N, V) logits."""
    log_p = torch.log_softmax(logits.double() / temperature, dim=1)
    nll = float(-log_p.gather(1, labels[:, None]).mean())
    return metrics.ece(log_p.exp().numpy(), labels.numpy(), n_bins=15), nll


def test_token_calibration_equals_the_full_logits(tmp_path, splits):
    profile = tmp_path / "token_logits.npz"
    write_token_profile(profile, *(profile_from_logits(*splits[s]) for s in ("val", "test")))
    out = {name: tmp_path / name for name in ("calibration.json", "metrics.csv", "curve.csv")}
    calibrate_tokens(profile, ROLES, [10, 15], out["calibration.json"], out["metrics.csv"], out["curve.csv"], CURVE)

    # T of each objective: the first minimiser over the paper's grid, scanned on the full val logits
    val_logits, val_labels, _ = splits["val"]
    scores = np.array([_independent(val_logits, val_labels, t) for t in MUKHOTI_TEMPERATURES])
    expected_t = {"ts_ece": MUKHOTI_TEMPERATURES[np.argmin(scores[:, 0])],
                  "ts_nll": MUKHOTI_TEMPERATURES[np.argmin(scores[:, 1])], "uncalibrated": 1.0}
    assert expected_t["ts_ece"] > 1.5  # the fixture is overconfident: TS has work to do
    fitted = json.loads(out["calibration.json"].read_text())
    assert {k: fitted[k]["fitted"]["temperature"] for k in ROLES} == pytest.approx(expected_t)

    test_logits, test_labels, _ = splits["test"]
    table = read_csv(out["metrics.csv"])
    table["bins"] = table["bins"].fillna(0).astype(int)
    for key, t in expected_t.items():
        rows = table[table["calibrator"] == key].set_index(["metric", "bins"])["value"]
        ece, nll = _independent(test_logits, test_labels, t)
        assert rows["ece", 15] == pytest.approx(ece, abs=1e-9)
        assert rows["ece", 10] == pytest.approx(metrics.ece(torch.softmax(test_logits.double() / t, 1).numpy(),
                                                            test_labels.numpy(), n_bins=10), abs=1e-9)
        assert rows["nll", 0] == pytest.approx(nll, rel=1e-9)
        assert rows["error", 0] == pytest.approx(float((test_logits.argmax(1) != test_labels).double().mean()))
        assert ("temperature", 0) in rows.index if key != "uncalibrated" else ("temperature", 0) not in rows.index
    ece_raw = table[(table["calibrator"] == "uncalibrated") & (table["metric"] == "ece") & (table["bins"] == 15)]
    ece_ts = table[(table["calibrator"] == "ts_ece") & (table["metric"] == "ece") & (table["bins"] == 15)]
    assert float(ece_ts["value"].iloc[0]) < float(ece_raw["value"].iloc[0]) - 0.05

    curve = read_csv(out["curve.csv"])
    assert list(curve["temperature"]) == pytest.approx(list(CURVE))
    for row in curve.itertuples():
        assert (row.val_ece, row.val_nll) == pytest.approx(_independent(val_logits, val_labels, row.temperature), abs=1e-9)
        assert (row.test_ece, row.test_nll) == pytest.approx(_independent(test_logits, test_labels, row.temperature),
                                                             abs=1e-9)


def test_a_calibrator_a_token_profile_cannot_fit_is_refused_by_its_key(tmp_path, splits):
    profile = tmp_path / "token_logits.npz"
    write_token_profile(profile, *(profile_from_logits(*splits[s]) for s in ("val", "test")))
    psi = {"psi": {"build": {"name": "psi", "gamma": 1.0}}}
    with pytest.raises(ValueError, match=r"calibrator 'psi' \(Ψ\^γ\) cannot be fitted on a translation run's token "
                                         r"profile; use one of the roles \['raw', 'ts_ece', 'ts_nll'\]"):
        calibrate_tokens(profile, psi, [15], tmp_path / "c.json", tmp_path / "m.csv", tmp_path / "k.csv", CURVE)
    assert not (tmp_path / "c.json").exists()
    with pytest.raises(ValueError, match=r"temperature 1.23 is not on the profile's grid"):
        calibrate_tokens(profile, ROLES, [15], tmp_path / "c.json", tmp_path / "m.csv", tmp_path / "k.csv", (1.0, 1.23))


@pytest.mark.parametrize(("option", "value"), [("n_bins", 10), ("temperatures", [1.0, 2.0]), ("binning", "mass")])
def test_a_token_calibrator_whose_options_differ_from_its_role_is_refused_by_option(tmp_path, splits, option, value):
    """The profile fits the role's own grid and bins, so a spec asking for other ones is refused, not fitted as the role."""
    profile = tmp_path / "token_logits.npz"
    write_token_profile(profile, *(profile_from_logits(*splits[s]) for s in ("val", "test")))
    spec = {"mine": {"build": {"name": "temperature_scaling", "objective": "ece", "temperatures": "mukhoti",
                               "n_bins": 15, option: value}}}
    with pytest.raises(ValueError, match=rf"calibrator 'mine': {option}=.* cannot be fitted on a translation run's token"):
        calibrate_tokens(profile, spec, [15], tmp_path / "c.json", tmp_path / "m.csv", tmp_path / "k.csv", CURVE)
    assert not (tmp_path / "c.json").exists()


# -------------------------------------------------------------------------------- decoding

# a small vocabulary, so that four epochs (about 10 s) translate some n-grams right
STANDIN = {"dataset": {"name": "synthetic-translation", "n_train": 600, "n_val": 20, "n_test": 30, "seed": 0,
                       "n_nouns": 4, "n_adjectives": 2, "n_verbs": 3},
           "model": {"name": "transformer-small"}, "loss": {"name": "focal", "gamma": 1},
           "recipe": {"epochs": 4, "max_tokens": 300, "lr_schedule": "inverse_sqrt", "warmup_steps": 30,
                      "optimizer": {"name": "adam", "lr": 0.01, "betas": [0.9, 0.98], "eps": 1e-9,
                                    "weight_decay": 0.0}},
           "seed": 0, "device": "cpu"}


def _trained(config_dict: dict, run_dir, data_root):
    """A finished run of ``config_dict`` with its run_config.json, as rule train leaves it (no export)."""
    from focalcal.training import RunConfig, train_run

    config = RunConfig.from_dict(config_dict)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_run(config, run_dir, data_root=data_root, progress=False, export=False)
    finally:
        torch.set_num_threads(threads)
    (Path(run_dir) / "run_config.json").write_text(json.dumps(config.to_dict()))
    return config


@pytest.fixture(scope="module")
def standin_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("standin")
    return _trained(STANDIN, root / "run", root / "data"), root / "run", root / "data"


def test_a_decode_of_a_trained_run_writes_sacrebleus_bleu_of_its_own_hypotheses(tmp_path, standin_run):
    from sacrebleu.metrics import BLEU

    from focalcal.data.translation import pad_batch
    from focalcal.pipeline.translation import BEAM_SIZE, LENGTH_PENALTY, decode_run
    from focalcal.training import load_finished_run
    from focalcal.training.run_files import checkpoint_sha256
    from focalcal.translation.beam_search import beam_search

    config, run_dir, data_root = standin_run
    record = decode_run(run_dir, data_root, 1.2, tmp_path / "T1.20.json", tmp_path / "T1.20.txt", threads=1)
    assert json.loads((tmp_path / "T1.20.json").read_text()) == record
    assert record["checkpoint_sha256"] == checkpoint_sha256(run_dir) == digest_file(run_dir / "checkpoint.pt").sha256
    hypotheses = (tmp_path / "T1.20.txt").read_text().split("\n")[:-1]
    corpus = load_finished_run(config, run_dir, data_root=data_root).corpus
    assert len(hypotheses) == record["sentences"] == 30
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [list(corpus.test.references)])
    assert record["bleu"] == pytest.approx(score.score, abs=1e-12) and record["signature"] == str(metric.get_signature())
    assert 0 < record["bleu"] < 100  # a model that translates some n-grams right, not all
    assert (record["temperature"], record["beam_size"], record["length_penalty"]) == (1.2, BEAM_SIZE, LENGTH_PENALTY)
    # length-sorted batches keep each hypothesis with its source: as one sentence decoded alone
    model = load_finished_run(config, run_dir, data_root=data_root).model
    for index in (0, 7, 29):
        alone = beam_search(model, pad_batch([corpus.test.source[index]], add_bos=False, add_eos=True), BEAM_SIZE,
                            LENGTH_PENALTY, 1.2)
        assert hypotheses[index] == corpus.detokenise(alone[0])


def test_a_grid_decode_loads_the_model_once_and_writes_each_temperatures_decode_byte_for_byte(tmp_path, standin_run,
                                                                                             monkeypatch):
    """Rule decode's one job per run: the files of each temperature are those a decode at it alone writes."""
    from focalcal.pipeline import translation

    _, run_dir, data_root = standin_run
    alone = {t: translation.decode_run(run_dir, data_root, t, tmp_path / f"alone{t}.json", tmp_path / f"alone{t}.txt")
             for t in (0.8, 1.3)}
    loads = []
    real = translation.finished_model
    monkeypatch.setattr(translation, "finished_model", lambda *args: loads.append(args) or real(*args))
    records = translation.decode_grid(run_dir, data_root, [0.8, 1.3], [tmp_path / "T0.80.json", tmp_path / "T1.30.json"],
                                      [tmp_path / "T0.80.txt", tmp_path / "T1.30.txt"])
    assert len(loads) == 1
    for t, record, name in zip((0.8, 1.3), records, ("T0.80", "T1.30"), strict=True):
        assert (tmp_path / f"{name}.txt").read_bytes() == (tmp_path / f"alone{t}.txt").read_bytes()
        assert record == {**alone[t], "hypotheses": f"{name}.txt"}
    with pytest.raises(ValueError, match="2 temperatures but 1 JSON and 2 hypotheses paths"):
        translation.decode_grid(run_dir, data_root, [0.8, 1.3], [tmp_path / "x.json"], [tmp_path / "a", tmp_path / "b"])


def test_a_decode_builds_no_trainer_and_beam_searches_with_the_final_weights(tmp_path, standin_run, monkeypatch):
    """The decode path (model from run_config.json, the checkpoint's final weights) translates as the trainer's
    restored model does; with kept best weights (early stopping, recipe.select) it is those, not the last epoch's."""
    from focalcal.files.artefacts import atomic_torch_save
    from focalcal.pipeline.translation import decode_calibrated, decode_run, decode_split
    from focalcal.training import load_finished_run
    from focalcal.training.checkpoint import load_checkpoint
    from focalcal.training.translation import TranslationTrainer

    config, trained, data_root = standin_run
    run_dir = shutil.copytree(trained, tmp_path / "run")
    state = load_checkpoint(run_dir / "checkpoint.pt")
    generator = torch.Generator().manual_seed(0)
    best = {k: v + 0.3 * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
            for k, v in state["model"].items()}
    state["best"] = {"epoch": 2, "val_loss": 1.0, "val_error": 0.5, "model": best}
    atomic_torch_save(state, run_dir / "checkpoint.pt")

    trainer = load_finished_run(config, run_dir, data_root=data_root)
    corpus = trainer.corpus
    last = decode_split(trainer.model, corpus.test.source, corpus.test.references, corpus.detokenise, 1.1)
    trainer.use_final_weights()
    final = decode_split(trainer.model, corpus.test.source, corpus.test.references, corpus.detokenise, 1.1)
    assert final[0] != last[0]  # the kept weights translate otherwise than the last epoch's

    def no_trainer(*args, **kwargs):
        raise AssertionError("a decode built a trainer")

    monkeypatch.setattr(TranslationTrainer, "__init__", no_trainer)
    record = decode_run(run_dir, data_root, 1.1, tmp_path / "T1.10.json", tmp_path / "T1.10.txt")
    assert (tmp_path / "T1.10.txt").read_text().split("\n")[:-1] == final[0]
    assert record["bleu"] == final[1].score and record["signature"] == str(final[1].signature)
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"ts_ece": {"fitted": {"temperature": 1.1}}}))
    again = decode_calibrated(run_dir, data_root, calibration, "ts_ece", tmp_path / "ts_ece.json", tmp_path / "ts_ece.txt")
    assert (tmp_path / "ts_ece.txt").read_text() == (tmp_path / "T1.10.txt").read_text()
    assert again["checkpoint_sha256"] == record["checkpoint_sha256"] == digest_file(run_dir / "checkpoint.pt").sha256
    assert again["calibrator"] == "ts_ece" and again["bleu"] == record["bleu"]


def test_a_decode_of_an_unfinished_or_foreign_checkpoint_is_refused(tmp_path, standin_run):
    from focalcal.files.artefacts import atomic_torch_save
    from focalcal.pipeline.translation import decode_run
    from focalcal.training.checkpoint import load_checkpoint

    _, trained, data_root = standin_run
    run_dir = shutil.copytree(trained, tmp_path / "run")
    state = load_checkpoint(run_dir / "checkpoint.pt")
    atomic_torch_save({**state, "finished_at": None, "epochs_done": 2}, run_dir / "checkpoint.pt")
    with pytest.raises(RuntimeError, match=r"checkpoint.pt holds an unfinished run \(2 epochs\); finish training first"):
        decode_run(run_dir, data_root, 1.0, tmp_path / "T.json", tmp_path / "T.txt")
    atomic_torch_save({**state, "fingerprint": "0" * 16}, run_dir / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint.pt belongs to a run with different settings .* it is not this "
                                         r"run's checkpoint"):
        decode_run(run_dir, data_root, 1.0, tmp_path / "T.json", tmp_path / "T.txt")
    assert not (tmp_path / "T.json").exists()


@pytest.mark.usefixtures("no_network")
def test_a_wmt14_decode_reads_the_test_split_and_the_vocabulary_only(tmp_path, mirror, monkeypatch):  # noqa: F811
    """The training pairs (millions at WMT scale) are never read to decode the test set."""
    from focalcal.data import wmt14
    from focalcal.pipeline.translation import decode_run

    data_root, run_dir = tmp_path / "data", tmp_path / "run"
    wmt14.wmt14_en_de(data_root, vocab_size=60, download=True)  # the prepared cache, as rule prepare_data leaves it
    recipe = {**STANDIN["recipe"], "epochs": 1}
    _trained({**STANDIN, "dataset": {"name": "WMT14-en-de", "vocab_size": 60}, "recipe": recipe}, run_dir, data_root)
    read = []
    real = wmt14._load_split
    monkeypatch.setattr(wmt14, "_load_split", lambda path: read.append(path.name.rsplit("-", 1)[-1]) or real(path))
    record = decode_run(run_dir, data_root, 1.0, tmp_path / "T1.00.json", tmp_path / "T1.00.txt")
    assert read == ["test.npz"]
    assert record["sentences"] == len(mirror["test"][0]) == 15
    # the trainer, by contrast, reads every split
    from focalcal.training import load_finished_run

    read.clear()
    load_finished_run(RunConfig.from_dict(json.loads((run_dir / "run_config.json").read_text())), run_dir, data_root)
    assert sorted(read) == ["test.npz", "train.npz", "val.npz"]
