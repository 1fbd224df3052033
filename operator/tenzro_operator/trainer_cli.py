"""``tenzro-trainer run --config trainer.yaml``: the trainer daemon in the foreground.

Exit codes: 0 after the run is over (or on SIGTERM/SIGINT, state saved), 1 on a clear error
(config, keystore, RPC or IPFS unavailable, halted after repeated failures: one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["cli", "main"]


@click.group()
def cli() -> None:
    """The Tenzro Train trainer daemon."""


@cli.command("run")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="trainer.yaml (see operator/examples/trainer.yaml)")
@click.option("--task-id", default=None, help="override the config's task_id")
@click.option("--log-level", default=None, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="override the config's log_level")
def run_cmd(config_path: Path, task_id: str | None, log_level: str | None) -> None:
    """Discover or join a run, enroll, and train every round until it is sealed."""
    from tenzro_operator.daemon import run_daemon_cli
    from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig

    sys.exit(run_daemon_cli(TrainerDaemon, TrainerDaemonConfig, config_path, "trainer", task_id=task_id,
                            log_level=log_level))


def main() -> None:
    """Console-script entry point (``tenzro-trainer``)."""
    cli()


if __name__ == "__main__":
    main()
