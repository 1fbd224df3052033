"""Errors of the operator: one base class, subclasses that say what was wrong and where.

The CLI catches `TenzroError` and prints its message (no traceback); anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

from tenzro_operator.redact import redact_url, scrub


class TenzroError(Exception):
    """Base of every error the operator reports to a user."""


class ServiceUnavailable(TenzroError):
    """A local service (RPC endpoint, IPFS node) did not answer. ``url`` is kept redacted
    (`tenzro_operator.redact`: a provider's API key in it never reaches a message, a page or a log),
    and so is every mention of it in ``hint``."""

    def __init__(self, service: str, url: str, hint: str = "start the devnet with `make devnet-up`") -> None:
        self.service, self.url = service, redact_url(url)
        super().__init__(f"{service} is not answering at {self.url}; {scrub(hint, url)}")


class DevnetError(TenzroError):
    """The devnet could not be started, stopped or inspected."""


# -- operator core: spec, config, keys, chain, events ---------------------------------------


class SpecError(TenzroError):
    """A task spec failed validation. ``path`` is the field path (``architecture.fragment_count``),
    ``errors`` every ``(path, reason)`` pydantic found."""

    def __init__(self, path: str, reason: str, source: str | None = None,
                 errors: list[tuple[str, str]] | None = None) -> None:
        self.path, self.reason, self.source = path, reason, source
        self.errors = errors or [(path, reason)]
        where = f"task spec {source}: " if source else "task spec: "
        more = f" (and {len(self.errors) - 1} more problem(s))" if len(self.errors) > 1 else ""
        super().__init__(f"{where}{path}: {reason}{more}")


class ConfigError(TenzroError):
    """A YAML config file is missing, unreadable or has a bad field (file and field named)."""

    def __init__(self, source: str, field: str | None, reason: str) -> None:
        self.source, self.field, self.reason = source, field, reason
        at = f", field {field}:" if field else ":"
        super().__init__(f"config {source}{at} {reason}")


class KeystoreError(TenzroError):
    """An encrypted keystore could not be created or unlocked (never carries the password)."""


class ChainError(TenzroError):
    """Something went wrong talking to the chain or with the deployments file."""


class DeploymentError(ChainError):
    """`deployments/<network>.json` is missing, malformed, or does not match the chain."""


class RpcUnavailable(ChainError, ServiceUnavailable):
    """The JSON-RPC endpoint did not answer after the retries."""

    def __init__(self, url: str, attempts: int = 1, cause: str = "") -> None:
        self.attempts, self.cause = attempts, scrub(cause, url)  # the cause may quote the URL (requests does)
        why = f" ({self.cause})" if cause else ""
        ServiceUnavailable.__init__(
            self, "the JSON-RPC endpoint", url,
            f"gave up after {attempts} attempt(s){why}; is the node running? (`make devnet-up` starts the devnet)")


class ChainRevert(ChainError):
    """A call or transaction reverted; ``error_name`` and ``args`` decoded from the ABI's custom errors
    (``Error(string)`` and ``Panic(uint256)`` too), ``"<unknown>"`` when the selector is not in the ABI."""

    def __init__(self, error_name: str, args: dict | tuple = (), function: str = "", data: bytes = b"") -> None:
        self.error_name, self.args_, self.function, self.data = error_name, args, function, data
        if isinstance(args, dict):
            shown = ", ".join(f"{k}={_fmt_arg(v)}" for k, v in args.items())
        else:
            shown = ", ".join(_fmt_arg(v) for v in args)
        where = f"{function} reverted: " if function else "reverted: "
        super().__init__(f"{where}{error_name}({shown})")


def _fmt_arg(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    return repr(v) if isinstance(v, str) else str(v)


class InsufficientTokens(ChainError):
    """An account holds fewer TNZO than a call would pull from it (checked before any approve)."""

    def __init__(self, account: str, have: int, need: int, what: str = "") -> None:
        from tenzro_operator.units import format_tokens

        self.account, self.have, self.need = account, have, need
        why = f" for {what}" if what else ""
        super().__init__(f"{account} holds {format_tokens(have)} but needs {format_tokens(need)}{why}; "
                         f"fund it (`tenzro faucet` on a devnet, else `tenzro transfer` "
                         f"from an account that has TNZO)")


class TxFailed(ChainError):
    """A transaction was mined with status 0, or no receipt came within the polling bound."""


class TxReverted(ChainRevert, TxFailed):
    """A transaction that passed its estimate was mined with status 0; the reason is recovered by
    replaying it on the state before its block and decoded like an estimate's (``error_name``,
    ``args_``). Both ``except ChainRevert`` and ``except TxFailed`` catch it."""

    def __init__(self, error_name: str, args: dict | tuple = (), function: str = "", data: bytes = b"", *,
                 tx_hash: str = "", block: int = 0) -> None:
        self.tx_hash, self.block = tx_hash, block
        super().__init__(error_name, args, function, data)
        self.args = (f"{self.args[0]} (mined in tx {tx_hash}, block {block})",)


class FeeCapExceeded(ChainError):
    """The network's fee is above the operator's cap (``max_fee_per_gas_gwei``); nothing was sent."""


class EventWatcherHalted(TenzroError):
    """An event handler failed too many times in a row; the watcher stopped on purpose."""


class DaemonHalted(TenzroError):
    """A daemon stopped on purpose after too many consecutive failures (the last one is named)."""


class StopRequested(Exception):
    """Raised inside a step when a stop was requested (SIGTERM/SIGINT or `Daemon.request_stop`)."""


# --- IPFS (tenzro_operator.ipfs) -----------------


class IpfsError(TenzroError):
    """Base of the IPFS client's errors: the node answered with an error, or could not be used."""


class IpfsUnavailable(IpfsError, ServiceUnavailable):
    """No IPFS node answers at the API URL (refused, reset or timed out after the retries)."""

    def __init__(self, url: str, reason: str = "") -> None:
        hint = "start the devnet with `make devnet-up` (or a Kubo daemon)"
        if reason:
            hint = f"{hint} [{reason}]"
        ServiceUnavailable.__init__(self, "the IPFS node", url, hint)


class IpfsContentError(IpfsError):
    """The content a CID names (or the CID itself) is at fault, not the node: a bad CID, an
    unsupported hash or codec, a directory, too many bytes, bytes that do not match. ``cid`` is
    the CID asked for; for a submission this is the submitter's fault, never a reason to stop."""

    def __init__(self, cid: str, detail: str, message: str | None = None) -> None:
        self.cid, self.detail = cid, detail
        super().__init__(message or f"IPFS content {cid}: {detail}")


class IpfsBadCid(IpfsContentError):
    """The text is not a CID (or not one this client can read)."""

    def __init__(self, cid: str, detail: str) -> None:
        super().__init__(cid, detail, f"{cid!r} is not a valid CID: {detail}")


class IpfsUnsupported(IpfsContentError):
    """A CID this client can not fetch and verify: multihash other than sha2-256 / sha2-512 /
    identity, a codec other than raw / dag-pb, or a directory rather than a file."""


class IpfsTooLarge(IpfsContentError):
    """The content is longer than the caller's byte cap (``max_bytes``); reading stopped there."""

    def __init__(self, cid: str, limit: int, seen: int) -> None:
        self.limit, self.seen = limit, seen
        super().__init__(cid, f"more than {limit} bytes (read {seen} before stopping)")


class IpfsNotFound(IpfsError):
    """The node does not have (or could not find in time) the content a CID names."""

    def __init__(self, cid: str, detail: str = "") -> None:
        self.cid = cid
        super().__init__(f"IPFS content {cid} was not found" + (f": {detail}" if detail else ""))


class IpfsIsolated(IpfsNotFound):
    """Not found because the node reaches no peer to ask (its host's link is down): an outage of
    the network around the node, not a fault of the content; daemons ride it out as they do a
    service that does not answer (`tenzro_operator.daemon.Daemon.guarded`)."""


class IpfsIntegrityError(IpfsContentError):
    """Bytes returned for a CID do not hash to that CID."""

    def __init__(self, cid: str, detail: str) -> None:
        super().__init__(cid, detail, f"IPFS content for {cid} failed verification: {detail}")


class IpfsPubsubError(IpfsError):
    """A pubsub or swarm call failed: the node refused it (bad topic, bad address, dial failure)
    or a subscription could not be read."""


class IpfsBadTopic(IpfsPubsubError, ValueError):
    """A topic name or task id that can not name a tenzro-train topic (also a ValueError)."""


class IpfsMessageTooLarge(IpfsPubsubError):
    """A pubsub message over the byte cap: ``size`` bytes of data, ``limit`` allowed."""

    def __init__(self, size: int, limit: int, what: str = "message") -> None:
        self.size, self.limit = size, limit
        super().__init__(f"pubsub {what} has {size} bytes of data, over the cap of {limit} bytes")


class IpfsNodeError(IpfsError):
    """The local IPFS node process could not be started or stopped."""
