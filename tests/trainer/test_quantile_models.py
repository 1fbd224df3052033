"""Quantile heads, masked (padded) inputs, the Chronos-Bolt-class family, and forecasting with rollout."""

import numpy as np
import pytest
import torch

from tenzro_trainer.config import QUANTILE_LEVELS, ModelConfig
from tenzro_trainer.errors import ConfigError, DataError
from tenzro_trainer.forecast import forecast_histories, interpolate_quantiles
from tenzro_trainer.models import build_model, count_parameters
from tenzro_trainer.models.common import quantile_loss

FAMILIES = ["timesfm", "ttm", "chronos_bolt"]


def small(family: str, **kw) -> ModelConfig:
    base = dict(context_len=64, horizon=16, patch_len=16, d_model=32, n_layers=2, n_heads=4, d_ff=64,
                quantiles=QUANTILE_LEVELS, masked=True, min_context=8)
    return ModelConfig(family=family, **{**base, **kw})


@pytest.mark.parametrize("family", FAMILIES)
def test_quantile_head_shapes_loss_and_median_point(family):
    cfg = small(family)
    model = build_model(cfg).eval()
    w = torch.randn(4, 80).cumsum(1)
    out = model(torch.randn(4, 64))
    assert out.shape == (4, model.n_outputs, 9, 16)
    q = model.forecast_quantiles(w[:, :64])
    assert q.shape == (4, 9, 16)
    assert (q[:, 1:] >= q[:, :-1]).all()  # sorted: quantiles never cross
    assert torch.equal(model.forecast(w[:, :64]), q[:, 4])  # point forecast = the 0.5 quantile
    assert torch.isfinite(model.loss(w))


@pytest.mark.parametrize("family", FAMILIES)
def test_masked_model_ignores_padded_values(family):
    """Left padding (NaN) and missing targets: the loss is finite, gradients flow, and what stands
    in the padded positions cannot change a forecast."""
    model = build_model(small(family)).eval()
    w = torch.randn(3, 80).cumsum(1)
    w[:, :40] = float("nan")  # 24 observed context points
    w[0, -5:] = float("nan")  # a target running past the series' end
    loss = model.loss(w)
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    ctx = w[:, :64]
    assert torch.isfinite(model.forecast(ctx)).all()
    assert torch.equal(model.forecast(ctx), model.forecast(ctx.clone()))


def test_quantile_loss_is_pinball_and_skips_missing():
    pred = torch.tensor([[[0.0, 0.0]], [[1.0, 1.0]]])  # (2, 1 quantile, 2 steps)
    target = torch.tensor([[1.0, float("nan")], [0.0, 3.0]])
    q = torch.tensor([0.9])
    # observed errors d = y - yhat: 1 (-> 0.9), -1 (-> 0.1), 2 (-> 1.8); mean over 3 observed
    assert torch.isclose(quantile_loss(pred, target, q), torch.tensor((0.9 + 0.1 + 1.8) / 3))


def test_training_the_quantile_head_brackets_the_data():
    """A few hundred steps on noisy sine waves: the 0.1 / 0.9 quantiles bracket most targets."""
    torch.manual_seed(0)
    cfg = small("chronos_bolt", masked=False, min_context=0)
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    t = torch.arange(80.0)

    def batch(n):
        phase = torch.rand(n, 1) * 6.28
        return torch.sin(t / 4 + phase) + 0.3 * torch.randn(n, 80)

    for _ in range(300):
        loss = model.loss(batch(64))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = batch(256)
    q = model.eval().forecast_quantiles(w[:, :64])
    inside = ((w[:, 64:] >= q[:, 0]) & (w[:, 64:] <= q[:, 8])).float().mean()
    assert 0.6 < float(inside) < 0.95  # nominal 0.8


def test_config_rules():
    with pytest.raises(ConfigError, match="include 0.5"):
        ModelConfig(quantiles=(0.1, 0.9))
    with pytest.raises(ConfigError, match="needs quantiles"):
        ModelConfig(family="chronos_bolt")
    with pytest.raises(ConfigError, match="masked"):
        ModelConfig(min_context=16)
    cfg = ModelConfig.from_metadata("chronos_bolt", {"preset": "cpu-ref", "quantiles": "0.1,0.5,0.9", "masked": "true"})
    assert cfg.quantiles == (0.1, 0.5, 0.9) and cfg.masked and cfg.context_len >= 512
    assert ModelConfig.preset("demo").quantiles == ()  # the demo keeps its point head and MSE


def test_reference_presets_sizes():
    for fam in FAMILIES:
        assert 0.5e6 < count_parameters(ModelConfig.preset("cpu-ref", fam)) < 2e6
        assert 10e6 < count_parameters(ModelConfig.preset("gpu-ref", fam)) < 60e6


def test_forecast_histories_any_length_rollout_and_units():
    torch.manual_seed(0)
    model = build_model(small("timesfm")).eval()
    y_long = 1000 + 50 * np.sin(np.arange(300) / 5)
    fc = forecast_histories(model, [y_long, y_long[:10]], h=40, quantiles=(0.1, 0.5, 0.9))
    assert fc.shape == (2, 3, 40)  # 40 > head horizon 16: three model calls
    assert (np.diff(fc, axis=1) >= 0).all()
    # raw units: affine equivariance of the whole pipeline
    fc2 = forecast_histories(model, [3 * y_long - 7], h=40, quantiles=(0.1, 0.5, 0.9))
    np.testing.assert_allclose(fc2[0], 3 * fc[0] - 7, rtol=1e-4, atol=1e-2)
    # the first head output equals a single model call on the same standardized context
    z = (y_long[-64:] - y_long[-64:].mean()) / y_long[-64:].std()
    direct = model.forecast(torch.tensor(z[None], dtype=torch.float32))[0].numpy() * y_long[-64:].std() + y_long[-64:].mean()
    np.testing.assert_allclose(fc[0, 1, :16], direct, rtol=1e-4)
    with pytest.raises(DataError, match="fewer than"):
        forecast_histories(model, [np.array([1.0, np.nan])], h=4)


def test_flip_invariant_forecast_negates_with_its_series():
    """With ``flip`` a negated series gets exactly the negated forecast, its levels mirrored (q from
    1 - q), which an untrained model's plain forecast does not; the flip-invariant forecast is the
    mean of the plain one and the mirrored plain forecast of the negated series, and stays ordered."""
    torch.manual_seed(1)
    model = build_model(small("timesfm")).eval()
    y = 100 + np.cumsum(np.random.default_rng(0).normal(size=40))
    qs = (0.1, 0.3, 0.5, 0.7, 0.9)  # symmetric: level j of -y is minus level -1-j of y
    plain, plain_neg = (forecast_histories(model, [v], h=20, quantiles=qs) for v in (y, -y))
    assert np.abs(plain[0] + plain_neg[0][::-1]).max() > 1e-3  # the model alone is not flip-invariant
    fc, fc_neg = (forecast_histories(model, [v], h=20, quantiles=qs, flip=True) for v in (y, -y))
    np.testing.assert_allclose(fc_neg[0], -fc[0][::-1], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fc[0], (plain[0] - plain_neg[0][::-1]) / 2, rtol=1e-9, atol=1e-9)
    assert (np.diff(fc, axis=1) >= 0).all()
    # asymmetric levels: level q pairs with the negated series' level 1 - q
    odd = forecast_histories(model, [y], h=20, quantiles=(0.2, 0.5, 0.6), flip=True)
    a = forecast_histories(model, [y], h=20, quantiles=(0.2, 0.5, 0.6))
    b = forecast_histories(model, [-y], h=20, quantiles=(0.4, 0.5, 0.8))
    np.testing.assert_allclose(odd[0], (a[0] - b[0][::-1]) / 2, rtol=1e-9, atol=1e-9)


def test_infer_positive_clips_only_series_without_negative_values():
    """Intermittent counts (mostly 0, a spike every 20 steps): the plain lower quantiles go below 0,
    ``infer_positive`` clips them there and changes nothing else; the same series with one negative
    point is left as is."""
    torch.manual_seed(0)
    model = build_model(small("timesfm")).eval()
    y = np.where(np.arange(60) % 20 == 3, 100.0, 0.0)
    negative_once = y.copy()
    negative_once[5] = -0.1
    plain = forecast_histories(model, [y, negative_once], h=20)
    assert (plain[0] < 0).any() and (plain[1] < 0).any()
    fc = forecast_histories(model, [y, negative_once], h=20, infer_positive=True)
    np.testing.assert_array_equal(fc[0], np.maximum(plain[0], 0.0))
    np.testing.assert_array_equal(fc[1], plain[1])


def test_point_model_forecasts_with_padding_and_repeats_levels():
    model = build_model(ModelConfig.preset("demo")).eval()
    fc = forecast_histories(model, [np.arange(20.0)], h=20, quantiles=(0.1, 0.5, 0.9))
    assert fc.shape == (1, 3, 20)
    np.testing.assert_array_equal(fc[0, 0], fc[0, 2])  # a point head has no spread


def test_interpolate_quantiles():
    fc = np.array([[[0.0], [1.0], [3.0]]])  # levels 0.1, 0.5, 0.9
    out = interpolate_quantiles(fc, (0.1, 0.5, 0.9), (0.05, 0.3, 0.7, 0.95))
    np.testing.assert_allclose(out[0, :, 0], [0.0, 0.5, 2.0, 3.0])
