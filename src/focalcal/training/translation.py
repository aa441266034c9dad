"""Training a translation run (mukhoti2020 §5.2) through the one training loop.

:class:`TranslationTrainer` is a :class:`~focalcal.training.trainer.Trainer`: the same epochs,
checkpoint, resume, early stopping, health and records; it differs in what a batch and an
evaluation are. A batch is a set of sentence pairs of about ``recipe.max_tokens`` tokens
(Vaswani et al. 2017 §5.1; :func:`focalcal.data.translation.token_batches`), trained by
teacher forcing: the decoder reads ``BOS + y`` and is scored on ``y + EOS``. The loss is the
run's loss from the loss registry on every target token at once, (tokens, vocabulary) logits
against token ids, with the padded positions given the target :data:`TOKEN_IGNORE_INDEX`, which
every loss leaves out; its ``"mean"`` reduction is the mean over the batch's real (non-pad)
target tokens, the per-token mean that Vaswani et al.'s / fairseq's token-normalised loss is.
The history's ``train_loss``, ``*_nll``, ``*_error`` and ``*_ece`` are per target token too.

The export is ``token_logits.npz`` (:mod:`focalcal.translation.token_profile`), written a few
sentences at a time, so its memory stays bounded at paper scale.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from focalcal import metrics
from focalcal.data.text import TOKEN_IGNORE_INDEX
from focalcal.files.artefacts import atomic_write_json
from focalcal.training.averaging import CheckpointAverage
from focalcal.training.device import choose_device, epoch_seed, seed_everything
from focalcal.training.diagnostics import weight_norm
from focalcal.training.factories import (
    build_embedding_optimizer,
    build_loss,
    build_model,
    build_optimizer,
    build_scheduler,
    load_dataset,
)
from focalcal.training.health import assess_health
from focalcal.training.progress import Progress
from focalcal.training.run_files import RunPaths, token_logits_record
from focalcal.training.step import (
    CAPTURED_MODES,
    EpochTotals,
    TrainStep,
    descended,
    optimizer_options,
    plan_compile,
)
from focalcal.training.trainer import Trainer, steps_per_batch

ECE_BINS = 15  # the history's per-token ECE: equal-width bins, as mukhoti2020 for tokens


class TokenTotals(EpochTotals):
    """:class:`EpochTotals` over target tokens: a batch's mean loss counts once per real token,
    so the epoch's ``loss_sum`` is the sum over its tokens (the base weighs it by rows, which
    here include the padding)."""

    @staticmethod
    def rows(targets: torch.Tensor, ignore_index: int) -> torch.Tensor:
        return (targets != ignore_index).sum()


class TranslationTrainer(Trainer):
    """Train one translation run; :meth:`export_logits` writes ``token_logits.npz``."""

    def __init__(self, config, run_dir, data_root="data", progress: bool | None = None):
        from focalcal.data.translation import PAD_ID

        self.config = config
        self.paths = RunPaths(Path(run_dir))
        self.data_root = Path(data_root)
        self.progress = progress
        self.setup = choose_device(config.device)
        seed_everything(config.seed)
        self.dataset = load_dataset(config, self.data_root)
        self.corpus = self.dataset.corpus
        self.pad_id = PAD_ID
        self.vocab_size = self.dataset.num_classes
        device = self.setup.device
        self.model = build_model(config, self.dataset)
        self.model.to(device)
        self.setup = self.setup.for_architecture(config.model["name"], image_batches=False)
        plan = plan_compile(config.compile, device, config.recipe.optimizer.name)
        if plan.mode in CAPTURED_MODES:  # a CUDA graph replays one shape; token batches vary in shape
            plan = type(plan)(plan.requested, "none", "token batches vary in shape; the step ran eagerly")
        self.compile_plan = plan
        self.forward = torch.compile(self.model, dynamic=True) if plan.mode == "default" else self.model
        self.ignore_index = TOKEN_IGNORE_INDEX
        self.loss_fn = build_loss(config, SimpleNamespace(meta={"ignore_index": TOKEN_IGNORE_INDEX}))
        self.loss_fn.to(device)
        self._check_token_ids()
        self.loss_fn.validate_inputs = False  # every id checked once above
        self.optimizer = build_optimizer(self.model, config, **optimizer_options(
            config.recipe.optimizer.name, device, plan.mode))
        self.embedding_optimizer = build_embedding_optimizer(self.model, config)
        self.scheduler = build_scheduler(self.optimizer, config)
        self.step = TrainStep(self.model, self._token_logits, lambda logits, targets: self.loss_fn(logits, targets),
                              self.optimizer, self.objective, self.setup.autocast_dtype,
                              grad_clip_norm=config.recipe.grad_clip_norm, ignore_index=TOKEN_IGNORE_INDEX, plan=plan,
                              device=device, embedding_optimizer=self.embedding_optimizer)
        self.step.totals = TokenTotals(device)
        self.history, self.reliability, self.gradient_norms = [], [], []
        self._tables_written = {}
        self.epochs_done = 0
        self.stopped_early = False
        self.finished_at = None
        self.best = {"epoch": 0, "val_loss": float("inf"), "val_error": float("inf"), "model": None}
        self.health = None
        self.averaging = CheckpointAverage.for_recipe(config.recipe)

    # ------------------------------------------------------------------ batches
    def _check_token_ids(self) -> None:
        """Every token id of the corpus is a vocabulary id (once, so the loss need not check each batch)."""
        check_token_ids(self.corpus, self.vocab_size, self.config.dataset["name"], ("train", "val", "test"))

    def _token_logits(self, inputs) -> torch.Tensor:
        """The model's logits of a teacher-forced batch, one row per target position (B·T, V)."""
        source, target_in = inputs
        logits = self.forward(source, target_in)
        return logits.reshape(-1, logits.shape[-1])

    def teacher_forcing(self, part, indices) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(source + EOS, BOS + target, target + EOS with padding as TOKEN_IGNORE_INDEX) of the
        sentence pairs ``indices`` of a split, padded and on the device."""
        from focalcal.data.translation import pad_batch

        device = self.setup.device
        sources = [part.source[i] for i in indices]
        targets = [part.target[i] for i in indices]
        source = pad_batch(sources, add_bos=False, add_eos=True).to(device)
        target_in = pad_batch(targets, add_bos=True, add_eos=False).to(device)
        target_out = pad_batch(targets, add_bos=False, add_eos=True).to(device)
        target_out = target_out.masked_fill(target_out == self.pad_id, TOKEN_IGNORE_INDEX)
        return source, target_in, target_out

    def training_batches(self, seed: int) -> list[np.ndarray]:
        """The epoch's batches of training pair indices: about ``recipe.max_tokens`` tokens each
        (token_batches, shuffled by ``seed``), or ``recipe.batch_size`` pairs of a seeded shuffle."""
        from focalcal.data.translation import token_batches

        recipe, part = self.config.recipe, self.corpus.train
        if recipe.max_tokens is not None:
            return token_batches(_lengths(part.source) + 1, _lengths(part.target) + 1, recipe.max_tokens, True, seed)
        order = np.random.default_rng(seed).permutation(len(part.source))
        return [order[i : i + recipe.batch_size] for i in range(0, len(order), recipe.batch_size)]

    def evaluation_batches(self, part) -> list[np.ndarray]:
        """A split's pairs in order, in chunks of at most ``recipe.max_tokens`` padded target
        tokens (or ``recipe.eval_batch_size`` pairs): what bounds an evaluation's logits in memory."""
        recipe = self.config.recipe
        lengths = _lengths(part.target) + 1
        chunks, start, longest = [], 0, 0
        for index, length in enumerate(lengths):
            longest_with = max(longest, int(length))
            size = index - start + 1
            full = (longest_with * size > recipe.max_tokens if recipe.max_tokens is not None
                    else size > recipe.eval_batch_size)
            if full and index > start:
                chunks.append(np.arange(start, index))
                start, longest_with = index, int(length)
            longest = longest_with
        if start < len(lengths):
            chunks.append(np.arange(start, len(lengths)))
        return chunks

    # ------------------------------------------------------------------ loop
    def train_one_epoch(self, epoch: int) -> dict:
        recipe = self.config.recipe
        seed = epoch_seed(self.config.seed, epoch)
        torch.manual_seed(seed)  # dropout
        self.model.train()
        batches = self.training_batches(seed)
        progress = Progress(len(batches), f"epoch {epoch}/{recipe.epochs}", self.progress)
        self.step.begin_epoch()
        per_batch = steps_per_batch(self.config)
        tokens = 0
        if recipe.max_steps is not None:  # the run's last, partial epoch (Vaswani et al.: 100,000 steps in all)
            batches = batches[: recipe.max_steps - self.steps_done]
        for index, indices in enumerate(batches):
            source, target_in, target_out = self.teacher_forcing(self.corpus.train, indices)
            self.step.step((source, target_in), target_out.reshape(-1))
            self.after_step(self.steps_done + index + 1)
            tokens += int((target_out != TOKEN_IGNORE_INDEX).sum())
            if per_batch:
                self.scheduler.step()
            progress.update()
        progress.close()
        totals = self.check_epoch_totals(self.step.end_epoch().read(), epoch, len(batches))
        return {
            "train_loss": totals["loss_sum"] / tokens,
            "train_nll": totals["nll_sum"] / tokens,
            "train_error": 1.0 - totals["correct"] / tokens,
            "train_tokens": int(tokens),
            "steps": int(self.steps_done + len(batches)),
        }

    @property
    def steps_done(self) -> int:
        """Batches trained so far, as the history records them (so a resumed run counts them too)."""
        return int(self.history[-1]["steps"]) if self.history else 0

    @property
    def finished(self) -> bool:
        max_steps = self.config.recipe.max_steps
        return super().finished or (max_steps is not None and self.steps_done >= max_steps)

    def objective(self, loss: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return descended(loss, targets, self.config.recipe.loss_reduction, TOKEN_IGNORE_INDEX)

    @torch.no_grad()
    def split_logits(self, part):
        """Yield (token logits (n, V) float32, labels (n,), sentence index (n,)) of a split's real
        target tokens under teacher forcing, chunk by chunk (:meth:`evaluation_batches`), in eval mode,
        in float32 on every device: the profile's ECE and NLL and the decodes' BLEU come from one precision."""
        self.model.eval()
        for indices in self.evaluation_batches(part):
            source, target_in, target_out = self.teacher_forcing(part, indices)
            logits = self.forward(source, target_in).float()  # float32, as the decodes: no autocast
            keep = target_out != TOKEN_IGNORE_INDEX
            sentence = torch.as_tensor(indices, device=keep.device)[:, None].expand_as(keep)
            yield logits[keep].cpu(), target_out[keep].cpu(), sentence[keep].cpu()

    def evaluate_epoch(self, epoch: int) -> dict:
        """Per split, over its target tokens: the training loss, NLL, error and ECE (15 equal-width bins)."""
        row = {}
        for split in ("val", "test"):
            loss_sum, nll_sum, n = 0.0, 0.0, 0
            confidences, correct = [], []
            for logits, labels, _ in self.split_logits(getattr(self.corpus, split)):
                device_logits, device_labels = logits.to(self.setup.device), labels.to(self.setup.device)
                loss_sum += float(self.loss_fn(device_logits, device_labels)) * len(labels)
                log_p = F.log_softmax(logits.double(), dim=1)
                nll_sum += float(-log_p.gather(1, labels[:, None]).sum())
                top, predicted = log_p.max(dim=1)
                confidences.append(top.exp().numpy())
                correct.append((predicted == labels).numpy())
                n += len(labels)
            confidence, hit = np.concatenate(confidences), np.concatenate(correct)
            row.update({f"{split}_loss": loss_sum / n, f"{split}_nll": nll_sum / n, f"{split}_error": 1.0 - float(hit.mean()),
                        f"{split}_ece": float(metrics.ece_of_confidence(confidence, hit, n_bins=ECE_BINS))})
        return row

    def last_layer_weight_norm(self) -> float:
        """The norm of the output projection (tied to the embeddings): the logits' last layer."""
        return weight_norm(output_layer(self.model))

    @property
    def is_classifier(self) -> bool:
        return False

    @property
    def exports_logits(self) -> bool:
        return True

    @property
    def predicts_training_labels(self) -> bool:
        return False

    @property
    def records_gradient_norms(self) -> bool:
        return False

    # ------------------------------------------------------------------ outputs
    def export_logits(self, to: RunPaths | None = None) -> Path:
        """Write ``token_logits.npz`` (val and test, every target token under teacher forcing:
        :func:`focalcal.translation.token_profile.profile_from_logits`) and ``run.json``, whose
        health is judged on the test tokens' top-1 predictions."""
        from focalcal.translation.token_profile import write_token_profile

        to = to or self.paths
        self.use_final_weights()
        profiles = {split: self.token_profile(split) for split in ("val", "test")}
        write_token_profile(to.token_logits, profiles["val"], profiles["test"])
        test = profiles["test"]
        self.health = assess_health(self.history, test.labels, test.top_index, self.vocab_size,
                                    logits_finite=bool(np.isfinite(test.top_logit).all()),
                                    stopped_early=self.stopped_early)
        atomic_write_json({**self.run_info(), **token_logits_record(to.token_logits)}, to.info)
        return to.token_logits

    def token_profile(self, split: str):
        """The split's :class:`~focalcal.translation.token_profile.TokenProfile` on the token
        temperature grid, built chunk by chunk (memory: one chunk's logits)."""
        from focalcal.translation.token_profile import TOKEN_TEMPERATURES, TokenProfile, profile_from_logits

        return TokenProfile.concatenate(profile_from_logits(logits, labels, sentence, TOKEN_TEMPERATURES)
                                        for logits, labels, sentence in self.split_logits(getattr(self.corpus, split)))

    def split_sizes(self) -> dict[str, int]:
        return self.dataset.sizes()


def check_token_ids(corpus, vocab_size: int, dataset: str, splits, sides=("source", "target")) -> None:
    """Every token id of the corpus' ``splits`` and ``sides`` lies in 0..vocab_size-1; else a
    ValueError naming the data set, split, side and sentence."""
    for split in splits:
        part = getattr(corpus, split)
        for side in sides:
            for index, sentence in enumerate(getattr(part, side)):
                ids = np.asarray(sentence)
                if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
                    raise ValueError(f"dataset {dataset!r}, {split} {side} sentence {index}: "
                                     f"token id outside 0..{vocab_size - 1}")


def output_layer(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose weight maps a Transformer's decoder states to logits."""
    for name in ("output_projection", "classifier", "generator", "embedding"):
        layer = getattr(model, name, None)
        if isinstance(layer, torch.nn.Linear | torch.nn.Embedding):
            return layer
    raise ValueError(f"{type(model).__name__} exposes no output projection (output_projection, classifier or embedding)")


def _lengths(sentences) -> np.ndarray:
    return np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
