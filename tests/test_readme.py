"""The user guide's code runs as written, and the README leads to it.

The recipes of the guide's pages (``docs/*.md``: the library example and the "adding ..."
recipes, each block marked ``<!-- readme-test: NAME -->``) run here, each on the page named in
``PAGES``; every path and make target the README and the pages name exists, and every page the
README links to is there. Blocks run in a fresh interpreter each, so what they register does not
leak into the other tests' registries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml
from conftest import ROOT, SNAKEFILE, add_paper_entry, planned_jobs, snakemake

README = (ROOT / "README.md").read_text()
DOCS = {path.relative_to(ROOT).as_posix(): path.read_text() for path in sorted((ROOT / "docs").rglob("*.md"))
        if "node_modules" not in path.parts}  # npm's packages of the site (docs/package.json), not pages
# block -> the page that shows it
PAGES = {"library": "docs/library.md", "study": "docs/adding-a-study.md", "paper": "docs/adding-a-paper.md",
         "paper_entry": "docs/adding-a-paper.md", "paper_page": "docs/adding-a-paper.md", "loss": "docs/adding-a-loss.md", "loss_entry": "docs/adding-a-loss.md",
         "loss_config": "docs/adding-a-loss.md", "calibrator": "docs/adding-a-calibrator.md",
         "calibrator_entry": "docs/adding-a-calibrator.md",
         "dataset": "docs/adding-a-dataset-or-model.md", "model": "docs/adding-a-dataset-or-model.md"}
MARKED = [(page, language, name, code) for page, text in DOCS.items() for name, language, code in
          re.findall(r"<!-- readme-test: (\w+) -->\n```(python|yaml)\n(.*?)```", text, flags=re.DOTALL)]
BLOCKS = {name: code for _, language, name, code in MARKED if language == "python"}
YAML_BLOCKS = {name: code for _, language, name, code in MARKED if language == "yaml"}


def run_block(name: str, checks: str, tmp_path: Path) -> str:
    """Run guide block ``name`` then ``checks`` in one fresh interpreter (cwd ``tmp_path``)."""
    code = BLOCKS[name] + "\n# ---- test checks ----\n" + textwrap.dedent(checks)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"guide block {name!r} failed:\n{result.stderr[-3000:]}"
    return result.stdout


def test_every_marked_block_is_tested_on_its_page():
    assert set(BLOCKS) == {"library", "loss", "loss_entry", "calibrator", "calibrator_entry", "dataset", "model", "paper",
                           "paper_entry", "paper_page"}  # calibrator_entry: tests/test_calibrator_one_entry.py
    assert set(YAML_BLOCKS) == {"study", "loss_config"}
    assert sorted((name, page) for page, _, name, _ in MARKED) == sorted(PAGES.items())  # each once, on its page
    assert "readme-test" not in README  # the README points to the pages; the recipes live there


def test_the_readme_is_a_first_visit_that_links_every_guide_page():
    assert len(README.splitlines()) <= 150
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)\)", README))
    assert linked == {page for page in DOCS if not page.startswith("docs/api/") and page != "docs/index.md"}
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in ("make run", "make test"):  # the two set-up commands; CI runs the README's test command
        assert f"\n{command} " in README
    assert "make test" in ci


def test_library_example_calibrates_and_recovers_the_posterior(tmp_path):
    out = run_block("library", """
        assert abs(ts.temperature_ - 2.5) < 0.15, ts.temperature_
        assert after < before / 5, (before, after)
        assert np.abs(recovered - eta).max() < 1e-8
    """, tmp_path)
    printed = re.search(r"T = ([\d.]+), ECE ([\d.]+) -> ([\d.]+)", out)
    assert printed and printed.groups() == ("2.55", "0.198", "0.020")  # the numbers the page's comment shows
    assert re.search(r"max \|Ψ\(q\*\) − η\| = \d\.\de-\d\d", out)


def test_loss_recipe_is_a_module_a_catalog_entry_and_a_config_line_that_reach_the_workflow(workflow_checkout):
    """The page's three edits, made in a copy of the checkout as the page says: the library
    there builds the loss by name, and a dry run plans a study grid that trains with it."""
    checkout = workflow_checkout
    (checkout / "src/focalcal/losses/poly.py").write_text(BLOCKS["loss"])
    catalog = checkout / "src/focalcal/catalog.py"
    text = catalog.read_text()
    table = re.search(r"^LOSSES: dict\[str, Loss\] = \{\n", text, flags=re.MULTILINE)
    assert table, "src/focalcal/catalog.py has no LOSSES table for the page's entry"
    catalog.write_text(text[:table.end()] + BLOCKS["loss_entry"] + text[table.end():])
    config = checkout / "config/config.yaml"
    head, line = YAML_BLOCKS["loss_config"].split("\n", 1)
    assert head == "losses:"
    config.write_text(re.sub(r"^losses:\n", lambda _: f"losses:\n{line}", config.read_text(), count=1, flags=re.MULTILINE))
    assert yaml.safe_load(config.read_text())["losses"]["poly2"] == {"name": "poly1", "epsilon": 2.0}

    checks = textwrap.dedent("""
        import math
        import torch
        from focalcal import catalog, losses
        from focalcal.pipeline import ConfigError, check_entries

        loss = losses.build({"name": "poly1", "epsilon": 2.0})
        logits = torch.randn(8, 10, requires_grad=True)
        loss(logits, torch.randint(0, 10, (8,))).backward()
        assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
        x = torch.tensor([[2.0, 0.0, -1.0]], dtype=torch.float64, requires_grad=True)
        p = torch.softmax(x, 1)[0, 0].item()
        assert math.isclose(loss(x, torch.tensor([0])).item(), -math.log(p) + 2.0 * (1 - p), rel_tol=1e-12)
        assert torch.autograd.gradcheck(lambda t: loss(t, torch.tensor([0, 2])),
                                        torch.randn(2, 3, dtype=torch.float64, requires_grad=True))
        assert "poly1" in losses.available() and catalog.loss("poly1").label == "Poly-1"
        assert catalog.focal_gamma({"name": "poly1"}) is None and catalog.aliases()["poly"] == "poly1"
        try:
            check_entries({"losses": {"poly2": {"name": "poly1", "epsilom": 2.0}}})
        except ConfigError as error:
            assert "losses.poly2.epsilom: unknown parameter of loss 'poly1' (did you mean 'epsilon'?)" in str(error), error
        else:
            raise AssertionError("a misspelt parameter must fail")
        try:
            check_entries({"losses": {"poly2": {"name": "poly1", "epsilon": -2.0}}})
        except ConfigError as error:
            assert ("losses.poly2.epsilon: PolyLoss: epsilon must be a real number in [-1, inf), got -2.0"
                    in str(error)), error
        else:
            raise AssertionError("an epsilon outside its constraint must fail")
    """)
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    result = subprocess.run([sys.executable, "-c", checks], cwd=checkout, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, f"the loss page's recipe failed:\n{result.stderr[-3000:]}"

    study = checkout / "digits_poly.yaml"
    study.write_text(yaml.safe_dump({"studies": {"digits_poly": {
        "paper": "mukhoti2020", "mirrors": "CE against Poly-1 on sklearn digits",
        "grids": [{"datasets": ["digits"], "models": ["cnn2d_small"], "losses": ["ce", "poly2"], "recipe": "small_30",
                   "seeds": [0], "calibrators": ["raw", "ts_nll"]}]}}}))
    dry = snakemake(checkout / "dry", "-n", "results/tables/digits_poly.csv", "--configfile", str(config), str(study),
                    snakefile=checkout / SNAKEFILE.relative_to(ROOT), env={"PYTHONPATH": str(checkout / "src")})
    jobs = planned_jobs(dry)
    jobs.pop("total")
    assert jobs == {"prepare_data": 1, "train": 2, "export_logits": 2, "calibrate": 2, "study_table": 1}, jobs
    assert "results/runs/digits/cnn2d_small/poly2/small_30/seed0/logits.npz" in dry.stdout + dry.stderr


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


def test_paths_and_make_targets_named_in_the_readme_and_the_guide_exist():
    text = "\n".join([README, *DOCS.values()])
    named = r"`((?:config|profiles|envs|notebooks|bench|workflow|tests|src|docs)/[\w./-]+)`"
    recipes = {"src/focalcal/losses/poly.py", "src/focalcal/papers/guo2017/"}  # what the adding pages create
    installed = {"docs/node_modules/"}  # what `make docs` installs (npm ci --prefix docs), git-ignored
    for path in sorted(set(re.findall(named, text)) - recipes - installed):
        assert (ROOT / path).exists(), path
    for path in sorted(set(re.findall(r"--configfile (config/[\w./-]+\.yaml)", text))):
        assert (ROOT / path).exists(), path
    makefile = (ROOT / "Makefile").read_text()
    for target in sorted(set(re.findall(r"(?<![\w-])make (\w[\w-]*)", text))):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), f"make {target}"


def dry_run_jobs(*args: str, cwd: Path) -> dict[str, int]:
    """rule -> planned jobs of a ``snakemake -n`` in ``cwd`` (an empty folder: nothing is done yet)."""
    jobs = planned_jobs(snakemake(cwd, "-n", *args))
    jobs.pop("total")
    return jobs


def test_study_recipe_plans_its_runs_and_shares_the_ones_another_study_has(tmp_path):
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


def test_paper_recipe_is_one_catalog_entry_and_one_package_and_builds_its_table(workflow_checkout):
    """The paper's catalog entry and its package's two modules, written into a copy of the
    checkout and nothing else, give a study of that paper its table through the workflow and a
    report page."""
    import pandas as pd

    checkout = workflow_checkout
    add_paper_entry(checkout, BLOCKS["paper_entry"])
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
