import socket

import pytest

from tenzro_operator import devnet


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def devnet_cfg(tmp_path):
    """A devnet of its own: temp data dir and free ports; stopped after the test."""
    cfg = devnet.DevnetConfig(data_dir=tmp_path / "devnet", rpc_port=free_port(), ipfs_port=free_port())
    yield cfg
    devnet.down(cfg)
