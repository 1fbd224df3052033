import torch

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.fragments import fragment_sizes, fragment_state, partition
from tenzro_trainer.models import build_model


def test_partition_is_stable_across_instances_and_inputs():
    cfg = ModelConfig.preset("cpu-test")
    torch.manual_seed(1)
    a = build_model(cfg)
    torch.manual_seed(2)
    b = build_model(cfg)
    p = partition(a, 12)
    assert p == partition(b, 12)  # different weights, same architecture
    assert p == partition(a.state_dict(), 12)  # model or state dict
    reversed_sd = dict(reversed(list(a.state_dict().items())))
    assert sorted(map(sorted, p)) == sorted(map(sorted, partition(reversed_sd, 12)))
    with torch.device("meta"):
        c = build_model(cfg)
    assert p == partition(c, 12)  # no weights at all


def test_partition_covers_everything_once_and_is_balanced():
    cfg = ModelConfig.preset("cpu-test")
    model = build_model(cfg)
    for F in (1, 4, 12):
        p = partition(model, F)
        names = [n for frag in p for n in frag]
        assert sorted(names) == sorted(n for n, _ in model.named_parameters())
        sizes = fragment_sizes(model, p)
        largest = max(t.numel() for t in model.parameters())
        total = sum(sizes)
        assert max(sizes) - min(sizes) <= largest
        assert max(sizes) <= total / F + largest


def test_partition_of_reference_config_on_meta_device():
    with torch.device("meta"):
        model = build_model(ModelConfig.preset("reference-200m"))
    sizes = fragment_sizes(model, partition(model, 12))
    largest = max(p.numel() for p in model.parameters())
    assert max(sizes) - min(sizes) <= largest
    assert max(sizes) / min(sizes) < 1.1  # within 10% at the reference size (tensors are 4M of 211M)


def test_fragment_state():
    sd = build_model(ModelConfig.preset("demo")).state_dict()
    names = partition(sd, 3)[0]
    fs = fragment_state(sd, names)
    assert list(fs) == names and all(fs[n] is not None for n in names)


def test_fragment_layout_feeds_validation():
    from tenzro_trainer.aggregation import validate_payload
    from tenzro_trainer.fragments import fragment_layout

    model = build_model(ModelConfig.preset("demo"))
    names = partition(model, 4)[1]
    layout = fragment_layout(model, names)
    sd = model.state_dict()
    assert validate_payload({n: torch.zeros_like(sd[n]) for n in names}, layout) == 0.0
