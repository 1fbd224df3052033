import pytest
import torch

from tenzro_trainer.config import ConfigError, OuterConfig
from tenzro_trainer.outer import OuterOptimizer, pseudo_gradient


def test_pseudo_gradient_is_global_minus_local():
    g = {"w": torch.tensor([1.0, 2.0])}
    l = {"w": torch.tensor([0.5, 3.0], dtype=torch.bfloat16)}
    d = pseudo_gradient(g, l)
    assert d["w"].dtype == torch.float32 and torch.equal(d["w"], torch.tensor([0.5, -1.0]))


def test_nesterov_by_hand():
    # buf1 = g1; theta1 = theta0 - lr (g1 + mu buf1); buf2 = mu buf1 + g2; theta2 = theta1 - lr (g2 + mu buf2)
    lr, mu = 0.7, 0.9
    opt = OuterOptimizer({"w": torch.tensor([1.0])}, OuterConfig(lr=lr, momentum=mu))
    w1 = opt.step({"w": torch.tensor([0.1])})["w"]
    expect1 = 1.0 - lr * (0.1 + mu * 0.1)
    assert abs(float(w1) - expect1) < 1e-6
    w2 = opt.step({"w": torch.tensor([0.2])})["w"]
    buf2 = mu * 0.1 + 0.2
    assert abs(float(w2) - (expect1 - lr * (0.2 + mu * buf2))) < 1e-6


def test_resume_from_state_dict_is_exact():
    g = torch.Generator().manual_seed(0)
    w0 = {"a": torch.randn(10, generator=g), "b": torch.randn(2, 3, generator=g)}
    aggs = [{k: torch.randn(v.shape, generator=g) for k, v in w0.items()} for _ in range(4)]
    straight = OuterOptimizer(w0)
    for a in aggs:
        final = straight.step(a)
    first = OuterOptimizer(w0)
    for a in aggs[:2]:
        first.step(a)
    resumed = OuterOptimizer.from_state_dict(first.state_dict())
    for a in aggs[2:]:
        out = resumed.step(a)
    assert all(torch.equal(out[k], final[k]) for k in final)


def test_nesterov_without_momentum_is_a_config_error():
    with pytest.raises(ConfigError, match="Nesterov"):
        OuterConfig(momentum=0.0)
    OuterOptimizer({"w": torch.zeros(2)}, OuterConfig(momentum=0.0, nesterov=False))  # plain SGD is fine
