"""Figures, paper tables and the HTML report, run for real on config/test.yaml.

The test session's finished run of the test config (data -> runs -> calibration -> tables -> figures
-> notebooks -> index; conftest's ``finished``), then: every planned figure and table exists,
every notebook page embeds its images and ran without error, the index links resolve, the
pages pass the headless-Chromium check (screenshot saved), a paper table agrees with the
study table it summarises, and a deleted figure is rebuilt alone.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from conftest import ROOT, TEST_CONFIG, planned_jobs, snakemake
from test_report_browser import ensure_chromium

from focalcal.pipeline import build_plan, validate_config
from focalcal.report.browser import broken_links, check_report
from focalcal.report.targets import report_plan

TEST_CONFIG_ARGS = ("--configfile", str(TEST_CONFIG))


@pytest.fixture(scope="module")
def plan():
    config = yaml.safe_load(TEST_CONFIG.read_text())
    validate_config(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    return report_plan(build_plan(config))


def test_every_planned_figure_and_table_and_the_index_exist(finished, plan):
    for artifact in plan.artifacts():
        assert (finished / artifact.path).stat().st_size > 0, artifact.path
    assert (finished / "results/report/index.html").is_file()
    assert broken_links(finished / "results/report") == []
    manifest = json.loads((finished / "results/report/manifest.json").read_text())
    assert set(manifest["studies"]) == {"test_posterior", "test_digits", "test_segmentation"}
    inventory = pd.read_csv(finished / "results/report/runs.csv")
    # 4 classification runs (recipe tiny, 15 epochs), one at lr 100 (3 epochs, collapsed) and 2 losses x 2 folds
    # of segmentation (20 epochs); only the lr-100 run is unhealthy
    assert sorted(inventory["epochs"]) == [3] + [15] * 4 + [20] * 4
    assert inventory.set_index("run")["status"].to_dict() == {
        run: "collapsed" if "tiny_lr100" in run else "trained" for run in inventory["run"]}
    assert inventory["device"].notna().all()


def test_notebook_pages_ran_cleanly_and_embed_their_figures(finished, plan):
    for notebook in plan.notebooks:
        executed = nbformat.read(finished / f"results/report/notebooks/{notebook}.ipynb", as_version=4)
        outputs = [output for cell in executed.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"], notebook
        page = (finished / f"results/report/{notebook}.html").read_text()
        expected = len([a for a in plan.artifacts() if a.kind == "figure" and a.paper == notebook])
        assert page.count("data:image/png;base64,") >= expected, notebook
        assert "Traceback" not in page
    mukhoti = (finished / "results/report/mukhoti2020.html").read_text()
    assert "Table 13" in mukhoti and "published ece post_t" in mukhoti


def test_report_pages_load_in_headless_chromium(finished_copy):
    ensure_chromium()
    outcome = check_report(finished_copy / "results/report")
    assert outcome["failures"] == []
    images = {name: len(info["images"]) for name, info in outcome["pages"].items()}
    # Figs 4a, 6, 7, 8 + 4 from runs (2, 3, 4b-d, 10), and the claims' forest plot
    assert images["komisarenko2024.html"] == 9 and images["mukhoti2020.html"] == 9
    assert any(image["src"].endswith("figures/claims/index.png") for image in outcome["pages"]["index.html"]["images"])
    assert (finished_copy / "results/report/index.png").stat().st_size > 10_000


def test_paper_table_agrees_with_the_study_table(finished):
    study = pd.read_csv(finished / "results/tables/test_digits.csv")
    table1 = pd.read_csv(finished / "results/tables/test_digits/mukhoti2020_table1.csv").set_index("stage")
    raw = study[(study.loss == "ce") & (study.calibrator == "uncalibrated") & (study.metric == "ece") & (study.bins == 15)]
    scaled = study[(study.loss == "ce") & (study.calibrator == "ts_nll") & (study.metric == "temperature")]
    assert table1.loc["pre_t", "ours_mean"] == pytest.approx(100 * raw["value"].mean())
    assert table1.loc["post_t", "ours_temperature"] == pytest.approx(scaled["value"].mean())
    assert table1["paper_dataset"].eq("SVHN").all() and table1["stand_in"].all()


def test_a_deleted_figure_is_rebuilt_alone(finished_copy):
    theory = finished_copy / "results/figures/theory/charoenphakdee2021_fig1_phi.png"
    experiment = finished_copy / "results/figures/test_posterior/charoenphakdee2021_fig3_synthetic1d.png"
    untouched = finished_copy / "results/figures/test_digits/mukhoti2020_fig2_training_curves.png"
    before = untouched.stat().st_mtime_ns
    targets = []
    for figure, rule in ((theory, "theory_figure"), (experiment, "study_figure")):
        figure.unlink()
        targets.append(str(figure.relative_to(finished_copy)))
        assert planned_jobs(snakemake(finished_copy, "-n", targets[-1], *TEST_CONFIG_ARGS)) == {rule: 1, "total": 1}
    ran = snakemake(finished_copy, "--cores", "1", *targets, *TEST_CONFIG_ARGS)  # both, in one Snakemake
    assert planned_jobs(ran) == {"theory_figure": 1, "study_figure": 1, "total": 2}
    assert theory.stat().st_size > 0 and experiment.stat().st_size > 0
    assert untouched.stat().st_mtime_ns == before


def test_snakemake_report_includes_every_figure_and_table(finished_copy, plan):
    snakemake(finished_copy, "--report", "report.zip", *TEST_CONFIG_ARGS)
    with zipfile.ZipFile(finished_copy / "report.zip") as archive:
        listing = "\n".join(archive.namelist())
    for artifact in plan.artifacts():
        assert Path(artifact.path).name in listing, artifact.path


def test_claims_table_is_its_own_target_and_every_paper_page_shows_claims(finished_copy):
    from focalcal.claims import CLAIMS, VERDICTS

    claims = pd.read_csv(finished_copy / "results/tables/claims.csv")
    expected = {(study, key) for study, paper in (("test_posterior", "charoenphakdee2021"), ("test_digits", "mukhoti2020"),
                                                  ("test_segmentation", "hossain2021"))
                for key in (c.key for c in CLAIMS[paper])}
    assert set(zip(claims["study"], claims["claim"])) == expected and len(claims) == len(expected)
    assert set(claims["verdict"]) <= set(VERDICTS)
    # one seed (one fold pair) per comparison: nothing in this config can be a verdict but inconclusive/not testable
    assert set(claims["verdict"]) <= {"inconclusive", "not testable with this config"}
    fl = claims.set_index(["study", "claim"]).loc[("test_posterior", "c21-psi-recovers-posterior")]
    assert fl["n_pairs"] == 1 and "only 1 pair" in fl["reason"]
    # the collapsed lr-100 run is left out of its study's claims, which say so, and warned about at the end
    collapsed = "digits/cnn_small/ce/tiny_lr100/seed0"
    digits = claims[claims["study"] == "test_digits"]
    assert digits["excluded_runs"].str.contains(f"{collapsed} (collapsed: test accuracy", regex=False).all()
    assert claims[claims["study"] != "test_digits"]["excluded_runs"].isna().all()
    output = (finished_copy / "snakemake.out").read_text().splitlines()
    warnings = [line for line in output if "focalcal: WARNING" in line]
    assert len(warnings) == 1 and collapsed in warnings[0] and "collapsed" in warnings[0]
    # every pair behind a verdict, with its unit, in the side table; the report shows them and the forest plots
    pairs = pd.read_csv(finished_copy / "results/tables/claims_pairs.csv")
    tested = claims[claims["n_pairs"] > 0]
    counted = pairs.groupby(["study", "claim"]).size()
    assert {key: counted.get(key, 0) for key in zip(tested["study"], tested["claim"])} == \
        dict(zip(zip(tested["study"], tested["claim"]), tested["n_pairs"]))
    psi = pairs[(pairs["study"] == "test_posterior") & (pairs["claim"] == "c21-psi-recovers-posterior")]
    assert list(psi["dataset"]) == ["synthetic1d"] and psi["difference"].iloc[0] == pytest.approx(fl["mean"])
    for paper in CLAIMS:
        page = (finished_copy / f"results/report/{paper}.html").read_text()
        assert "Claims: does the paper hold here?" in page, paper
        assert (finished_copy / f"results/figures/claims/{paper}.png").stat().st_size > 5_000, paper
    page = (finished_copy / "results/report/charoenphakdee2021.html").read_text()
    assert "pair(s) point the paper&#x27;s way" in page or "pair(s) point the paper's way" in page
    assert f"{psi['difference'].iloc[0]:+.4g}" in page  # the pair itself, with its unit
    index = (finished_copy / "results/report/index.html").read_text()
    assert "Does each paper hold here?" in index and "c21-psi-recovers-posterior" in index
    assert "../figures/claims/index.png" in index and "synthetic1d/mlp/" in index
    # each of the two tables, deleted alone, plans the claims job alone; it re-makes both, unchanged
    path, pairs_path = finished_copy / "results/tables/claims.csv", finished_copy / "results/tables/claims_pairs.csv"
    for deleted in (path, pairs_path):
        deleted.rename(deleted.with_suffix(".kept"))
        dry = snakemake(finished_copy, "-n", str(deleted.relative_to(finished_copy)), *TEST_CONFIG_ARGS)
        assert planned_jobs(dry) == {"claims": 1, "total": 1}, deleted.name
        deleted.with_suffix(".kept").rename(deleted)
    path.unlink()
    pairs_path.unlink()
    ran = snakemake(finished_copy, "--cores", "1", "results/tables/claims.csv", "results/tables/claims_pairs.csv",
                    *TEST_CONFIG_ARGS)
    assert planned_jobs(ran) == {"claims": 1, "total": 1}
    assert pd.read_csv(path).equals(claims)
    assert pd.read_csv(pairs_path).equals(pairs)
