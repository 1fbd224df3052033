import copy

import numpy as np
import pytest
import torch

from tenzro_trainer.config import ConfigError, OuterConfig
from tenzro_trainer.outer import OuterOptimizer, pseudo_gradient


def ref_step(p, m, g, lr, mu, nesterov=True):
    """PROTOCOL.md section 1 in numpy float32 (one correctly rounded op per line)."""
    lr, mu = np.float32(lr), np.float32(mu)
    m = (mu * m) + g
    u = g + (mu * m) if nesterov else m
    return p - (lr * u), m


def bits(t):
    return t.detach().cpu().numpy().view(np.uint32) if isinstance(t, torch.Tensor) else t.view(np.uint32)


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


def test_steps_are_the_canonical_arithmetic():
    g = torch.Generator().manual_seed(5)
    w0 = {"b": torch.randn(7, generator=g), "a": torch.randn(3, 4, generator=g)}
    opt = OuterOptimizer(w0, OuterConfig(lr=0.7, momentum=0.9))
    ref = {n: (w0[n].numpy().copy(), np.zeros(w0[n].shape, np.float32)) for n in w0}
    assert all(not bool(torch.signbit(m).any()) and not bool(m.any()) for m in opt.momentum)  # +0
    for _ in range(5):
        agg = {n: torch.randn(w0[n].shape, generator=g) for n in w0}
        out = opt.step(agg)
        ref = {n: ref_step(*ref[n], agg[n].numpy(), 0.7, 0.9) for n in w0}
        for i, n in enumerate(opt.names):
            assert np.array_equal(bits(out[n]), bits(ref[n][0]))
            assert np.array_equal(bits(opt.momentum[i]), bits(ref[n][1]))


def test_state_survives_torch_save_and_deepcopy(tmp_path):
    g = torch.Generator().manual_seed(6)
    opt = OuterOptimizer({"w": torch.randn(5, generator=g)})
    opt.step({"w": torch.randn(5, generator=g)})
    torch.save({"outers": [copy.deepcopy(opt.state_dict())]}, tmp_path / "s.pt")  # as the syncer persists
    back = OuterOptimizer.from_state_dict(torch.load(tmp_path / "s.pt", weights_only=False)["outers"][0])
    agg = {"w": torch.randn(5, generator=g)}
    assert torch.equal(back.step(agg)["w"], opt.step(agg)["w"])
    assert torch.equal(back.momentum[0], opt.momentum[0])


def _old_format(w0, cfg, grads):
    """A state dict as the torch.optim.SGD-based OuterOptimizer wrote it (saved and reloaded)."""
    names = sorted(w0)
    params = [torch.nn.Parameter(w0[n].clone()) for n in names]
    sgd = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
    for agg in grads:
        for n, p in zip(names, params):
            p.grad = agg[n].clone()
        sgd.step()
    return {"names": names, "weights": {n: p.detach().clone() for n, p in zip(names, params)},
            "optimizer": sgd.state_dict(),
            "config": {"lr": cfg.lr, "momentum": cfg.momentum, "nesterov": cfg.nesterov}}, params, sgd


@pytest.mark.parametrize("steps_before", [0, 2])
def test_old_sgd_state_dict_loads_and_continues(tmp_path, steps_before):
    g = torch.Generator().manual_seed(7)
    w0 = {"b": torch.randn(6, generator=g), "a": torch.randn(2, 2, generator=g)}
    cfg = OuterConfig(lr=0.7, momentum=0.9)
    grads = [{n: torch.randn(v.shape, generator=g) for n, v in w0.items()} for _ in range(steps_before)]
    old, params, sgd = _old_format(w0, cfg, grads)
    torch.save(old, tmp_path / "old.pt")
    opt = OuterOptimizer.from_state_dict(torch.load(tmp_path / "old.pt", weights_only=False))
    assert opt.names == ["a", "b"]
    for i, (n, p) in enumerate(zip(opt.names, params)):
        assert torch.equal(opt.params[i], p.detach())
        buf = sgd.state[p].get("momentum_buffer")
        want = torch.zeros_like(p) if buf is None else buf
        assert np.array_equal(bits(opt.momentum[i]), bits(want)), n  # a missing buffer is +0
    # continues with the canonical step from exactly those weights and buffers
    ref = {n: (opt.params[i].numpy().copy(), opt.momentum[i].numpy().copy()) for i, n in enumerate(opt.names)}
    for _ in range(2):
        agg = {n: torch.randn(v.shape, generator=g) for n, v in w0.items()}
        out = opt.step(agg)
        ref = {n: ref_step(*ref[n], agg[n].numpy(), cfg.lr, cfg.momentum) for n in ref}
        assert all(np.array_equal(bits(out[n]), bits(ref[n][0])) for n in ref)
    # and its new state dict is the new format
    assert opt.state_dict()["format"] == "canonical-v1" and "optimizer" not in opt.state_dict()


def test_old_state_without_momentum_loads():
    # plain SGD (momentum 0): torch keeps no buffers at all
    old, _, _ = _old_format({"w": torch.ones(3)}, OuterConfig(lr=0.5, momentum=0.0, nesterov=False),
                            [{"w": torch.ones(3)}])
    opt = OuterOptimizer.from_state_dict(old)
    assert torch.equal(opt.weights()["w"], torch.full((3,), 0.5)) and not bool(opt.momentum[0].any())
    assert torch.equal(opt.step({"w": torch.ones(3)})["w"], torch.zeros(3))


def test_bad_state_dicts_are_refused():
    opt = OuterOptimizer({"w": torch.ones(3)})
    st = opt.state_dict()
    with pytest.raises(ConfigError, match="format"):
        OuterOptimizer.from_state_dict({**st, "format": "canonical-v9"})
    with pytest.raises(ConfigError, match="names"):
        OuterOptimizer.from_state_dict({**st, "names": ["v"]})
    with pytest.raises(ConfigError, match="shape"):
        OuterOptimizer.from_state_dict({**st, "momentum": {"w": torch.ones(4)}})


def test_copying_into_params_resets_weights_and_keeps_momentum():
    # replay's resync writes committed weights into opt.params under no_grad
    opt = OuterOptimizer({"w": torch.zeros(2)}, OuterConfig(lr=1.0, momentum=0.5))
    opt.step({"w": torch.ones(2)})  # m = 1, p = -(1 + 0.5)
    with torch.no_grad():
        opt.params[0].copy_(torch.full((2,), 10.0))
    assert torch.equal(opt.weights()["w"], torch.full((2,), 10.0))
    out = opt.step({"w": torch.zeros(2)})  # m = 0.5, u = 0 + 0.25, p = 10 - 0.25
    assert torch.equal(out["w"], torch.full((2,), 9.75)) and torch.equal(opt.momentum[0], torch.full((2,), 0.5))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_optimizer_matches_cpu_bit_for_bit():
    g = torch.Generator().manual_seed(8)
    w0 = {"w": torch.randn(1000, generator=g)}
    cpu, gpu = OuterOptimizer(w0), OuterOptimizer(w0, device="cuda")
    for _ in range(4):
        agg = {"w": torch.randn(1000, generator=g)}
        a, b = cpu.step(agg), gpu.step({"w": agg["w"].cuda()})
        assert b["w"].device.type == "cuda" and torch.equal(a["w"].view(torch.int32), b["w"].cpu().view(torch.int32))
    assert torch.equal(OuterOptimizer.from_state_dict(gpu.state_dict()).momentum[0], cpu.momentum[0])


def test_a_fragment_without_submissions_steps_by_its_momentum():
    """g = +0 (PROTOCOL.md section 1): after a real step the weights keep moving by the momentum."""
    w = {"a": torch.tensor([1.0, -2.0, 3.0])}
    opt = OuterOptimizer(w, OuterConfig(lr=0.7, momentum=0.9))
    g = torch.tensor([0.5, -0.25, 0.125])
    opt.step({"a": g})
    p, m = opt.params[0].numpy().copy(), opt.momentum[0].numpy().copy()
    zero = opt.zero_aggregate()
    assert torch.equal(zero["a"], torch.zeros(3)) and not torch.signbit(zero["a"]).any()
    new = opt.step(zero)["a"]
    want_p, want_m = ref_step(p, m, np.zeros(3, np.float32), 0.7, 0.9)
    assert (bits(new) == bits(want_p)).all() and (bits(opt.momentum[0]) == bits(want_m)).all()
    assert not torch.equal(new, torch.tensor(p))  # it moved
