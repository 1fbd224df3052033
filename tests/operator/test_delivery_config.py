"""The root-flow delivery fields of the role configs (`roles.delivery`): the syncer's submission
endpoint and the trainer's syncer_rpc / publish_pubsub, from YAML, TENZRO_* variables and defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenzro_operator.config import SyncerConfig, TrainerConfig, load_config
from tenzro_operator.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "operator/examples"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("TENZRO_"):
            monkeypatch.delenv(k)


def test_defaults_are_pubsub_only_and_the_examples_enable_the_endpoint():
    s, t = load_config(None, SyncerConfig), load_config(None, TrainerConfig)
    assert (s.submission_rpc_port, s.submission_rpc_host, s.submission_rpc_url) == (None, "127.0.0.1", None)
    assert (t.syncer_rpc, t.publish_pubsub) == (None, True)
    assert load_config(EXAMPLES / "syncer.yaml", SyncerConfig).submission_rpc_port == 9112
    assert load_config(EXAMPLES / "trainer.yaml", TrainerConfig).publish_pubsub is True


def test_env_overrides_the_file(tmp_path, monkeypatch):
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
def test_bad_values_name_the_field(tmp_path, cls, text, field):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_config(p, cls)
