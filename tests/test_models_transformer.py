"""The Transformer encoder-decoder: shapes, causal and padding masks, tied embeddings, positions."""

import math

import pytest
import torch

from focalcal.data.translation import pad_batch
from focalcal.models import build
from focalcal.models.transformer import Transformer, sinusoidal_positions, transformer_base, transformer_small

V = 50


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Transformer(V, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.1, max_length=20).eval()


def _batch():
    source = pad_batch([[5, 6, 7, 8], [9, 10]], add_eos=True)
    target_in = pad_batch([[11, 12, 13], [14, 15, 16, 17, 18]], add_bos=True)
    return source, target_in


def test_logits_have_batch_time_vocabulary_shape(model):
    source, target_in = _batch()
    logits = model(source, target_in)
    assert logits.shape == (2, 6, V)
    memory, padding = model.encode(source)
    assert memory.shape == (2, 5, 32) and padding.tolist() == [[False] * 5, [False] * 3 + [True] * 2]
    assert torch.allclose(model.decode(memory, padding, target_in), logits, atol=1e-6)


def test_a_future_target_token_does_not_change_earlier_logits(model):
    source, target_in = _batch()
    changed = target_in.clone()
    changed[1, 3] = 40
    before, after = model(source, target_in), model(source, changed)
    assert torch.allclose(before[1, :3], after[1, :3], atol=1e-6)
    assert not torch.allclose(before[1, 3:5], after[1, 3:5], atol=1e-3)  # the mask is not over-wide
    assert torch.equal(before[0], after[0])


def test_padding_does_not_change_a_sentence_logits(model):
    source, target_in = _batch()
    alone = model(source[1:2, :3], target_in[1:2, :6])
    in_batch = model(source, target_in)[1:2]
    wider = model(
        torch.cat([source, torch.zeros(2, 4, dtype=torch.long)], 1),
        torch.cat([target_in, torch.zeros(2, 3, dtype=torch.long)], 1),
    )[1:2, :6]
    assert torch.allclose(alone, in_batch, atol=1e-5)
    assert torch.allclose(alone, wider, atol=1e-5)
    short = model(source[0:1], target_in[0:1, :4])
    assert torch.allclose(short, model(source, target_in)[0:1, :4], atol=1e-5)


def test_one_embedding_serves_source_target_and_output(model):
    matrices = [name for name, p in model.named_parameters() if p.shape == (V, 32)]
    assert matrices == ["embedding.weight"]
    source, target_in = _batch()
    row = 23
    before = model(source, target_in)
    with torch.no_grad():
        model.embedding.weight[row] += torch.linspace(-1, 1, 32)
    after = model(source, target_in)
    others = [k for k in range(V) if k != row]
    # row 23 is in neither sentence, so only its output logit moves
    assert torch.allclose(before[..., others], after[..., others], atol=1e-6)
    assert (after[..., row] - before[..., row]).abs().min() > 1e-3


def test_one_step_with_the_cache_equals_decoding_the_whole_prefix(model):
    source, target_in = _batch()
    memory, padding = model.encode(source)
    full = model.decode(memory, padding, target_in)
    cache = None
    for t in range(target_in.shape[1]):
        logits, cache = model.decode_step(memory, padding, target_in[:, : t + 1], cache)
        real = target_in[:, t] != 0  # a PAD position's logits are nobody's prediction
        assert torch.allclose(logits[real], full[real, t], atol=1e-5), t
        assert [c.shape for c in cache] == [(2, t + 1, 32)] * 2
    model.train()
    with pytest.raises(ValueError, match="eval mode only"):
        model.decode_step(memory, padding, target_in[:, :1])


def test_embeddings_are_scaled_and_positioned_as_vaswani(model):
    tokens = torch.tensor([[5, 6, 7]])
    expected = model.embedding.weight[tokens] * math.sqrt(32) + sinusoidal_positions(20, 32)[:3]
    assert torch.allclose(model._embed(tokens), expected)
    table = sinusoidal_positions(10, 8)
    assert table[3, 2].item() == pytest.approx(math.sin(3 / 10000 ** (2 / 8)), abs=1e-6)
    assert table[3, 5].item() == pytest.approx(math.cos(3 / 10000 ** (4 / 8)), abs=1e-6)


def test_a_few_steps_fit_a_tiny_batch(model):
    model.train()
    source, target_in = _batch()
    target_out = pad_batch([[11, 12, 13], [14, 15, 16, 17, 18]], add_eos=True)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(
            model(source, target_in).flatten(0, 1), target_out.flatten(), ignore_index=0
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[0] > 3.5 and losses[-1] < 0.2


def test_builders_and_bad_arguments():
    small = transformer_small(100)
    assert (small.d_model, len(small.encoder.layers), len(small.decoder.layers)) == (64, 2, 2)
    assert small.encoder.layers[0].linear1.out_features == 128 and small.encoder.layers[0].self_attn.num_heads == 4
    base = transformer_base(1000)
    assert (base.d_model, len(base.encoder.layers), base.encoder.layers[0].linear1.out_features) == (512, 6, 2048)
    assert base.encoder.layers[0].self_attn.num_heads == 8 and not base.encoder.layers[0].norm_first
    with pytest.raises(ValueError, match="divisible by n_heads"):
        Transformer(V, 30, 4, 1, 8, 0.1, 10)
    with pytest.raises(ValueError, match="max_length=20"):
        Transformer(V, 32, 4, 1, 8, 0.1, 20)(torch.ones(1, 21, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def _residual_dropouts(model):
    """The embedding + position dropout and every sub-layer's dropout before its residual sum (§5.4)."""
    modules = [model.dropout]
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        modules += [layer.dropout1, layer.dropout2, *([layer.dropout3] if hasattr(layer, "dropout3") else [])]
    return modules


def _train_and_eval(model):
    source, target_in = _batch()
    torch.manual_seed(1)
    model.train()
    trained = model(source, target_in)
    model.eval()
    return trained, model(source, target_in)


def test_with_inner_rates_0_residual_and_embedding_dropout_are_the_only_randomness():
    torch.manual_seed(0)
    model = Transformer(V, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.3, max_length=20)
    trained, evaluated = _train_and_eval(model)
    assert (trained - evaluated).abs().max() > 0.1  # residual dropout 0.3 acts in train mode
    for module in _residual_dropouts(model):
        module.p = 0.0
    trained, evaluated = _train_and_eval(model)
    assert torch.allclose(trained, evaluated, atol=1e-5)  # nothing else drops: not the attention, not the ReLU


@pytest.mark.parametrize("inner", [{"attention_dropout": 0.3}, {"activation_dropout": 0.3}])
def test_attention_or_activation_dropout_alone_acts_in_train_mode_only(inner):
    torch.manual_seed(0)
    model = Transformer(V, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_length=20, **inner)
    trained, evaluated = _train_and_eval(model)
    assert (trained - evaluated).abs().max() > 0.1
    model.eval()
    source, target_in = _batch()
    assert torch.equal(model(source, target_in), evaluated)


def _rates(model):
    layers = [*model.encoder.layers, *model.decoder.layers]
    attention = {m.dropout for layer in layers for m in (layer.self_attn, getattr(layer, "multihead_attn", None)) if m}
    return ({m.p for m in _residual_dropouts(model)}, attention, {layer.dropout.p for layer in layers})


def test_the_builders_dropout_rates_in_each_place():
    # transformer_base: tensor2tensor's transformer_base_v1 / fairseq's base_architecture
    assert _rates(transformer_base(100)) == ({0.1}, {0.0}, {0.0})
    assert _rates(transformer_small(100)) == ({0.1}, {0.0}, {0.0})  # the base model's
    assert _rates(build("transformer-base", num_classes=100, attention_dropout=0.2)) == ({0.1}, {0.2}, {0.0})
    assert _rates(build("transformer-small", num_classes=100, activation_dropout=0.2)) == ({0.1}, {0.0}, {0.2})
    for option in ("dropout", "attention_dropout", "activation_dropout"):
        with pytest.raises(ValueError, match=f"^{option} must lie in"):
            Transformer(V, 32, 4, 1, 8, max_length=20, **{"dropout": 0.1, option: 1.0})
