"""The click group of a daemon role (``tenzro-trainer``, ``python -m tenzro_operator.cli.syncer``,
``tenzro trainer`` / ``tenzro syncer``): one ``run`` command that loads the role's config and runs
its daemon in the foreground (`tenzro_operator.daemon.run_daemon_cli`).

Only click is imported here: the daemon classes (torch, the trainer library) are imported when
``run`` is invoked, so ``tenzro --help`` stays fast.

Exit codes of ``run``: 0 after the run is over (or on SIGTERM/SIGINT, state saved), 1 on a clear
error (config, keystore, RPC or IPFS unavailable, halted after repeated failures: one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import click

__all__ = ["daemon_group"]

LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]
LOG_FORMATS = ["text", "kv", "json"]  # tenzro_operator.logs.LOG_FORMATS (not imported: keeps --help fast)


def daemon_group(role: str, load: Callable[[], tuple[type, type]], *, help: str, run_help: str) -> click.Group:
    """A click group with the ``run`` command of one daemon role.

    Args:
        role: ``"trainer"``, ``"syncer"`` or ``"watcher"`` (the logging role, and the name of the example config
            ``operator/examples/<role>.yaml`` in the help).
        load: returns ``(daemon class, config class)``; called only when ``run`` is invoked. A
            daemon class with a ``run_cli(config_cls, config_path, role, **overrides) -> int``
            classmethod is run by it (e.g. the watcher, which needs no keystore); else by
            `tenzro_operator.daemon.run_daemon_cli`.
        help: the group's help line.
        run_help: the ``run`` command's help line.

    Returns:
        The group: ``run --config PATH [--task-id ID] [--log-level LEVEL] [--log-format FORMAT]
        [--ipfs-peer MULTIADDR ...]``
        exits with the daemon's exit code.
    """

    @click.group(name=role, help=help)
    def group() -> None:
        pass

    @group.command("run", help=run_help)
    @click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
                  help=f"{role}.yaml (see operator/examples/{role}.yaml)")
    @click.option("--task-id", default=None, help="override the config's task_id")
    @click.option("--log-level", default=None, type=click.Choice(LOG_LEVELS), help="override the config's log_level")
    @click.option("--log-format", default=None, type=click.Choice(LOG_FORMATS),
                  help="override the config's log_format: text, kv (key=value) or json (one object per line)")
    @click.option("--ipfs-peer", "ipfs_peers", multiple=True, metavar="MULTIADDR",
                  help="override the config's ipfs_bootstrap: another party's IPFS node "
                       "(/ip4/<host>/tcp/<port>/p2p/<peer id>) to stay connected to; repeatable")
    def run_cmd(config_path: Path, task_id: str | None, log_level: str | None, log_format: str | None,
                ipfs_peers: tuple[str, ...]) -> None:
        from tenzro_operator.daemon import run_daemon_cli

        daemon_cls, config_cls = load()
        overrides = dict(task_id=task_id, log_level=log_level, log_format=log_format,
                         ipfs_bootstrap=list(ipfs_peers) or None)
        run_cli = getattr(daemon_cls, "run_cli", None)
        if run_cli is not None:
            sys.exit(run_cli(config_cls, config_path, role, **overrides))
        sys.exit(run_daemon_cli(daemon_cls, config_cls, config_path, role, **overrides))

    return group
