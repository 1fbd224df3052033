"""The chain client's ERC-20 calls: balances, allowances, approvals, and ERC-2612 permits
(one transaction, no allowance left)."""

from __future__ import annotations

import logging
from typing import Any

from eth_utils import to_checksum_address

from tenzro_operator.chain.abi_decoding import why_failed
from tenzro_operator.chain.deployment import TOKEN
from tenzro_operator.chain.records import DEVNET_CHAIN_IDS, TxResult
from tenzro_operator.errors import ChainError, InsufficientTokens
from tenzro_operator.permit import PermitDomain, PermitSignature, sign_permit

log = logging.getLogger("tenzro.chain")


class TokenCalls:
    """ERC-20 and ERC-2612 calls of `ChainClient`."""

    def token_balance(self, address: str | None = None) -> int:
        """Token balance in atto-units."""
        return self.call("balanceOf", address or self.address, contract=TOKEN)

    def allowance(self, owner: str | None = None, spender: str | None = None) -> int:
        return self.call("allowance", owner or self.address, spender or self.registry.address, contract=TOKEN)

    def approve(self, amount: int, spender: str | None = None) -> TxResult:
        """Approve ``spender`` (default the registry) for ``amount`` atto-units."""
        return self.transact("approve", spender or self.registry.address, amount, contract=TOKEN)

    def ensure_allowance(self, amount: int, spender: str | None = None) -> TxResult | None:
        """Approve ``amount`` if the allowance is lower; None if nothing was needed."""
        if self.allowance(self.address, spender or self.registry.address) >= amount:
            return None
        return self.approve(amount, spender)

    def spend_approved(self, amount: int, method: str, *args: Any) -> TxResult:
        """Registry call ``method(*args)`` that pulls ``amount`` atto-units of TNZO from this account.

        Checks the balance first (`InsufficientTokens`, nothing sent), approves exactly ``amount``
        when the allowance is lower, and when the call then fails puts the allowance back to what
        it was, so a refused ``postTask`` / ``enrollTrainer`` / ``registerSyncer`` leaves no
        approval behind.
        """
        have = self.token_balance()
        if have < amount:
            raise InsufficientTokens(self.address, have, amount, method)
        before = self.allowance()
        approved = self.approve(amount) if before < amount else None
        try:
            return self.transact(method, *args)
        except BaseException:
            if approved is not None:
                try:
                    self.approve(before)
                except ChainError as exc:  # the original failure matters more; say what is left
                    log.warning("could not reset the allowance of %s to %d after %s failed: %s",
                                self.address, before, method, exc)
            raise

    # -- token: ERC-2612 permits (one transaction, no allowance left) ---------------------

    #: How long a permit this client signs stays valid past the chain's latest block (seconds).
    PERMIT_TTL_S = 600
    #: Registry functions that take a permit instead of an allowance (``<method>WithPermit``).
    PERMIT_METHODS = ("postTask", "enrollTrainer")

    def supports_permit(self) -> bool:
        """True when the token speaks ERC-2612 + ERC-5267 (``permit``, ``nonces``, ``eip712Domain``
        in its recorded ABI, and ``eip712Domain()`` answers) and the registry has the
        ``*WithPermit`` functions; cached per client. False for an older deployment: callers
        then approve first."""
        if self._permit_ok is not None:
            return self._permit_ok
        token_fns = {i.get("name") for i in self.token.abi if i.get("type") == "function"}
        reg_fns = {i.get("name") for i in self.registry.abi if i.get("type") == "function"}
        ok = {"permit", "nonces", "eip712Domain"} <= token_fns and \
            {m + "WithPermit" for m in self.PERMIT_METHODS} <= reg_fns
        if ok:
            try:
                self._permit_domain = PermitDomain.from_eip712_domain(self.call("eip712Domain", contract=TOKEN))
            except ChainError as exc:  # ChainRevert included: the token does not answer it
                log.info("token %s has no usable EIP-712 domain (%s): approving instead of permits",
                         self.token.address, why_failed(exc))
                ok = False
        self._permit_ok = ok
        return ok

    def permit_domain(self) -> PermitDomain:
        """The token's EIP-712 domain, from its ``eip712Domain()``.

        Raises:
            ChainError: the token does not support permits (see `supports_permit`).
        """
        if not self.supports_permit():
            raise ChainError(f"token {self.token.address} does not support ERC-2612 permits")
        return self._permit_domain

    def sign_permit(self, value: int, deadline: int | None = None, spender: str | None = None) -> PermitSignature:
        """This account's ERC-2612 permit for ``spender`` (default the registry) to pull ``value``
        atto-units, at the token's current nonce, valid until ``deadline`` (unix seconds; default
        `PERMIT_TTL_S` after the time the next block will carry, `next_block_time`). Signs
        locally; sends nothing."""
        if deadline is None:
            deadline = self.next_block_time() + self.PERMIT_TTL_S
        nonce = self.call("nonces", self.address, contract=TOKEN)
        return sign_permit(self.account, self.permit_domain(), spender or self.registry.address, value, nonce,
                           deadline)

    def spend_permitted(self, amount: int, method: str, *args: Any) -> TxResult:
        """Registry call ``<method>WithPermit(*args, deadline, v, r, s)`` that pulls exactly
        ``amount`` atto-units of TNZO from this account under a fresh permit: one transaction,
        and the allowance it grants is spent whole (none is left, also when the call fails).

        Raises:
            InsufficientTokens: the balance is below ``amount`` (nothing signed or sent).
            ChainRevert: the registry's refusal (e.g. ``Registry__AllowanceTooLow`` when the
                permit did not apply and no allowance covers ``amount``).
        """
        if method not in self.PERMIT_METHODS:
            raise ChainError(f"{method} has no permit variant (one of {', '.join(self.PERMIT_METHODS)})")
        have = self.token_balance()
        if have < amount:
            raise InsufficientTokens(self.address, have, amount, method)
        sig = self.sign_permit(amount)
        return self.transact(method + "WithPermit", *args, sig.deadline, sig.v, sig.r, sig.s)

    def spend(self, amount: int, method: str, *args: Any) -> TxResult:
        """`spend_permitted` when the token and registry support permits, else `spend_approved`."""
        if method in self.PERMIT_METHODS and self.supports_permit():
            return self.spend_permitted(amount, method, *args)
        return self.spend_approved(amount, method, *args)

    def transfer_tokens(self, to: str, amount: int) -> TxResult:
        """Send ``amount`` atto-units of TNZO to ``to`` (``Transfer`` event)."""
        return self.transact("transfer", to_checksum_address(to), amount, contract=TOKEN)

    def set_eth_balance(self, address: str, wei: int) -> None:
        """Devnet only (anvil): set the native balance of ``address`` to ``wei``."""
        if self.chain_id not in DEVNET_CHAIN_IDS:
            raise ChainError(f"anvil_setBalance is for devnets; chain {self.chain_id} is not one")
        self._rpc("anvil_setBalance", lambda: self.w3.provider.make_request(
            "anvil_setBalance", [to_checksum_address(address), hex(int(wei))]))

    def mint(self, to: str, amount: int) -> TxResult:
        """Devnet faucet: mint ``amount`` atto-units to ``to`` (the token owner only)."""
        return self.transact("mint", to_checksum_address(to), amount, contract=TOKEN)
