"""The 1-D three-class problem of charoenphakdee2021 §5.2 (Fig 3a): known p(x) and η(x) = p(y|x).

The paper does not print its distribution's parameters, so this is a design in its spirit:
class-conditional Gaussians with unequal priors, means and widths, so that η has regions
where one class is near-certain (max η > 0.99 in both tails), a region where two classes
compete (max η ≈ 0.55 near x = 0.5) and one where all three do (η ≈ (0.39, 0.23, 0.38) near
x = -1). The Bayes error is about 0.21. Because η is known in closed form, KL(η‖q) of a
trained model can be measured exactly on every sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._dataset import RawData

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


@dataclass(frozen=True)
class GaussianMixture1D:
    """p(x, y) = prior[y] · N(x; mean[y], std[y]²)."""

    priors: tuple[float, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]

    def __post_init__(self):
        if not len(self.priors) == len(self.means) == len(self.stds):
            raise ValueError("priors, means and stds must have one entry per class")
        if not np.isclose(sum(self.priors), 1.0) or min(self.priors) <= 0:
            raise ValueError(f"priors must be positive and sum to 1, got {self.priors}")
        if min(self.stds) <= 0:
            raise ValueError(f"stds must be positive, got {self.stds}")

    @property
    def num_classes(self) -> int:
        return len(self.priors)

    def log_joint(self, x) -> np.ndarray:
        """log p(x, y) for every class, shape (N, K), in float64."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, 1)
        means, stds = np.asarray(self.means), np.asarray(self.stds)
        z = (x - means) / stds
        return np.log(self.priors) - 0.5 * z**2 - np.log(stds) - _LOG_SQRT_2PI

    def posterior(self, x) -> np.ndarray:
        """η(x) = p(y | x), shape (N, K); computed in log space, so finite for any real x."""
        from scipy.special import log_softmax  # here, not at the top: its import costs every training job CPU

        return np.exp(log_softmax(self.log_joint(x), axis=1))

    def density(self, x) -> np.ndarray:
        """The marginal p(x), shape (N,)."""
        from scipy.special import logsumexp

        return np.exp(logsumexp(self.log_joint(x), axis=1))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` draws: x float64 (n,), y int64 (n,)."""
        y = rng.choice(self.num_classes, size=n, p=self.priors).astype(np.int64)
        x = rng.normal(np.asarray(self.means)[y], np.asarray(self.stds)[y])
        return x, y


THREE_CLASS = GaussianMixture1D(priors=(0.35, 0.25, 0.40), means=(-2.5, 0.0, 1.0), stds=(1.0, 0.5, 1.5))


def posterior(x) -> np.ndarray:
    """η(x) of the registered 1-D three-class problem, numpy (N, 3)."""
    return THREE_CLASS.posterior(x)


def load_synthetic_1d(root, download: bool, *, n_samples: int = 6000, data_seed: int = 0) -> RawData:
    """Draw ``n_samples`` points (x as float32, shape (N, 1)) with their true posterior.

    Nothing touches the disk: drawing is faster than reading. The posterior is evaluated at
    the float32 value the model sees.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 10:
        raise ValueError(f"n_samples must be an integer >= 10, got {n_samples!r}")
    x, y = THREE_CLASS.sample(int(n_samples), np.random.default_rng(data_seed))
    x = x.astype(np.float32).reshape(-1, 1)
    return RawData(
        pools={"all": (x, y)},
        class_names=[f"class {k}" for k in range(THREE_CLASS.num_classes)],
        per_sample={"posterior": {"all": THREE_CLASS.posterior(x)}},
        info={"distribution": {"priors": THREE_CLASS.priors, "means": THREE_CLASS.means, "stds": THREE_CLASS.stds}},
    )
