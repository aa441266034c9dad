"""hossain2021's theory figure: Fig 1, the derivatives of CE, DCE, FL and DFL with respect to the
softmax output. Every function returns a Figure and writes nothing."""

from __future__ import annotations

import numpy as np

from focalcal.plots.figure_arguments import check_points
from focalcal.plots.style import color_for, new_figure, paper_title, styled

# ------------------------------------------------------------------------------ H21 Fig 1


def loss_derivatives(z, target: int, *, alpha: float = 1.0, beta: float = 1.0, gamma: float = 1.0,
                     rho: float = 1.0) -> dict[str, np.ndarray]:
    """∂L/∂z of CE, DCE, FL and DFL with respect to one softmax output z (H21 Eq 9-12).

    ``target`` is y ∈ {0, 1} for that class. DFL uses the *added* α|y − z|^γ term of H21 Eq 7
    and Fig 1 (the sign in Eq 8/12 is a typo; see ``focalcal.losses.segmentation``), as
    :class:`focalcal.losses.DualFocalLoss` trains with:
    y = 1: −1/z − αγ(1 − z)^{γ−1};  y = 0: β/(ρ − z) + αγ z^{γ−1}.
    DCE: y = 1: −1/z; y = 0: β/(α + z). FL (α(1−z)^γ weighting): y = 1:
    αγ(1 − z)^{γ−1} log z − α(1 − z)^γ / z; y = 0: 0. CE: −y/z.
    """
    if target not in (0, 1):
        raise ValueError(f"target must be 0 or 1, got {target!r}")
    z = np.asarray(z, dtype=np.float64)
    if np.any((z <= 0) | (z >= 1)):
        raise ValueError("z must lie in the open interval (0, 1)")
    if target == 1:
        return {
            "cross_entropy": -1.0 / z,
            "dual_cross_entropy": -1.0 / z,
            "focal": alpha * (gamma * (1 - z) ** (gamma - 1) * np.log(z) - (1 - z) ** gamma / z),
            "dual_focal": -1.0 / z - alpha * gamma * (1 - z) ** (gamma - 1),
        }
    return {
        "cross_entropy": np.zeros_like(z),
        "dual_cross_entropy": beta / (alpha + z),
        "focal": np.zeros_like(z),
        "dual_focal": beta / (rho - z) + alpha * gamma * z ** (gamma - 1),
    }


_DERIVATIVE_LABELS = {"cross_entropy": "CE", "dual_cross_entropy": "DCE", "focal": "FL", "dual_focal": "DFL"}


def logit_gradients(z) -> dict[str, np.ndarray]:
    """∂L/∂u_y for a binary softmax with p_y = z, by autograd through the training losses
    (``focalcal.losses.build``, all constants 1): the gradient the network actually receives."""
    import torch

    from focalcal import losses

    z = torch.as_tensor(np.asarray(z, dtype=np.float64))
    configs = {"cross_entropy": {"name": "cross_entropy"}, "dual_cross_entropy": {"name": "dual_cross_entropy"},
               "focal": {"name": "focal", "gamma": 1.0}, "dual_focal": {"name": "dual_focal"}}
    gradients = {}
    for name, config in configs.items():
        logits = torch.stack([torch.log(z), torch.log1p(-z)], dim=1).requires_grad_(True)
        loss = losses.build({**config, "reduction": "sum"})(logits, torch.zeros(len(z), dtype=torch.long))
        (grad,) = torch.autograd.grad(loss, logits)
        gradients[name] = grad[:, 0].numpy()
    return gradients


@styled
def loss_derivatives_figure(*, n_points: int = 400):
    """H21 Fig 1: derivatives of CE, DCE, FL and DFL (α = β = γ = ρ = 1) with respect to the
    softmax output z, (a) for the true class (y = 1), (b) for a negative class (y = 0); (c) the
    gradient with respect to the true-class logit in a binary problem, by autograd through the
    ``focalcal.losses`` modules that training uses.
    """
    z = np.linspace(0.0, 1.0, check_points(n_points) + 2)[1:-1]
    figure, axes = new_figure(1, 3, height=3.8)
    styles = {"cross_entropy": "-", "dual_cross_entropy": "--", "focal": "-.", "dual_focal": "-"}
    for ax, target, letter in ((axes[0, 0], 1, "a"), (axes[0, 1], 0, "b")):
        for name, values in loss_derivatives(z, target).items():
            ax.plot(z, values, color=color_for(name), ls=styles[name], label=_DERIVATIVE_LABELS[name])
        ax.set(xlabel=f"softmax output z (y = {target})", ylabel="∂L/∂z",
               ylim=(-10, 2) if target == 1 else (-0.5, 10), title=f"({letter}) y = {target}")
        ax.legend()
    for name, values in logit_gradients(z).items():
        axes[0, 2].plot(z, values, color=color_for(name), ls=styles[name], label=_DERIVATIVE_LABELS[name])
    axes[0, 2].set(xlabel="true-class output z_y (K = 2)", ylabel="∂L/∂u_y (logit)",
                   title="(c) logit gradient, autograd")
    axes[0, 2].legend()
    paper_title(figure, "Loss derivatives of CE, DCE, FL and DFL", "hossain2021 Fig. 1")
    return figure


