"""``python -m tenzro_operator.syncer_cli run --config syncer.yaml`` (``tenzro syncer run``): the syncer
daemon in the foreground.

Exit codes: 0 after the seal (or on SIGTERM/SIGINT, state saved), 1 on a clear error
(config, keystore, RPC or IPFS unavailable, halted after repeated failures: one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["cli", "main"]


@click.group()
def cli() -> None:
    """The Tenzro Train syncer daemon."""


@cli.command("run")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="syncer.yaml (see operator/examples/syncer.yaml)")
@click.option("--task-id", default=None, help="override the config's task_id")
@click.option("--log-level", default=None, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="override the config's log_level")
def run_cmd(config_path: Path, task_id: str | None, log_level: str | None) -> None:
    """Register, get elected, aggregate and finalize every round, seal."""
    from tenzro_operator.daemon import run_daemon_cli
    from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig

    sys.exit(run_daemon_cli(SyncerDaemon, SyncerDaemonConfig, config_path, "syncer", task_id=task_id,
                            log_level=log_level))


def main() -> None:
    """Entry point (``python -m tenzro_operator.syncer_cli``; the lead maps ``tenzro syncer run``)."""
    cli()


if __name__ == "__main__":
    main()
