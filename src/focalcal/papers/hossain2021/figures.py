"""hossain2021 experiment figures: IoU and Hausdorff distance over folds per loss (the numbers
of its Tables 2-3 as box plots) and qualitative overlays of predicted masks (its Figs 3-6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.colors import ListedColormap

from focalcal.plots.boxes import boxes_or_points, mark_status_ticks
from focalcal.plots.frames import as_frame, require_columns
from focalcal.plots.style import CLASS_COLORS, new_figure, paper_title, styled

BACKGROUND = 0  # class 0 is the background in every segmentation set of focalcal.data


@styled
def segmentation_scores_figure(table, *, loss_order: Sequence[str], colors: Mapping[str, str],
                               panel_by: Sequence[str] = ("dataset", "model")):
    """Mean IoU (%) and Hausdorff distance (pixels) of each fold, per loss: one row of two
    panels per (dataset, architecture).

    ``table``: one row per (run, metric) with columns ``loss`` (labels), ``metric`` ("iou" /
    "hausdorff"), ``value`` (IoU as a fraction) and the ``panel_by`` columns. A loss with
    fewer than 3 folds is drawn as its points in the loss's colour instead of a box (with 3 or
    more, each fold is a black dot over the box). An optional ``status`` column (run health)
    marks a loss whose runs did not all train on its tick label, e.g. "FL [diverged 1/5]".
    """
    table = as_frame(table, "table")
    require_columns(table, ["loss", "metric", "value", *panel_by], "table")
    groups = list(table.groupby(list(panel_by), sort=False))
    if not groups:
        raise ValueError("table has no rows")
    figure, axes = new_figure(len(groups), 2, height=2.8 * len(groups) + 0.6)
    order = [loss for loss in loss_order if loss in set(table["loss"])]
    for row, (key, group) in enumerate(groups):
        for column, (metric, label, scale) in enumerate((("iou", "mean IoU (%)", 100.0),
                                                           ("hausdorff", "mean Hausdorff distance (pixels)", 1.0))):
            ax = axes[row, column]
            data = group[group["metric"] == metric]
            data = data.assign(shown=data["value"].astype(float) * scale)
            boxes_or_points(ax, data, x="loss", y="shown", hue="loss", order=order, hue_order=order, palette=colors,
                            width=0.6, dodge=False, overlay="black")
            mark_status_ticks(ax, data, x="loss", order=order)
            key = key if isinstance(key, tuple) else (key,)
            ax.set_title(", ".join(str(k) for k in key), fontsize=10)
            ax.set(xlabel="training loss", ylabel=label)
    paper_title(figure, "IoU and Hausdorff distance over cross-validation folds", "hossain2021 Tables 2-3")
    return figure


def _mask_colors(num_classes: int) -> ListedColormap:
    colors = ["#000000"] + [CLASS_COLORS[(k - 1) % len(CLASS_COLORS)] for k in range(1, num_classes)]
    return ListedColormap(colors)


@styled
def segmentation_overlays_figure(samples: Mapping[str, Mapping[str, np.ndarray]], *, class_names: Sequence[str],
                                 n_images: int = 3):
    """One row per test image: the image, its true mask, and the mask each loss predicts.

    ``samples``: loss label -> {"images" (N, C, H, W), "true_masks" (N, H, W),
    "predicted_masks" (N, H, W)}, every loss on the same test images (one fold). Foreground
    classes are drawn in fixed colours over the image; the background is left clear.
    """
    if not samples:
        raise ValueError("no samples to draw")
    first = next(iter(samples.values()))
    images, truth = np.asarray(first["images"]), np.asarray(first["true_masks"])
    for label, sample in samples.items():
        if not np.array_equal(np.asarray(sample["true_masks"]), truth):
            raise ValueError(f"samples of {label!r} are other test images than those of the first loss")
    n_images = min(n_images, images.shape[0])
    num_classes = len(class_names)
    cmap = _mask_colors(num_classes)
    columns = ["image", "ground truth", *samples]
    figure, axes = new_figure(n_images, len(columns), height=1.45 * n_images + 0.9)
    for row in range(n_images):
        picture = _displayable(images[row])
        masks = [None, truth[row]] + [np.asarray(sample["predicted_masks"])[row] for sample in samples.values()]
        for column, (title, mask) in enumerate(zip(columns, masks)):
            ax = axes[row, column]
            ax.imshow(picture, cmap="gray" if picture.ndim == 2 else None, interpolation="nearest")
            if mask is not None:
                shown = np.ma.masked_where(mask == BACKGROUND, mask)
                ax.imshow(shown, cmap=cmap, vmin=0, vmax=num_classes - 1, alpha=0.6, interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([])
            if row == 0:
                ax.set_title(title, fontsize=8)
    handles = [_patch(cmap(k), name) for k, name in enumerate(class_names) if k != BACKGROUND]
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6), fontsize=8, frameon=False)
    paper_title(figure, "test images, true masks and each loss's prediction", "hossain2021 Figs 3-6")
    return figure


def _patch(color, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, label=label)


def _displayable(image: np.ndarray) -> np.ndarray:
    """(C, H, W) → (H, W) or (H, W, 3) in [0, 1] for imshow (min-max scaled per image)."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 3:
        raise ValueError(f"images must be (N, C, H, W), got an image of shape {image.shape}")
    image = image[0] if image.shape[0] == 1 else np.moveaxis(image[:3], 0, -1)
    low, high = image.min(), image.max()
    return (image - low) / (high - low) if high > low else np.zeros_like(image)

