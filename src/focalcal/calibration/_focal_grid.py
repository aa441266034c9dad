"""Validation scores of Ψ^γ(softmax(z / T)) for a whole (γ, T) grid, without forming Ψ.

Focal temperature scaling (komisarenko2024 §4.2) scores every pair (γ, T) of a grid — the
paper's is 9 × 500. Two facts make that cheap:

* Ψ^γ keeps the arg max (charoenphakdee2021 Prop 12 for γ ≥ 0; for −1 < γ < 0, h^γ(v) >
  h^γ(w) whenever v > w and v + w ≤ 1, which a test checks on a dense grid), so which
  samples are right is fixed across the grid. ECE needs only the top-label confidence
  Ψ_top and NLL only the label's entry Ψ_y — both one number per sample once the row
  normaliser Σ_j h^γ(q_j) is known.
* With q = softmax(z/T), ρ_j = q_j (−log q_j) / (1 − q_j) ∈ (0, 1] and ℓ = log(1 − q),
  log h^γ(q_j) = log q_j − γ ℓ_j − log1p(γ ρ_j) (see :mod:`focalcal.theory`). Relative to
  the top class, h_j / [q_top (1 − q_top)^(−γ)] = exp(x_j) / (1 + γ ρ_j) with
  x_j = d_j − γ (ℓ_j − ℓ_top) and d_j = log q_j − log q_top = (z_j − z_top) / T.
  Everything that does not depend on γ (d, ℓ, ρ) is computed once per T; per γ only a
  multiply-add, one exp, one reciprocal, a multiply and a row sum remain, for a whole block
  of (γ, T) pairs at a time in torch (multithreaded).

Exactness near one-hot rows: for the top class, 1 − q_top = e^R / (1 + e^R) with R the
logsumexp of the other classes' d, so ℓ_top = R − softplus(R) and ρ_top =
softplus(R) e^(−R) are exact even when q_top rounds to 1. Terms below e^(−80) of the top
class's are set to e^(−80) before ``exp`` (they cannot change a float64 sum, and exp of
very negative arguments takes a slow path that would dominate the run time).

``dtype="float32"`` (default) is accurate to a few 1e-7 in the scores (tests compare it with
float64); pass ``"float64"`` for full precision. In float32 the same formulas run in a fused C
kernel where it is built (``kernels/focal_grid.c``, loaded by :mod:`._grid_kernel` with ctypes,
so the fit imports no torch: one sample's classes stay in cache across its γ and T, where the
torch path streams (γ, T, rows, K) buffers through memory once per operation, so the γ-free terms
of each (sample, T) — two exps and a log1p per class — take most of its time; measured speed-up in
bench/RESULTS.md); the torch path below is the reference it is tested against, and runs where no
build exists. The two float32 paths' grid scores agree within 1e-6 (ECE absolute, NLL relative;
on the 5,000 × 100 bench case 3e-9 and 4e-9) and pick the same (γ, T)
(tests/test_calibration_temperature.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from focalcal.core.validation import check_gamma_grid

if TYPE_CHECKING:
    import torch

# exp(-80) ≈ 1.8e-35: a floor for terms relative to the largest one in a row sum.
_LOG_FLOOR = -80.0


class _RowChunk(NamedTuple):
    """γ- and T-independent pieces of a block of rows, computed once per fit."""

    rows: slice
    centred: torch.Tensor  # (n, K) z − z_top: ≤ 0, exactly 0 at the top class
    others: torch.Tensor  # (n, K) z − z_second, −inf at the top class
    second: torch.Tensor  # (n,) z_second − z_top ≤ 0
    top_index: torch.Tensor  # (n, 1)
    label_index: torch.Tensor  # (n, 1)
    lowest: float  # min of centred


def _row_chunks(z: torch.Tensor, y: torch.Tensor, dtype, rows_per_chunk: int) -> list[_RowChunk]:
    top = z.argmax(dim=1, keepdim=True)
    centred = z - z.gather(1, top)
    masked = centred.scatter(1, top, float("-inf"))
    second = masked.amax(dim=1, keepdim=True)
    chunks = []
    for start in range(0, z.shape[0], rows_per_chunk):
        rows = slice(start, min(start + rows_per_chunk, z.shape[0]))
        chunks.append(
            _RowChunk(
                rows=rows,
                centred=centred[rows].to(dtype),
                others=(masked[rows] - second[rows]).to(dtype),
                second=second[rows, 0].to(dtype),
                top_index=top[rows],
                label_index=y[rows].unsqueeze(1),
                lowest=float(centred[rows].min()),
            )
        )
    return chunks


def _per_temperature_terms(chunk: _RowChunk, betas: torch.Tensor):
    """d, ℓ − ℓ_top and ρ (ρ_top in the top class's column), each (n_T, n, K), and ℓ_top (n_T, n),
    for a block of 1/T."""
    import torch

    n_temps, (n, _) = betas.shape[0], chunk.centred.shape
    top_index = chunk.top_index.unsqueeze(0).expand(n_temps, n, 1)
    b = betas.view(-1, 1, 1)
    d = chunk.centred * b
    # R = log Σ_{j≠top} e^{d_j}, shifted by the largest of those terms, so it is exact however small.
    log_rest = torch.outer(betas, chunk.second) + (chunk.others * b).clamp_min_(_LOG_FLOOR).exp_().sum(dim=2).log_()
    log_norm = torch.nn.functional.softplus(log_rest)  # log Σ_j e^{d_j} = log(1 + e^R)
    log_one_minus_top = log_rest - log_norm  # ℓ_top = log(1 − q_top)
    # ρ_top = softplus(R) e^{−R}; below R = −30 its series 1 − e^R / 2 (the other branch may overflow).
    top_rho = torch.where(log_rest < -30, 1 - 0.5 * torch.exp(log_rest), log_norm * torch.exp(-log_rest))

    log_q = d - log_norm.unsqueeze(2)
    q = log_q.clamp_min(_LOG_FLOOR).exp_()
    one_minus_q = torch.rsub(q, 1.0)
    rho = q.mul_(log_q).div_(one_minus_q).neg_()  # q (−log q) / (1 − q)
    rho.scatter_(2, top_index, top_rho.unsqueeze(2))
    relative_log_one_minus = one_minus_q.log_().sub_(log_one_minus_top.unsqueeze(2))
    relative_log_one_minus.scatter_(2, top_index, 0.0)
    return d, relative_log_one_minus, rho, log_one_minus_top


QUANTITIES = ("confidence", "log_psi_label", "both")


def _dtype_name(dtype) -> str:
    """"float32" or "float64", from a name or a torch dtype (named so that callers need no torch)."""
    name = str(dtype).removeprefix("torch.")
    if name not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return name


def focal_grid_blocks(
    logits, labels, gammas, temperatures, quantity="confidence", *, dtype="float32", max_block_elements=2**21,
    wanted=None,
):
    """Yield (temperature slice, values) for consecutive blocks of the temperature grid.

    ``values``, a numpy array of ``dtype``, has shape (n_gamma, n_T in block, N): for ``quantity="confidence"`` the
    top-label probability max_k Ψ^γ_k(softmax(z/T)), for ``"log_psi_label"`` log Ψ^γ_y; for
    ``"both"`` it is the pair (confidence, log_psi_label), from one pass.
    ``logits`` (N, K) and ``labels`` (N,) are numpy arrays. Work is split over T and then over
    samples so that the (n_gamma, n_T, rows, K) work buffers hold at most
    ``max_block_elements`` entries: big enough that per-operation overhead is small, small
    enough to stay in cache. ``wanted`` (n_gamma, n_T) bool: only those pairs are needed (NaN
    at the others); the compiled kernel then computes only them, each as it would in the whole
    grid, and a temperature's γ-free terms once for all its wanted γ.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    gammas = check_gamma_grid(gammas, "focal_grid_blocks")
    dtype = _dtype_name(dtype)
    temperatures = np.asarray(temperatures, dtype=np.float64)
    if wanted is not None:
        wanted = np.asarray(wanted, dtype=bool)
        if wanted.shape != (len(gammas), len(temperatures)):
            raise ValueError(f"wanted must have shape (n_gamma, n_T) = {(len(gammas), len(temperatures))}, "
                             f"got {wanted.shape}")
    if dtype == "float32" and _grid_kernel() is not None:
        yield from _kernel_blocks(np.asarray(logits, dtype=np.float64), np.asarray(labels, dtype=np.int64), gammas,
                                  temperatures, quantity, max_block_elements, wanted)
        return
    for temps, values in _torch_blocks(logits, labels, gammas, temperatures, quantity, dtype, max_block_elements):
        if wanted is not None:
            for array in (values if quantity == "both" else (values,)):
                array[~wanted[:, temps]] = np.nan
        yield temps, values


def _torch_blocks(logits, labels, gammas, temperatures, quantity, dtype, max_block_elements):
    """``focal_grid_blocks`` by the torch reference path."""
    from focalcal.core.extras import require

    torch = require("torch", "focal temperature scaling in float64, or without its compiled grid kernel,")

    dtype = getattr(torch, dtype)
    z = torch.as_tensor(np.asarray(logits, dtype=np.float64))
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    (n, n_classes), n_gammas = z.shape, len(gammas)
    gamma = torch.as_tensor(gammas, dtype=dtype).view(-1, 1, 1, 1)
    max_positive_gamma = max(float(gammas.max()), 0.0)

    rows_per_chunk = max(1, min(n, max_block_elements // (n_gammas * n_classes)))
    rows_per_chunk = -(-n // -(-n // rows_per_chunk))  # equal chunks rather than a small remainder
    temps_per_block = max(1, min(len(temperatures), max_block_elements // (n_gammas * rows_per_chunk * n_classes)))
    chunks = _row_chunks(z, y, dtype, rows_per_chunk)
    # Reused work buffers: fresh multi-megabyte tensors per block would cost page faults.
    block_size = n_gammas * temps_per_block * rows_per_chunk * n_classes
    buffers = [torch.empty(block_size, dtype=dtype) for _ in range(2)]
    ones = torch.ones(1, 1, rows_per_chunk, n_classes, dtype=dtype)  # addcmul is slow with a 0-d input

    for start in range(0, len(temperatures), temps_per_block):
        stop = min(start + temps_per_block, len(temperatures))
        betas = torch.as_tensor(1.0 / temperatures[start:stop], dtype=dtype)
        wanted = ("confidence", "log_psi_label") if quantity == "both" else (quantity,)
        values = {name: torch.empty(n_gammas, stop - start, n, dtype=dtype) for name in wanted}
        for chunk in chunks:
            d, rel_log_one_minus, rho, log_one_minus_top = _per_temperature_terms(chunk, betas)
            shape = (n_gammas, *d.shape)
            x, denominator = (buffer[: np.prod(shape)].view(shape) for buffer in buffers)
            # x = d − γ (ℓ − ℓ_top); h_j ∝ exp(x_j) / (1 + γ ρ_j); the top class has x = 0.
            torch.addcmul(d.unsqueeze(0), gamma, rel_log_one_minus.unsqueeze(0), value=-1.0, out=x)
            # 0 <= ℓ − ℓ_top <= −ℓ_top bounds x from below; the floor is applied only where needed.
            lowest_x = chunk.lowest * float(betas.max()) + max_positive_gamma * float(log_one_minus_top.min())
            if lowest_x < _LOG_FLOOR:
                x.clamp_min_(_LOG_FLOOR)
            x.exp_().div_(torch.addcmul(ones[:, :, : d.shape[1]], gamma, rho.unsqueeze(0), out=denominator))
            normaliser = x.sum(dim=3)  # Σ_j h_j relative to the top class
            if "confidence" in values:
                # The top term comes from the summed tensor itself, so confidence <= 1 exactly.
                top_term = x.gather(3, chunk.top_index.expand(*shape[:3], 1)).squeeze(3)
                values["confidence"][:, :, chunk.rows] = top_term.div_(normaliser)
            if "log_psi_label" in values:
                index = chunk.label_index.unsqueeze(0).expand(d.shape[0], -1, 1)
                d_y, rel_y, rho_y = (t.gather(2, index).squeeze(2) for t in (d, rel_log_one_minus, rho))
                gamma3 = gamma.squeeze(-1)
                values["log_psi_label"][:, :, chunk.rows] = (d_y - gamma3 * rel_y - torch.log1p(gamma3 * rho_y)
                                                             - normaliser.log_())
        values = {name: value.numpy() for name, value in values.items()}
        yield slice(start, stop), (values[quantity] if quantity != "both" else
                                   (values["confidence"], values["log_psi_label"]))


def _grid_kernel():
    """The compiled grid kernel (:mod:`._grid_kernel`), or None (switched off, or no build: the torch path runs)."""
    from focalcal.calibration import _grid_kernel

    return _grid_kernel if _grid_kernel.library() is not None else None


def _kernel_blocks(z: np.ndarray, y: np.ndarray, gammas, temperatures, quantity, max_block_elements, wanted=None):
    """``focal_grid_blocks`` by the compiled kernel, in blocks of T whose outputs hold at most
    ``max_block_elements`` (γ, T, sample) entries each."""
    rows = np.arange(z.shape[0])
    top = z.argmax(axis=1)
    centred = z - z[rows, top][:, None]
    others = centred.copy()
    others[rows, top] = -np.inf
    second = others.max(axis=1)
    centred32 = centred.astype(np.float32)
    temps_per_block = max(1, min(len(temperatures), max_block_elements // (len(gammas) * z.shape[0])))
    for start in range(0, len(temperatures), temps_per_block):
        stop = min(start + temps_per_block, len(temperatures))
        betas = (1.0 / temperatures[start:stop]).astype(np.float32)
        confidence, log_psi_label = _grid_kernel().focal_grid(centred32, second, top, y, gammas, betas,
                                                              None if wanted is None else wanted[:, start:stop])
        values = {"confidence": confidence, "log_psi_label": log_psi_label, "both": (confidence, log_psi_label)}
        yield slice(start, stop), values[quantity]


#: The searches :func:`focal_grid_scores` offers: ``"grid"`` scores every (γ, T) pair (the papers'
#: procedure); ``"refine"`` scores every γ at every ``COARSE_STRIDE``-th temperature of the sorted
#: grid, then per γ every temperature within ``COARSE_STRIDE`` − 1 steps of its
#: ``REFINE_AROUND[objective]`` best coarse ones: about a third of the pairs. NLL is smooth and
#: unimodal in T, so one is enough; equal-mass ECE jumps between neighbouring temperatures, so two.
#: On 112 seeded problems (3 to 100 classes, 300 to 5,000 samples, over- and underconfident) the
#: refined search picked the whole grid's pair for NLL in all, and for ECE in 109, whose three others
#: had a validation ECE at most 1.4e-3 above the grid's minimum (one of the tests' problems: 1.7e-3);
#: its stated tolerance is 2e-3 (tests/test_focal_grid_search.py).
SEARCHES = ("grid", "refine")
COARSE_STRIDE = 10
REFINE_AROUND = {"ece": 2, "nll": 1}


class _ScoreTable:
    """Both objectives' scores of the (γ, T) pairs scored so far on one problem (NaN elsewhere):
    fitting focal TS by ECE and then by NLL on the same validation logits (the workflow's and
    `focalcal calibrate`'s pairs) scores each pair once."""

    def __init__(self, logits, labels, gammas, temperatures, n_bins, binning, dtype):
        self.logits, self.labels = logits, labels
        self.gammas, self.temperatures, self.n_bins, self.binning, self.dtype = gammas, temperatures, n_bins, binning, dtype
        self.correct = logits.argmax(axis=1) == labels
        self.scores = {name: np.full((len(gammas), len(temperatures)), np.nan) for name in ("ece", "nll")}

    def complete(self) -> bool:
        return not np.isnan(self.scores["ece"]).any()

    def score(self, wanted: np.ndarray) -> None:
        """Score the pairs ``wanted`` (n_gamma, n_T) bool marks that are not scored yet, in one pass:
        each temperature's γ-free terms once for all the γ that want it."""
        from focalcal.metrics.batched import ece_grid

        wanted = wanted & np.isnan(self.scores["ece"])
        gamma_index, temperature_index = np.flatnonzero(wanted.any(axis=1)), np.flatnonzero(wanted.any(axis=0))
        if temperature_index.size == 0:
            return
        wanted = wanted[np.ix_(gamma_index, temperature_index)]
        gammas, temperatures = self.gammas[gamma_index], self.temperatures[temperature_index]
        for temps, (confidence, log_psi_label) in focal_grid_blocks(
                self.logits, self.labels, gammas, temperatures, "both", dtype=self.dtype,
                wanted=None if wanted.all() else wanted):
            block_g, block_t = np.nonzero(wanted[:, temps])  # the block's wanted pairs
            pairs = gamma_index[block_g], temperature_index[temps][block_t]
            self.scores["ece"][pairs] = ece_grid(confidence[block_g, block_t], self.correct, n_bins=self.n_bins,
                                                 binning=self.binning)
            self.scores["nll"][pairs] = -log_psi_label[block_g, block_t].astype(np.float64).mean(axis=1)


# The last problem's table.
_LAST_SCORES: dict[str, _ScoreTable] = {}


def forget_kept_scores() -> None:
    """Drop the kept table, so the next fit scores from nothing (a forked process starts as a fresh one)."""
    _LAST_SCORES.clear()


def focal_grid_scores(logits, labels, gammas, temperatures, objective, *, n_bins=15, binning="mass", dtype="float32",
                      search="grid"):
    """(n_gamma, n_T) validation ECE or NLL of Ψ^γ(softmax(z / T)) over the grid (``search="grid"``),
    or over the pairs a coarse-to-fine search scores (``"refine"``, :data:`SEARCHES`; NaN at the others).

    Both objectives come from one pass over the pairs scored (the per-(γ, T) work they share is most
    of it), and the last problem's scores are kept, keyed by a digest of everything they depend on.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    gammas = check_gamma_grid(gammas, "focal_grid_scores")
    dtype = _dtype_name(dtype)
    logits, labels = np.asarray(logits), np.asarray(labels)
    temperatures = np.asarray(temperatures, dtype=np.float64)
    key = _digest(logits, labels, gammas, temperatures, n_bins, binning, dtype)
    table = _LAST_SCORES.get(key)
    if table is None or (search == "grid" and not table.complete()):
        # the whole grid in one pass, whatever was scored before: each score as the papers' grid gives it
        table = _ScoreTable(logits, labels, gammas, temperatures, n_bins, binning, dtype)
        _LAST_SCORES.clear()
        _LAST_SCORES[key] = table
    pairs = np.ones((len(gammas), len(temperatures)), dtype=bool)
    if search == "grid":
        table.score(pairs)
    else:
        order = np.argsort(temperatures, kind="stable")
        coarse = np.arange(min(COARSE_STRIDE, len(order)) - 1, len(order), COARSE_STRIDE)  # positions in ``order``
        pairs[:] = False
        pairs[:, order[coarse]] = True
        table.score(pairs)
        pairs[:] = False
        for g in range(len(gammas)):  # each γ's refinement from its own coarse scores: all scored in one pass
            best = coarse[np.argsort(table.scores[objective][g, order[coarse]], kind="stable")[:REFINE_AROUND[objective]]]
            for p in best:
                pairs[g, order[max(0, p - COARSE_STRIDE + 1):min(len(order), p + COARSE_STRIDE)]] = True
        table.score(pairs)
    return table.scores[objective].copy()


def _digest(logits, labels, gammas, temperatures, n_bins, binning, dtype) -> str:
    import hashlib

    digest = hashlib.sha256()
    for array in (logits, labels, gammas, temperatures):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    digest.update(f"{n_bins}|{binning}|{dtype}".encode())
    return digest.hexdigest()
