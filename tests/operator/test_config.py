"""Role configs: YAML loading, env overrides (TENZRO_*), mapping onto the trainer's InnerConfig, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenzro_operator.config import SponsorConfig, SyncerConfig, TrainerConfig, load_config
from tenzro_operator.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "operator/examples"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("TENZRO_"):
            monkeypatch.delenv(k)


def write(tmp_path, text, name="c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name,cls", [("trainer.yaml", TrainerConfig), ("syncer.yaml", SyncerConfig),
                                      ("sponsor.yaml", SponsorConfig)])
def test_examples_load(name, cls):
    cfg = load_config(EXAMPLES / name, cls)
    assert cfg.node_rpc.startswith("http://")
    # relative paths resolve against the file's folder
    assert cfg.deployments.is_absolute() and cfg.data_dir.is_absolute()


def test_trainer_yaml_values_and_inner_mapping(tmp_path):
    p = write(tmp_path, """
node_rpc: http://127.0.0.1:9545/
keystore: keys/t0.json
task_id: train-demo
stake: "150"
inner: {lr: 1.0e-3, batch_size: 16}
device: cpu
gradient_checkpointing: true
metrics_port: 0
""")
    cfg = load_config(p, TrainerConfig)
    assert cfg.node_rpc == "http://127.0.0.1:9545"
    assert cfg.keystore == tmp_path / "keys/t0.json"
    assert cfg.stake_atto == 150 * 10**18
    inner = cfg.inner_config(steps=7, seed=3)
    from tenzro_trainer.config import InnerConfig

    default = InnerConfig()
    assert (inner.steps, inner.seed, inner.lr, inner.batch_size) == (7, 3, 1e-3, 16)
    # unset fields keep the trainer's own defaults (not restated by the operator)
    assert inner.weight_decay == default.weight_decay and inner.betas == default.betas
    assert inner.gradient_checkpointing is True


def test_defaults_without_file():
    cfg = load_config(None, TrainerConfig)
    assert cfg.metrics_port == 9101 and cfg.node_rpc == "http://127.0.0.1:8545" and cfg.task_id is None


def test_env_overrides_yaml(tmp_path, monkeypatch):
    p = write(tmp_path, "node_rpc: http://127.0.0.1:1111\ninner: {lr: 0.5}\nmetrics_port: 9200\n")
    monkeypatch.setenv("TENZRO_NODE_RPC", "http://127.0.0.1:2222")
    monkeypatch.setenv("TENZRO_INNER__BATCH_SIZE", "8")
    monkeypatch.setenv("TENZRO_KEYSTORE_PASSWORD", "not-a-field")  # other TENZRO_ vars are ignored
    cfg = load_config(p, TrainerConfig)
    assert cfg.node_rpc == "http://127.0.0.1:2222"
    assert cfg.inner.lr == 0.5 and cfg.inner.batch_size == 8  # nested env merges with the file
    assert cfg.metrics_port == 9200
    assert load_config(p, TrainerConfig, metrics_port=9300).metrics_port == 9300  # kwargs beat both


def test_syncer_outer_config(tmp_path):
    p = write(tmp_path, "outer_lr: 0.5\nregister_stake: 20atto\n")
    cfg = load_config(p, SyncerConfig)
    outer = cfg.outer_config()
    assert outer.lr == 0.5 and outer.momentum == 0.9
    assert cfg.register_stake_atto == 20


@pytest.mark.parametrize("text,field,fragment", [
    ("metrics_port: 99999\n", "metrics_port", "less than or equal"),
    ("nod_rpc: http://x\n", "nod_rpc", "unknown field"),
    ("node_rpc: ftp://x\n", "node_rpc", "http(s) URL"),
    ("inner: {lr: -1}\n", "inner.lr", "greater than 0"),
    ("inner: {betas: [0.9, 1.5]}\n", "inner.betas", "[0, 1)"),
    ("dtype: fp8\n", "dtype", "fp32"),
    ("stake: lots\n", "stake", "not an amount"),
    ("device: tpu\n", "device", "cpu, cuda or cuda:N"),
    ("device: cuda:x\n", "device", "cpu, cuda or cuda:N"),
    ("did: hello\n", "did", "not a DID"),
    ("did: \"did:tenzro:machine:\"\n", "did", "not a DID"),
    # a typo in a nested mapping lists the nested mapping's fields, not the top level's
    ("inner: {lrr: 0.1}\n", "inner.lrr", "known: batch_size, betas, grad_clip, lr"),
])
def test_bad_fields_name_file_and_field(tmp_path, text, field, fragment):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_config(p, TrainerConfig)
    assert ei.value.field == field
    assert str(p) in str(ei.value) and fragment in str(ei.value)


def test_good_devices_and_dids_load(tmp_path):
    for text in ("device: cuda:1\ndid: did:tenzro:machine:gpu-host-1\n", "device: cpu\ndid: did:web:example.com%3A8443\n"):
        load_config(write(tmp_path, text), TrainerConfig)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml", TrainerConfig)
    with pytest.raises(ConfigError, match="invalid YAML at line 3"):
        load_config(write(tmp_path, "a: 1\nb: [\n"), TrainerConfig)  # the parser stops at the end (line 3)
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(write(tmp_path, "- 1\n- 2\n"), TrainerConfig)


# -- root-flow delivery: the syncer's submission endpoint, the trainer's syncer_rpc / publish_pubsub


def test_defaults_are_pubsub_only_and_the_examples_enable_the_endpoint():
    s, t = load_config(None, SyncerConfig), load_config(None, TrainerConfig)
    assert (s.submission_rpc_port, s.submission_rpc_host, s.submission_rpc_url) == (None, "127.0.0.1", None)
    assert (t.syncer_rpc, t.publish_pubsub, t.force_onchain) == (None, True, False)
    assert load_config(EXAMPLES / "syncer.yaml", SyncerConfig).submission_rpc_port == 9112
    assert load_config(EXAMPLES / "trainer.yaml", TrainerConfig).publish_pubsub is True


def test_delivery_env_overrides_the_file(tmp_path, monkeypatch):
    p = tmp_path / "s.yaml"
    p.write_text("submission_rpc_port: 9112\n")
    monkeypatch.setenv("TENZRO_SUBMISSION_RPC_PORT", "9200")
    monkeypatch.setenv("TENZRO_SUBMISSION_RPC_HOST", "0.0.0.0")
    monkeypatch.setenv("TENZRO_SUBMISSION_RPC_URL", "http://syncer.example:9200/")
    s = load_config(p, SyncerConfig)
    assert (s.submission_rpc_port, s.submission_rpc_host, s.submission_rpc_url) == \
        (9200, "0.0.0.0", "http://syncer.example:9200/")
    monkeypatch.setenv("TENZRO_SYNCER_RPC", "http://127.0.0.1:9112/")
    monkeypatch.setenv("TENZRO_PUBLISH_PUBSUB", "false")
    t = load_config(None, TrainerConfig)
    assert (t.syncer_rpc, t.publish_pubsub) == ("http://127.0.0.1:9112/", False)


@pytest.mark.parametrize("cls, text, field", [
    (SyncerConfig, "submission_rpc_port: 70000\n", "submission_rpc_port"),
    (SyncerConfig, "submission_rpc_url: syncer.example:9112\n", "submission_rpc_url"),
    (TrainerConfig, "syncer_rpc: ftp://x\n", "syncer_rpc"),
])
def test_bad_delivery_values_name_the_field(tmp_path, cls, text, field):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_config(p, cls)
