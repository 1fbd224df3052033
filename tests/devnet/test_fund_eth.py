"""`devnet.fund_eth`: accounts beyond anvil's ten funded ones get ETH for gas (real anvil)."""

import pytest

from stack import Anvil
from tenzro_operator import devnet
from tenzro_operator.errors import DevnetError
from tenzro_operator.keys import anvil_account

ETH = 10**18


@pytest.fixture
def anvil(tmp_path):
    node = Anvil(tmp_path).start()
    yield node
    node.stop()


def test_tops_up_only_the_accounts_below_the_amount(anvil):
    rich, poor = anvil_account(3).address, anvil_account(12).address
    assert devnet.eth_balance(anvil.url, poor) == 0
    funded = devnet.fund_eth(anvil.url, [rich, poor], 100 * ETH)
    assert funded == [poor]
    assert devnet.eth_balance(anvil.url, poor) == 100 * ETH
    assert devnet.eth_balance(anvil.url, rich) == 10_000 * ETH  # anvil's default, untouched
    assert devnet.fund_eth(anvil.url, [poor], 100 * ETH) == []  # idempotent


def test_transfer_from_the_funder_where_set_balance_is_missing(anvil, monkeypatch):
    real = devnet.rpc_call

    def no_cheatcodes(url, method, params=None, timeout_s=2.0):
        if method == "anvil_setBalance":
            raise DevnetError("anvil_setBalance: method not found")
        return real(url, method, params, timeout_s)

    monkeypatch.setattr(devnet, "rpc_call", no_cheatcodes)
    poor = anvil_account(13).address
    with pytest.raises(DevnetError, match="no anvil_setBalance"):
        devnet.fund_eth(anvil.url, [poor], ETH)
    assert devnet.fund_eth(anvil.url, [poor], ETH, funder=anvil_account(0)) == [poor]
    assert devnet.eth_balance(anvil.url, poor) == ETH
