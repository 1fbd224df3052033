"""``python -m tenzro_operator.cli.syncer run --config syncer.yaml`` (``tenzro syncer run``): the syncer
daemon in the foreground.

Exit codes: 0 after the seal (or on SIGTERM/SIGINT, state saved), 1 on a clear error
(config, keystore, RPC or IPFS unavailable, halted after repeated failures: one line on stderr).
"""

from __future__ import annotations

from tenzro_operator.cli.daemon import daemon_group

__all__ = ["cli", "main"]


def _load():
    from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig

    return SyncerDaemon, SyncerDaemonConfig


cli = daemon_group("syncer", _load, help="The Tenzro Train syncer daemon.",
                   run_help="Register, get elected, aggregate and finalize every round, seal.")


def main() -> None:
    """Entry point (``python -m tenzro_operator.cli.syncer``; the lead maps ``tenzro syncer run``)."""
    cli()


if __name__ == "__main__":
    main()
