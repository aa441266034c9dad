"""Which calibrators ``focalcal calibrate`` offers, which it runs by default, and their specs.

The command's calibrators are the catalog's roles it offers (``Role.cli``), under their keys:
:func:`resolve_calibrators` turns the names asked for (or the default list) into the workflow
specs :func:`focalcal.pipeline.calibrate.fit_calibrator` fits.
"""

from __future__ import annotations

from focalcal import catalog
from focalcal.core.constraints import GAMMA, validate_parameters

# The command's calibrators: the catalog's roles it offers (``Role.cli``), under their keys, with
# their specs (the papers' ones are the default workflow config's, so a table of either reads
# the same), labels and costs. Ψ^γ's γ is the model's training focal γ (--gamma), where the
# workflow takes the run's. Those whose calibrator holds K² numbers (vector scaling's (2K)²
# Newton system, Dirichlet's K × K matrix) run by default only up to MAX_CLASSES_QUADRATIC
# classes: the Newton system grows as K², and 10,000 classes make it 2K × 2K float64s (3.2 GB);
# ``python -m bench compare`` times vector scaling at 100 × 10,000.
PSI_KEY = "psi"
_OFFERED = {key: role for key, role in catalog.ROLES.items() if role.cli}
CALIBRATORS: dict[str, dict] = {key: {name: value for name, value in role.spec.items() if value != catalog.FROM_LOSS}
                                for key, role in _OFFERED.items()}
# Focal TS's (γ, T) grid is searched coarse to fine here (about a third of its pairs; the
# tolerance against the whole grid: calibration._focal_grid.SEARCHES); the workflow's specs score
# the papers' whole grid.
FOCAL_TS_SEARCH = "refine"
for _spec in CALIBRATORS.values():
    if _spec["name"] == "focal_temperature_scaling":
        _spec["search"] = FOCAL_TS_SEARCH
PAPER_CALIBRATORS = tuple(key for key, role in _OFFERED.items() if role.in_papers)
DEFAULT_CALIBRATORS = tuple(key for key, role in _OFFERED.items() if role.cli == "default")
COSTS = {key: role.cost for key, role in _OFFERED.items()}
LABELS = {key: role.label for key, role in _OFFERED.items()}
QUADRATIC_IN_K = tuple(key for key, spec in CALIBRATORS.items() if catalog.CALIBRATORS[spec["name"]].quadratic_in_k)
MAX_CLASSES_QUADRATIC = 200


def resolve_calibrators(names=None, gamma: float | None = None) -> dict[str, dict]:
    """key -> workflow spec (``{"build": {...}}``) of the named calibrators (default: the
    :data:`DEFAULT_CALIBRATORS`, Ψ^γ only when ``gamma`` is given)."""
    chosen = list(DEFAULT_CALIBRATORS if names is None else names)
    unknown = [name for name in chosen if name not in CALIBRATORS]
    if unknown:
        raise ValueError(f"unknown calibrator(s) {unknown}; available: {', '.join(CALIBRATORS)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"calibrators named twice: {sorted({n for n in chosen if chosen.count(n) > 1})}")
    validate_parameters({"gamma": [GAMMA, None]}, {"gamma": gamma}, "focalcal calibrate")
    specs = {}
    for name in chosen:
        build = dict(CALIBRATORS[name])
        if name == PSI_KEY:
            if gamma is None:
                if names is None:
                    continue  # the default list: Ψ^γ needs the training γ
                raise ValueError("calibrator psi needs the model's training focal γ: pass --gamma")
            build["gamma"] = float(gamma)
        specs[name] = {"build": build}
    return specs


def parameter_count(key: str, num_classes: int) -> int:
    """How many numbers calibrator ``key`` fits on K classes (isotonic: one step function per
    class, at least 2 numbers each)."""
    return catalog.ROLES[key].parameters(num_classes, catalog.ROLES[key].spec)
