"""``tenzro watcher run --config watcher.yaml``: the watcher daemon in the foreground, re-checking each
committed round as it lands (`tenzro_operator.roles.watcher`).

Exit codes: 0 on SIGTERM/SIGINT (state saved), 1 on a clear error (config, RPC or IPFS
unavailable: one line on stderr).
"""

from __future__ import annotations

from tenzro_operator.cli.daemon import daemon_group

__all__ = ["cli", "main"]


def _load():
    from tenzro_operator.config import WatcherConfig
    from tenzro_operator.roles.watcher import WatcherDaemon

    return WatcherDaemon, WatcherConfig


cli = daemon_group("watcher", _load, help="The Tenzro Train watcher daemon.",
                   run_help="Replay each committed round as it lands; report every mismatch.")


def main() -> None:
    """Entry point (``python -m tenzro_operator.cli.watcher``; ``tenzro watcher run``)."""
    cli()


if __name__ == "__main__":
    main()
