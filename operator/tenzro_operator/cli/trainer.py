"""``tenzro-trainer run --config trainer.yaml``: the trainer daemon in the foreground.

Exit codes: 0 after the run is over (or on SIGTERM/SIGINT, state saved), 1 on a clear error
(config, keystore, RPC or IPFS unavailable, halted after repeated failures: one line on stderr).
"""

from __future__ import annotations

from tenzro_operator.cli.daemon import daemon_group

__all__ = ["cli", "main"]


def _load():
    from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig

    return TrainerDaemon, TrainerDaemonConfig


cli = daemon_group("trainer", _load, help="The Tenzro Train trainer daemon.",
                   run_help="Discover or join a run, enroll, and train every round until it is sealed.")


def main() -> None:
    """Console-script entry point (``tenzro-trainer``)."""
    cli()


if __name__ == "__main__":
    main()
