"""``tenzro``: the operator's command line (click).

``tenzro train`` carries the verbs of the Tenzro Train docs: ``post-task``, ``list-runs``,
``get-run``, ``get-receipt``, ``enroll-trainer``, ``submit-gradient`` (the forced path: commit,
then reveal), ``finalize-round`` (``commitRound`` by hand), ``withdraw``, ``verify-receipt``
(replay: ``tenzro_operator.replay``), plus ``register-syncer``, ``elect-syncer``,
``close-enrollment``, ``cancel-task``, ``seal``, ``sweep``, ``claim`` and ``reward`` (a trainer's reward,
`tenzro_operator.views.reward`), ``claim-syncer-fee`` and ``trainer-stats``, ``unregister-syncer``,
``new-spec`` (`tenzro_operator.cli.spec`) and ``export-model`` (`tenzro_operator.cli.forecast`).
``tenzro keys`` makes keystores; ``tenzro balance`` / ``transfer`` / ``faucet``
(`tenzro_operator.cli.wallet`) fund accounts; ``tenzro explorer`` (`tenzro_operator.explorer`)
serves a read-only run explorer to a browser; ``tenzro gateway run`` (`tenzro_operator.gateway`)
serves the ``tenzro_training_*`` JSON-RPC methods.

Every verb takes the common options ``--rpc``, ``--deployments``, ``--keystore``,
``--password-env`` and ``--ipfs`` (also from ``TENZRO_NODE_RPC``, ``TENZRO_DEPLOYMENTS``,
``TENZRO_KEYSTORE``, ``TENZRO_PASSWORD_ENV``, ``TENZRO_IPFS_API``; listed in ``--help``).
``--rpc`` defaults to the ``rpc_url`` of the deployment record, and the chain client refuses a
chain whose block 0 is not the record's. Output is rich tables for
people, ``--format json`` for scripts. Every `TenzroError` is printed as one line
(``Error: ...``) with exit code 1, never a traceback.
"""

from __future__ import annotations

import click

from tenzro_operator.cli import (
    forecast,
    keys as keys_verbs,
    spec,
    syncer,
    train_runs,
    train_syncer,
    train_trainer,
    trainer,
    wallet,
    watcher,
)
from tenzro_operator.cli.common import ENVIRONMENT_HELP, CliGroup
from tenzro_operator.explorer import cli as explorer_cli
from tenzro_operator.gateway import cli as gateway_cli

__all__ = ["cli", "main"]


@click.group(cls=CliGroup, epilog=ENVIRONMENT_HELP)
@click.version_option(package_name="tenzro-train", prog_name="tenzro")
@click.option("--log-level", default="ERROR", envvar="TENZRO_LOG_LEVEL", show_default=True, show_envvar=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--log-format", default="text", envvar="TENZRO_LOG_FORMAT", show_default=True, show_envvar=True,
              type=click.Choice(["text", "kv", "json"]),
              help="log lines on stderr: text, kv (key=value) or json (one JSON object per line)")
def cli(log_level: str, log_format: str) -> None:
    """tenzro: operate Tenzro Train runs (chain + IPFS).

    New here? `tenzro balance`, `tenzro faucet` (devnet), `tenzro train new-spec`,
    `tenzro train post-task`: the README's "Your first task" walks the whole path."""
    from tenzro_operator.logs import configure_logging

    configure_logging(log_level, log_format, role="cli")


@cli.group(cls=CliGroup, epilog=ENVIRONMENT_HELP)
def train() -> None:
    """Tenzro Train verbs: post, enroll, submit, finalize, seal, claim, inspect, withdraw, verify."""


@cli.group(cls=CliGroup)
def keys() -> None:
    """Encrypted keystores (eth-account, Web3 Secret Storage v3)."""


# every verb group registers itself here; none of them imports this module
for verbs in (train_runs, train_trainer, train_syncer, spec):
    verbs.register(train)
keys_verbs.register(keys)
forecast.register(cli, train)  # export-model (train), forecast
for verbs in (wallet, explorer_cli, gateway_cli):  # balance, transfer, faucet; explorer; gateway run
    verbs.register(cli)
# the daemons: the same commands as ``python -m tenzro_operator.cli.syncer`` / ``.watcher`` and ``tenzro-trainer``
for name, daemon in (("syncer", syncer), ("trainer", trainer), ("watcher", watcher)):
    cli.add_command(daemon.cli, name)


def main(argv: list[str] | None = None) -> None:
    """Console script entry point (``tenzro``)."""
    cli.main(args=argv, prog_name="tenzro")


if __name__ == "__main__":  # pragma: no cover
    main()
