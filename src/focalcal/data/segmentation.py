"""Synthetic imbalanced segmentation: small shapes on a textured background, from a seed.

hossain2021 studies losses for class-imbalanced segmentation (their MRI prostate set has
about 15 background pixels per prostate pixel, CamVid about 6:1 between its big and small
classes). This set reproduces that regime offline in well under a second, with the
background:foreground pixel ratio as a knob.

How an image is made (all images at once, vectorised over images and shapes):

* Background: mid-grey plus smooth noise (Gaussian noise on a coarse 5×5 grid, bilinearly
  upsampled) at two scales, so local brightness varies as much as the class contrast.
* Foreground: the image is cut into a 2×2 grid of cells; each cell holds, with probability
  ``CELL_OCCUPANCY`` (raised towards 1 when the requested foreground needs it), one shape
  of a random foreground class, placed at random inside its
  cell (shapes never overlap or leave their cell). Class k is a disc, a rotated rectangle
  or a rotated equilateral triangle (k = 1, 2, 3, then repeating), with its own colour and
  stripe texture. Shape areas vary ±20 % around the size that gives the requested ratio.
* Then everything is blurred a little (soft edges) and pixel noise is added, so that the
  boundary pixels and the faint shapes are genuinely uncertain.

The realised ratio is measured after rasterising and every shape is rescaled once so the
ratio over the whole set matches the request (within about 1 % for the defaults); the
realised class pixel frequencies are returned in ``RawData.info`` (and so in the loaded
dataset's ``meta``).
"""

from __future__ import annotations

import numpy as np

from ._dataset import RawData

IGNORE_INDEX = 255  # mask value of pixels that no loss or metric counts (CamVid's "void")

GRID = 2  # cells per image side; one shape at most per cell
CELL_OCCUPANCY = 0.75  # probability that a cell holds a shape, unless more shapes are needed
SCALE_RANGE = (0.8, 1.2)  # linear size jitter of a shape around the nominal size
RECTANGLE_ASPECT_RANGE = (0.6, 1.0)  # short side / long side
SHAPE_NAMES = ("disc", "rectangle", "triangle")
BACKGROUND_LEVEL = 0.45
COLOUR_CONTRAST = 0.15  # distance of a class colour from the background level
STRIPE_AMPLITUDE = 0.06
PIXEL_NOISE = 0.05
EDGE_BLUR_SIGMA = 0.7  # pixels

# Circumradius of a shape of unit area: the shape must fit in its cell whatever its rotation.
_UNIT_CIRCUMRADIUS = {
    "disc": np.sqrt(1 / np.pi),
    "rectangle": np.sqrt(1 / RECTANGLE_ASPECT_RANGE[0] + RECTANGLE_ASPECT_RANGE[0]) / 2,  # at the narrowest aspect
    "triangle": np.sqrt(4 / (3 * np.sqrt(3))),
}


def class_colours(num_classes: int) -> np.ndarray:
    """(num_classes, 3) RGB levels: background grey, then one hue per foreground class."""
    hues = 2 * np.pi * np.arange(num_classes - 1) / max(num_classes - 1, 1)
    # Unit directions in the chroma plane (orthogonal to grey), so every class differs from grey by the same amount.
    axis_a, axis_b = np.array([2.0, -1.0, -1.0]) / np.sqrt(6), np.array([0.0, 1.0, -1.0]) / np.sqrt(2)
    directions = np.cos(hues)[:, None] * axis_a + np.sin(hues)[:, None] * axis_b
    foreground = BACKGROUND_LEVEL + COLOUR_CONTRAST * directions * np.sqrt(3)
    return np.vstack([np.full(3, BACKGROUND_LEVEL), foreground])


def _interpolation_matrix(coarse: int, fine: int) -> np.ndarray:
    """(fine, coarse) weights of linear interpolation from a coarse grid onto a fine one."""
    position = np.linspace(0, coarse - 1, fine)
    lower = np.minimum(np.floor(position).astype(np.int64), coarse - 2)
    weight = position - lower
    matrix = np.zeros((fine, coarse))
    matrix[np.arange(fine), lower] = 1 - weight
    matrix[np.arange(fine), lower + 1] = weight
    return matrix


def smooth_noise(rng: np.random.Generator, shape: tuple[int, ...], size: int, coarse: int) -> np.ndarray:
    """Standard-normal noise on a ``coarse``×``coarse`` grid, bilinearly upsampled to ``size``×``size``
    (float32; two large matrix products rather than many small batched ones)."""
    matrix = _interpolation_matrix(coarse, size).astype(np.float32)
    grid = rng.standard_normal((*shape, coarse, coarse), dtype=np.float32)
    columns = grid @ matrix.T  # (..., coarse, size): one GEMM over all rows
    return np.moveaxis(np.tensordot(matrix, columns, axes=(1, -2)), 0, -2)


def _rasterise(kind: np.ndarray, centre: np.ndarray, radius_scale: np.ndarray, angle: np.ndarray,
               aspect: np.ndarray, area: np.ndarray, cell: int) -> np.ndarray:
    """Boolean (S, cell, cell) masks of S shapes in cell-local pixel coordinates (pixel centres)."""
    coords = np.arange(cell, dtype=np.float32) + 0.5
    dy = coords[None, :, None] - centre[:, 0, None, None].astype(np.float32)
    dx = coords[None, None, :] - centre[:, 1, None, None].astype(np.float32)
    cos, sin = np.cos(angle, dtype=np.float32)[:, None, None], np.sin(angle, dtype=np.float32)[:, None, None]
    u, v = cos * dx + sin * dy, -sin * dx + cos * dy  # shape-aligned coordinates
    area = (area * radius_scale**2).astype(np.float32)[:, None, None]
    aspect = aspect.astype(np.float32)
    inside = np.zeros((kind.size, cell, cell), dtype=bool)

    disc = kind == 0
    inside[disc] = (u[disc] ** 2 + v[disc] ** 2) <= area[disc] / np.pi

    rect = kind == 1
    long_side = np.sqrt(area[rect] / aspect[rect, None, None])
    inside[rect] = (np.abs(u[rect]) <= long_side / 2) & (np.abs(v[rect]) <= long_side * aspect[rect, None, None] / 2)

    tri = kind == 2
    inradius = np.sqrt(area[tri] / (3 * np.sqrt(3)))  # equilateral triangle: area = 3√3 r²
    inside_tri = np.ones_like(u[tri], dtype=bool)
    for normal_angle in (np.pi / 2, np.pi / 2 + 2 * np.pi / 3, np.pi / 2 + 4 * np.pi / 3):  # its three sides
        inside_tri &= u[tri] * np.cos(normal_angle) + v[tri] * np.sin(normal_angle) <= inradius
    inside[tri] = inside_tri
    return inside


def _cells_to_image(cells: np.ndarray, n: int, size: int) -> np.ndarray:
    """(n, GRID, GRID, c, c, ...) cell contents to (n, size, size, ...), zero-padded when GRID∤size."""
    cell = cells.shape[3]
    tiled = cells.swapaxes(2, 3).reshape(n, GRID * cell, GRID * cell, *cells.shape[5:])
    out = np.zeros((n, size, size, *cells.shape[5:]), dtype=cells.dtype)
    out[:, : GRID * cell, : GRID * cell] = tiled
    return out


def make_synthetic_segmentation(n_samples: int = 240, size: int = 64, num_classes: int = 4, imbalance: float = 15.0,
                                data_seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict]:
    """Images float32 (N, 3, size, size) in [0, 1], masks int64 (N, size, size), and a summary.

    ``imbalance`` is the background:foreground pixel ratio over the whole set (foreground =
    all classes but 0). The summary holds the realised ratio and class pixel frequencies.
    """
    _check_int(n_samples, "n_samples", 1)
    _check_int(size, "size", 16)
    _check_int(num_classes, "num_classes", 2)
    if num_classes > IGNORE_INDEX:
        raise ValueError(f"num_classes must be at most {IGNORE_INDEX}, got {num_classes}")
    if isinstance(imbalance, bool) or not isinstance(imbalance, (int, float, np.integer, np.floating)) or not imbalance > 0:
        raise ValueError(f"imbalance (background:foreground pixel ratio) must be a positive number, got {imbalance!r}")
    rng = np.random.default_rng(data_seed)
    n, cell = int(n_samples), size // GRID
    shapes = (n, GRID, GRID)

    # Sizes: the largest shape (a triangle, or a rectangle at its narrowest, at the top of the
    # scale range) must fit its cell whatever its rotation.
    foreground_fraction = 1.0 / (1.0 + float(imbalance))
    mean_square_scale = (SCALE_RANGE[0] ** 2 + SCALE_RANGE[0] * SCALE_RANGE[1] + SCALE_RANGE[1] ** 2) / 3
    room = cell / 2 - 1  # the circumcircle stays a pixel inside the cell
    largest_area = (room / (SCALE_RANGE[1] * max(_UNIT_CIRCUMRADIUS.values()))) ** 2
    area_per_cell = foreground_fraction * size * size / (GRID * GRID * mean_square_scale)  # = occupancy * area
    occupancy = min(1.0, max(CELL_OCCUPANCY, area_per_cell / largest_area))
    nominal_area = area_per_cell / occupancy
    if nominal_area > largest_area:
        most = largest_area * GRID * GRID * mean_square_scale / size**2
        raise ValueError(f"imbalance={imbalance} asks for {foreground_fraction:.1%} foreground pixels; non-overlapping "
                         f"shapes cover at most {most:.1%} (imbalance >= {1 / most - 1:.2f})")

    # Shape parameters, drawn in a fixed order so the set depends on the arguments only.
    occupied = rng.random(shapes) < occupancy
    label = rng.integers(1, num_classes, size=shapes)
    radius_scale = rng.uniform(*SCALE_RANGE, size=shapes)
    angle = rng.uniform(0, 2 * np.pi, size=shapes)
    aspect = rng.uniform(*RECTANGLE_ASPECT_RANGE, size=shapes)
    offset = rng.uniform(-1, 1, size=(*shapes, 2))
    kind = (label - 1) % len(SHAPE_NAMES)
    unit_radius = np.array([_UNIT_CIRCUMRADIUS[name] for name in SHAPE_NAMES])[kind]

    def rasterise(area: float) -> np.ndarray:
        radius = radius_scale * unit_radius * np.sqrt(area)
        centre = cell / 2 + offset * np.maximum(room - radius, 0.0)[..., None]
        inside = _rasterise(kind[occupied], centre[occupied], radius_scale[occupied], angle[occupied],
                            aspect[occupied], np.full(int(occupied.sum()), area), cell)
        cells = np.zeros((*shapes, cell, cell), dtype=np.uint8)  # num_classes <= 255
        cells[occupied] = np.where(inside, label[occupied][:, None, None], 0)
        return _cells_to_image(cells, n, size)

    masks = rasterise(nominal_area)
    realised = np.count_nonzero(masks) / masks.size
    if realised > 0:  # one rescale corrects the rasterisation bias of small shapes
        corrected = nominal_area * foreground_fraction / realised
        if corrected <= largest_area:
            masks = rasterise(corrected)

    images = _paint(masks, num_classes, rng)
    masks = masks.astype(np.int64)
    counts = np.bincount(masks.ravel(), minlength=num_classes)
    foreground = counts[1:].sum()
    summary = {
        "class_pixel_frequency": (counts / counts.sum()).tolist(),
        "imbalance_requested": float(imbalance),
        "imbalance_realised": float(counts[0] / foreground) if foreground else float("inf"),
        "shapes": {k: SHAPE_NAMES[(k - 1) % len(SHAPE_NAMES)] for k in range(1, num_classes)},
    }
    return images, masks, summary


def _paint(masks: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Textured background, class colours with stripes, soft edges and pixel noise."""
    n, size = masks.shape[0], masks.shape[1]
    background = (BACKGROUND_LEVEL + 0.10 * smooth_noise(rng, (n, 3), size, 5)
                  + 0.04 * smooth_noise(rng, (n, 1), size, 13))
    # Each class's look on the whole pixel grid, (K, 3, size, size): its colour plus stripes
    # of its own period (3-6 px) and orientation; the background has no stripes.
    period = 3.0 + 3.0 * np.arange(num_classes) / max(num_classes - 1, 1)
    orientation = np.pi * np.arange(num_classes) / num_classes
    grid = np.arange(size)
    phase = (grid[None, None, :] * np.cos(orientation)[:, None, None]
             + grid[None, :, None] * np.sin(orientation)[:, None, None]) / period[:, None, None]
    stripes = STRIPE_AMPLITUDE * np.sin(2 * np.pi * phase) * (np.arange(num_classes) > 0)[:, None, None]
    looks = (class_colours(num_classes)[:, :, None, None] + stripes[:, None]).astype(np.float32)
    rows, cols = grid[:, None], grid[None, :]
    foreground = looks[masks, :, rows, cols]  # (n, size, size, 3): one gather
    image = np.where((masks > 0)[:, None], np.moveaxis(foreground, -1, 1), background)
    from scipy.ndimage import gaussian_filter  # here: the data catalog's importers (every training job) skip it

    image = gaussian_filter(image, sigma=(0, 0, EDGE_BLUR_SIGMA, EDGE_BLUR_SIGMA), mode="nearest")
    image += PIXEL_NOISE * rng.standard_normal(image.shape, dtype=np.float32)
    return np.clip(image, 0.0, 1.0, out=image)


def _check_int(value, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def load_synthetic_segmentation(root, download: bool, *, n_samples: int = 240, size: int = 64, num_classes: int = 4,
                                imbalance: float = 15.0, data_seed: int = 0) -> RawData:
    """The registry loader of :func:`make_synthetic_segmentation`; nothing touches the disk."""
    images, masks, summary = make_synthetic_segmentation(n_samples, size, num_classes, imbalance, data_seed)
    names = ["background"] + [f"{summary['shapes'][k]} {k}" for k in range(1, num_classes)]
    return RawData(pools={"all": (images, masks)}, class_names=names, num_classes=int(num_classes),
                   info={"ignore_index": IGNORE_INDEX, **summary})
