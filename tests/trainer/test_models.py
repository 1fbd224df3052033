import pytest
import torch

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.errors import ConfigError
from tenzro_trainer.models import build_model, count_parameters


@pytest.mark.parametrize("family", ["timesfm", "ttm"])
def test_shapes_and_loss(family):
    cfg = ModelConfig.preset("cpu-test", family)
    model = build_model(cfg)
    w = torch.randn(5, cfg.context_len + cfg.horizon)
    out = model(torch.randn(5, cfg.context_len))
    assert out.shape == (5, model.n_outputs, cfg.horizon)
    assert model.forecast(w[:, : cfg.context_len]).shape == (5, cfg.horizon)
    assert torch.isfinite(model.loss(w))


def test_sizes():
    assert 0.8e6 <= count_parameters(ModelConfig.preset("cpu-test")) <= 1.2e6
    assert count_parameters(ModelConfig.preset("demo")) < 0.2e6
    assert 190e6 <= count_parameters(ModelConfig.preset("reference-200m")) <= 220e6


def test_timesfm_is_causal():
    cfg = ModelConfig.preset("demo")
    model = build_model(cfg).eval()
    z = torch.randn(2, cfg.context_len)
    z2 = z.clone()
    z2[:, -cfg.patch_len :] += 5.0  # change only the last patch
    a, b = model(z), model(z2)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_forecast_is_scale_equivariant():
    """Per-window normalization: forecasting a*x+b gives a*f(x)+b (when std is above the floor)."""
    cfg = ModelConfig.preset("demo")
    model = build_model(cfg).eval()
    x = torch.randn(3, cfg.context_len)
    assert torch.allclose(model.forecast(3 * x + 7), 3 * model.forecast(x) + 7, atol=1e-4)


def test_from_metadata():
    cfg = ModelConfig.from_metadata("ttm", {"preset": "demo", "context_len": "128", "horizon": 32})
    assert (cfg.family, cfg.context_len, cfg.horizon, cfg.d_model) == ("ttm", 128, 32, 64)
    with pytest.raises(ConfigError, match="unknown keys"):
        ModelConfig.from_metadata("timesfm", {"n_experts": 4})
    with pytest.raises(ConfigError, match="multiple of patch_len"):
        ModelConfig.from_metadata("timesfm", {"context_len": 60, "patch_len": 16})
    with pytest.raises(ConfigError, match="unknown architecture family"):
        ModelConfig.from_metadata("lstm", {})


def test_gradient_checkpointing_gives_same_gradients():
    cfg = ModelConfig.preset("demo")
    torch.manual_seed(0)
    m1 = build_model(cfg)
    m2 = build_model(cfg)
    m2.load_state_dict(m1.state_dict())
    m2.gradient_checkpointing = True
    w = torch.randn(4, cfg.context_len + cfg.horizon)
    m1.loss(w).backward()
    m2.loss(w).backward()
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        assert torch.allclose(p1.grad, p2.grad, atol=1e-6), n


def test_from_metadata_rejects_unknown_preset():
    with pytest.raises(ConfigError, match="unknown model preset"):
        ModelConfig.from_metadata("timesfm", {"preset": "huge"})
    assert ModelConfig.from_metadata("timesfm", {"family": "ttm", "d_model": 32}).family == "timesfm"
