"""The translation stand-in: what transformer_small reaches on synthetic_translation's default
size in a fixed budget of training CPU (a plain loop: Adam β = (0.9, 0.98), ε = 1e-9, Vaswani's
inverse-square-root schedule with 200 warm-up steps, cross-entropy, token batches of 1,500).

Printed after each epoch: CPU seconds, validation token accuracy, NLL and ECE (teacher
forcing); at the end the test BLEU of greedy decoding and of beam 4 (α = 0.6). One thread.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from focalcal.data.translation import pad_batch, synthetic_translation, token_batches
from focalcal.models.transformer import transformer_small
from focalcal.translation.beam_search import beam_search, greedy_decode
from focalcal.translation.bleu import corpus_bleu
from focalcal.translation.token_profile import profile_from_logits

MAX_TOKENS, WARMUP = 1500, 200


def batch(split, indices):
    source = pad_batch([split.source[i] for i in indices], add_eos=True)
    target_in = pad_batch([split.target[i] for i in indices], add_bos=True)
    target_out = pad_batch([split.target[i] for i in indices], add_eos=True)
    return source, target_in, target_out


def validation(model, split):
    model.eval()
    logits, labels = [], []
    with torch.no_grad():
        for indices in token_batches(split.source_lengths() + 1, split.target_lengths() + 1, 4000, shuffle=False):
            source, target_in, target_out = batch(split, indices)
            mask = target_out != 0
            logits.append(model(source, target_in)[mask])
            labels.append(target_out[mask])
    model.train()
    logits, labels = torch.cat(logits), torch.cat(labels)
    profile = profile_from_logits(logits, labels, np.zeros(len(labels)), temperatures=[1.0])
    return profile.correct.mean(), profile.nll(1.0), profile.ece(1.0)


def bleu(model, corpus, decode):
    model.eval()
    hypotheses = []
    for start in range(0, len(corpus.test), 100):
        source = pad_batch(corpus.test.source[start : start + 100], add_eos=True)
        hypotheses += [corpus.detokenise(ids) for ids in decode(model, source)]
    return corpus_bleu(hypotheses, corpus.test.references).score


def main(quick: bool = False, budget: float = 60.0) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    budget = 10.0 if quick else budget
    corpus = synthetic_translation()
    model = transformer_small(corpus.vocab_size)
    optimiser = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: model.d_model**-0.5 * min((step + 1) ** -0.5, (step + 1) * WARMUP**-1.5)
    )
    train = corpus.train
    start, steps, epoch = time.process_time(), 0, 0
    while time.process_time() - start < budget:
        for indices in token_batches(train.source_lengths() + 1, train.target_lengths() + 1, MAX_TOKENS, seed=epoch):
            source, target_in, target_out = batch(train, indices)
            loss = F.cross_entropy(model(source, target_in).flatten(0, 1), target_out.flatten(), ignore_index=0)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            steps += 1
            if time.process_time() - start >= budget:
                break
        epoch += 1
        accuracy, nll, ece = validation(model, corpus.val)
        print(
            f"epoch {epoch:2d}  steps {steps:4d}  training CPU {time.process_time() - start:5.1f} s  "
            f"val token accuracy {accuracy:.3f}  NLL {nll:.3f}  ECE {100 * ece:.2f} %",
            flush=True,
        )
    print(
        f"test BLEU: greedy {bleu(model, corpus, lambda m, s: greedy_decode(m, s)):.2f}, "
        f"beam 4 (alpha 0.6) {bleu(model, corpus, lambda m, s: beam_search(m, s, 4, 0.6)):.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
