"""Networks for the four papers, built by name.

>>> from focalcal.models import build, last_layer
>>> model = build("resnet20", num_classes=10)      # He et al. CIFAR ResNet-20, 0.27 M parameters
>>> last_layer(model).weight.norm()                # mukhoti2020 Fig. 3 tracks this

``available()`` lists the names (``available("segmentation")`` the segmentation ones);
``spec(name)`` gives a model's task, default input sample shape and accepted options.
Classification models return (N, K) logits, segmentation models (N, K, H, W) logits at the
input resolution.
"""

from focalcal.core.extras import require

require("torch", "focalcal.models")  # one line naming the extra, before any module imports torch

from .registry import ModelSpec, available, build, count_parameters, last_layer, register, spec

__all__ = ["ModelSpec", "available", "build", "count_parameters", "last_layer", "register", "spec"]
