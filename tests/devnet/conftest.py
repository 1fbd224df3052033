import pytest

from stack import free_port
from tenzro_operator import devnet


@pytest.fixture
def devnet_cfg(tmp_path):
    """A devnet of its own: temp data dir and free ports; stopped after the test."""
    cfg = devnet.DevnetConfig(data_dir=tmp_path / "devnet", rpc_port=free_port(), ipfs_port=free_port())
    yield cfg
    devnet.down(cfg)
