"""Funding an account: ``tenzro balance``, ``tenzro transfer`` and (devnets only) ``tenzro faucet``.

- ``balance [--address A]``: ETH (gas), TNZO, TNZO withdrawable from the registry, the syncer
  pool stake, and the allowance the account left to the registry, of ``--address`` or the
  keystore's account (read from the keystore file, no password needed).
- ``transfer --to A --amount N``: send TNZO from the keystore's account.
- ``faucet [--to A] [--eth N] [--tnzo N]``: on a devnet (chain id 31337 / 1337) give an account
  ETH (``anvil_setBalance``: its balance is raised by ``--eth``) and TNZO (sent by the
  deployer, anvil's account 0, which holds the devnet supply). Refused on any other chain.

Amounts are typed in tokens (``"1.5"``) or atto-units (``"1500atto"``), shown as TNZO; ``--format
json`` gives exact atto-unit strings.
"""

from __future__ import annotations

from pathlib import Path

import click

from tenzro_operator.errors import TenzroError
from tenzro_operator.units import format_tokens, parse_tokens

DEFAULT_FAUCET_ETH = "10"  # ether: gas for a few thousand devnet transactions
DEFAULT_FAUCET_TNZO = "10000"  # TNZO: a 1,000 TNZO pool, stakes and a syncer registration with room to spare


def _amount(value: str, option: str) -> int:
    try:
        return parse_tokens(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _address(value: str | None, keystore: Path | None, option: str) -> str:
    """``value`` checksummed, else the address the keystore file declares."""
    from eth_utils import is_address, to_checksum_address

    if value:
        if not is_address(value):
            raise click.BadParameter(f"{value!r} is not an address (0x + 40 hex digits)", param_hint=option)
        return to_checksum_address(value)
    if keystore is None:
        raise click.UsageError(f"which account? pass {option} ADDRESS or --keystore FILE")
    from tenzro_operator.keys import keystore_address

    addr = keystore_address(keystore)
    if addr is None:
        raise TenzroError(f"keystore {keystore} declares no address: pass {option} ADDRESS")
    return addr


def register(cli: click.Group) -> None:
    """Attach ``balance``, ``transfer`` and ``faucet`` to the top-level ``tenzro`` group."""
    from tenzro_operator.cli.common import Ctx, common_options, format_option, tx_out

    @cli.command("balance")
    @click.option("--address", default=None, help="account to show  [default: the keystore's]")
    @format_option
    @common_options
    def balance(ctx: Ctx, address: str | None, fmt: str) -> None:
        """ETH, TNZO, withdrawable TNZO, syncer stake and registry allowance of an account."""
        addr = _address(address, ctx.keystore, "--address")
        chain = ctx.chain()
        wei, atto = chain.balance_eth(addr), chain.token_balance(addr)
        owed, allowance, info = chain.withdrawable(addr), chain.allowance(addr), chain.syncer_info(addr)
        if fmt == "json":
            tx_out(fmt, "", {"address": addr, "eth_wei": str(wei), "tnzo": str(atto), "withdrawable": str(owed),
                              "syncer_stake": str(info.stake), "syncer_locked": str(info.locked),
                              "registry_allowance": str(allowance)})
            return
        tx_out(fmt, f"balance of {addr}", {
            "ETH (gas)": format_tokens(wei, "ETH"), "TNZO": format_tokens(atto),
            "withdrawable from the registry": format_tokens(owed),
            "syncer pool stake (locked)": f"{format_tokens(info.stake)} ({format_tokens(info.locked)})"
            if info.registered else "not a syncer candidate",
            "allowance to the registry": format_tokens(allowance)})

    @cli.command("transfer")
    @click.option("--to", "to", required=True, help="recipient address")
    @click.option("--amount", required=True, help="TNZO ('25', '0.5') or atto-units ('1000atto')")
    @format_option
    @common_options
    def transfer(ctx: Ctx, to: str, amount: str, fmt: str) -> None:
        """Send TNZO from the keystore's account."""
        recipient = _address(to, None, "--to")
        atto = _amount(amount, "--amount")
        chain = ctx.chain(signer=True)
        have = chain.token_balance()
        if have < atto:
            from tenzro_operator.errors import InsufficientTokens

            raise InsufficientTokens(chain.address, have, atto, "transfer")
        res = chain.transfer_tokens(recipient, atto)
        tx_out(fmt, "transferred", {"from": chain.address, "to": recipient, "amount": str(atto),
                                     "amount_tokens": format_tokens(atto), "tx": res.tx_hash})

    @cli.command("faucet")
    @click.option("--to", "to", default=None, help="account to fund  [default: the keystore's]")
    @click.option("--eth", default=DEFAULT_FAUCET_ETH, show_default=True, help="ETH to add (for gas)")
    @click.option("--tnzo", default=DEFAULT_FAUCET_TNZO, show_default=True, help="TNZO to send")
    @format_option
    @common_options
    def faucet(ctx: Ctx, to: str | None, eth: str, tnzo: str, fmt: str) -> None:
        """Devnet only: give an account ETH for gas and TNZO from the deployer."""
        from tenzro_operator.chain import DEVNET_CHAIN_IDS
        from tenzro_operator.keys import anvil_account

        addr = _address(to, ctx.keystore, "--to")
        wei, atto = _amount(eth, "--eth"), _amount(tnzo, "--tnzo")
        chain = ctx.chain()
        if chain.chain_id not in DEVNET_CHAIN_IDS:
            raise TenzroError(f"the faucet is for devnets; {chain.shown_url} is chain {chain.chain_id}")
        deployer = anvil_account(0)
        if (chain.deployment.deployer or "").lower() != deployer.address.lower():
            raise TenzroError(f"{chain.deployment.path} was deployed by {chain.deployment.deployer}, not anvil's "
                              f"account 0 ({deployer.address}): the faucet has no key that holds the TNZO supply")
        if wei:
            chain.set_eth_balance(addr, chain.balance_eth(addr) + wei)
        tx = None
        if atto:
            funder = chain.with_account(deployer)
            if funder.token_balance() < atto:
                raise TenzroError(f"the deployer holds only {format_tokens(funder.token_balance())}; ask for less")
            tx = funder.transfer_tokens(addr, atto).tx_hash
        tx_out(fmt, "funded", {"to": addr, "eth_added": format_tokens(wei, "ETH"), "tnzo_sent": format_tokens(atto),
                                "eth_balance": format_tokens(chain.balance_eth(addr), "ETH"),
                                "tnzo_balance": format_tokens(chain.token_balance(addr)), "tx": tx or "-"})
