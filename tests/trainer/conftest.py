import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """The machine's cores are shared: keep each test on one thread (also keeps CPU runs reproducible)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def collection():
    from tenzro_trainer.data import default_collection

    return default_collection()


@pytest.fixture(scope="session")
def split(collection):
    from tenzro_trainer.data import train_heldout_split

    return train_heldout_split(collection, context_len=64, horizon=16)
