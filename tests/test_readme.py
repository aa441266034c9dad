"""The README's code runs as written: the library example and the four "adding ..." recipes
(each block marked ``<!-- readme-test: NAME -->``), and every path and make target it names
exists. Blocks run in a fresh interpreter each, so what they register does not leak into the
other tests' registries."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, SNAKEFILE, planned_jobs, snakemake

README = (ROOT / "README.md").read_text()
BLOCKS = dict(re.findall(r"<!-- readme-test: (\w+) -->\n```python\n(.*?)```", README, flags=re.DOTALL))
YAML_BLOCKS = dict(re.findall(r"<!-- readme-test: (\w+) -->\n```yaml\n(.*?)```", README, flags=re.DOTALL))


def run_block(name: str, checks: str, tmp_path: Path) -> str:
    """Run README block ``name`` then ``checks`` in one fresh interpreter (cwd ``tmp_path``)."""
    code = BLOCKS[name] + "\n# ---- test checks ----\n" + textwrap.dedent(checks)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"README block {name!r} failed:\n{result.stderr[-3000:]}"
    return result.stdout


def test_every_marked_block_is_tested():
    assert set(BLOCKS) == {"library", "loss", "calibrator", "dataset", "model", "paper", "paper_page"}
    assert set(YAML_BLOCKS) == {"study"}


def test_library_example_calibrates_and_recovers_the_posterior(tmp_path):
    out = run_block("library", """
        assert abs(ts.temperature_ - 2.5) < 0.15, ts.temperature_
        assert after < before / 5, (before, after)
        assert np.abs(recovered - eta).max() < 1e-8
    """, tmp_path)
    printed = re.search(r"T = ([\d.]+), ECE ([\d.]+) -> ([\d.]+)", out)
    assert printed and printed.groups() == ("2.55", "0.198", "0.020")  # the numbers the README's comment shows
    assert re.search(r"max \|Ψ\(q\*\) − η\| = \d\.\de-\d\d", out)


def test_loss_recipe_builds_by_name_and_matches_its_formula(tmp_path):
    run_block("loss", """
        import math
        assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
        x = torch.tensor([[2.0, 0.0, -1.0]], dtype=torch.float64, requires_grad=True)
        p = torch.softmax(x, 1)[0, 0].item()
        value = losses.build({"name": "poly1", "epsilon": 2.0})(x, torch.tensor([0]))
        assert math.isclose(value.item(), -math.log(p) + 2.0 * (1 - p), rel_tol=1e-12)
        assert torch.autograd.gradcheck(lambda t: loss(t, torch.tensor([0, 2])),
                                        torch.randn(2, 3, dtype=torch.float64, requires_grad=True))
        assert "poly1" in losses.available()
        try:
            losses.build({"name": "poly1", "gamma": 1})
        except ValueError as error:
            assert "unknown parameter(s) ['gamma']" in str(error)
        else:
            raise AssertionError("an unknown parameter must fail")
    """, tmp_path)


def test_calibrator_recipe_fits_round_trips_and_matches_the_val_frequencies(tmp_path):
    run_block("calibrator", """
        logits = rng.normal(size=(500, 3)) + np.array([2.0, 0.0, 0.0])
        labels = rng.integers(0, 3, 500)
        fitted = build({"name": "bias_correction"}).fit(logits, labels)
        assert np.allclose(fitted.transform(logits).mean(axis=0), np.bincount(labels) / 500, atol=1e-6)
        assert np.array_equal(Calibrator.from_dict(fitted.to_dict()).transform(logits), fitted.transform(logits))
    """, tmp_path)


def test_dataset_recipe_loads_with_seeded_stratified_splits(tmp_path):
    run_block("dataset", """
        sizes = {split: len(getattr(moons, split).y) for split in ("train", "val", "test")}
        assert sizes == {"train": 350, "val": 50, "test": 100}, sizes
        assert moons.num_classes == 2 and moons.train.x.shape == (350, 2)
        again = data.load("two_moons", root="data", n_samples=500)
        assert (again.test.y == moons.test.y).all()  # seeded: the same split every time
    """, tmp_path)


def test_model_recipe_builds_and_rejects_unknown_options(tmp_path):
    run_block("model", """
        assert sum(p.numel() for p in net.parameters()) == 2 * 64 + 64 + 64 * 2 + 2
        try:
            models.build("wide_mlp", num_classes=2, depth=3)
        except ValueError as error:
            assert "depth" in str(error)
        else:
            raise AssertionError("an unknown option must fail")
    """, tmp_path)


def test_paths_and_make_targets_named_in_the_readme_exist():
    for path in sorted(set(re.findall(r"`((?:config|profiles|envs|notebooks|bench|workflow|tests)/[\w./-]+)`", README))):
        assert (ROOT / path).exists(), path
    for path in sorted(set(re.findall(r"--configfile (config/[\w./-]+\.yaml)", README))):
        assert (ROOT / path).exists(), path
    makefile = (ROOT / "Makefile").read_text()
    for target in sorted(set(re.findall(r"\bmake (\w+)", README))):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), f"make {target}"


def dry_run_jobs(*args: str, cwd: Path) -> dict[str, int]:
    """rule -> planned jobs of a ``snakemake -n`` in ``cwd`` (an empty folder: nothing is done yet)."""
    jobs = planned_jobs(snakemake(cwd, "-n", *args))
    jobs.pop("total")
    return jobs


def test_study_recipe_plans_its_runs_and_shares_the_ones_another_study_has(tmp_path):
    import yaml

    study = tmp_path / "digits_gamma_sweep.yaml"
    study.write_text(YAML_BLOCKS["study"])
    (key,) = yaml.safe_load(study.read_text())["studies"]
    default = ["--configfile", "config/config.yaml"]
    alone = dry_run_jobs(f"results/tables/{key}.csv", *default, str(study), cwd=tmp_path / "table")
    assert alone == {"prepare_data": 1, "train": 12, "export_logits": 12, "calibrate": 12, "study_table": 1}, alone
    before = dry_run_jobs(*default, cwd=tmp_path / "before")
    after = dry_run_jobs(*default, str(study), cwd=tmp_path / "after")
    assert after["train"] - before["train"] == 9  # CE, FL-1, FL-3 on seed 0 are shared with a default study
    assert after["study_table"] == before["study_table"] + 1 and after["claims"] == 1
    assert after["study_figure"] > before["study_figure"]  # mukhoti2020's figures of the new study


def test_paper_recipe_is_one_module_and_one_catalog_entry_and_builds_its_table(workflow_checkout):
    """The README's paper module, written into a copy of the checkout with its catalog entry and
    nothing else, gives a study of that paper its table through the workflow and a report page."""
    import pandas as pd
    import yaml

    checkout = workflow_checkout
    package = checkout / "src/focalcal/papers/guo2017"
    package.mkdir()
    (package / "__init__.py").write_text(BLOCKS["paper"])
    (package / "page.py").write_text(BLOCKS["paper_page"])
    config = yaml.safe_load((ROOT / "config/test.yaml").read_text())
    study = dict(config["studies"]["test_digits"], paper="guo2017", grids=config["studies"]["test_digits"]["grids"][:1])
    config["studies"] = {"test_guo": study}
    (checkout / "guo.yaml").write_text(yaml.safe_dump(config))
    run = {"snakefile": checkout / SNAKEFILE.relative_to(ROOT), "env": {"PYTHONPATH": str(checkout / "src")}}
    target = "results/tables/test_guo/guo2017_table1.csv"
    dry = snakemake(checkout, "results/report/index.html", "-n", "--configfile", str(checkout / "guo.yaml"), **run)
    assert "results/report/guo2017.html" in dry.stdout + dry.stderr  # its page, from notebooks/paper.ipynb
    snakemake(checkout, target, "--cores", "2", "--configfile", str(checkout / "guo.yaml"), **run)
    built = pd.read_csv(checkout / target)
    assert list(built.loss) == ["ce", "focal1"] and (built.seeds == 1).all()
    assert ((built.ece_before > 0) & (built.ece_after > 0)).all()
