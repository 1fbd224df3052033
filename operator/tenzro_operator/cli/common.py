"""What every ``tenzro`` verb shares: the common options and their `Ctx` (chain and IPFS clients
built on first use), the ``--format`` option, the argument parsers (``--task-id``, ``--did``) and
the output helpers (tables for people, JSON for scripts).

It owns no verb. Imported by `tenzro_operator.cli.main` and by every module that registers verbs
on it (``train_runs``, ``train_trainer``, ``train_syncer``, ``keys``, ``spec``, ``wallet``,
``forecast``, ``explorer.cli``, ``gateway.cli``); it must not import any of them back
(tests/test_import_graph.py).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.table import Table

from tenzro_operator.errors import TenzroError

DEFAULT_RPC = "http://127.0.0.1:8545"
DEFAULT_IPFS = "http://127.0.0.1:5001"
DEFAULT_DEPLOYMENTS = "deployments/local.json"


class CliGroup(click.Group):
    """A click group that turns every `TenzroError` into a one-line ``Error: ...`` (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TenzroError as exc:
            raise click.ClickException(str(exc)) from None


ENVIRONMENT_HELP = """\b
Environment variables (an option given on the command line wins):
  TENZRO_NODE_RPC           --rpc: JSON-RPC URL of the chain (default: the
                            deployment record's rpc_url)
  TENZRO_DEPLOYMENTS        --deployments: the deployment record
  TENZRO_IPFS_API           --ipfs: Kubo RPC API URL of the IPFS node
  TENZRO_KEYSTORE           --keystore: encrypted keystore of the sender
  TENZRO_PASSWORD_ENV       --password-env: which variable holds the password
  TENZRO_KEYSTORE_PASSWORD  the keystore password (the default variable)
  TENZRO_LOG_LEVEL          --log-level
  TENZRO_LOG_FORMAT         --log-format: text, kv or json (one JSON object
                            per line); daemons: their log_format field
  TENZRO_<FIELD>            daemons (syncer run / trainer run): any field of
                            their YAML config, nested with __, e.g.
                            TENZRO_NODE_RPC, TENZRO_INNER__LR
"""

# ------------------------------------------------------------------------------ common options


class Ctx:
    """What the common options give a verb: lazily built chain and IPFS clients.

    ``rpc`` / ``ipfs`` None mean "the ``rpc_url`` / ``ipfs_url`` the deployment record names" (what
    ``make deploy`` wrote, so a devnet on other ports is found), else `DEFAULT_RPC` / `DEFAULT_IPFS`."""

    def __init__(self, rpc: str | None, deployments: Path, keystore: Path | None, password_env: str,
                 ipfs: str | None) -> None:
        self._rpc, self.deployments, self.keystore = rpc, deployments, keystore
        self.password_env, self._ipfs = password_env, ipfs

    def _recorded(self, field: str) -> str | None:
        from tenzro_operator.chain import load_deployment

        try:
            return getattr(load_deployment(self.deployments), field)
        except TenzroError:
            return None  # ChainClient reports the missing / bad record itself

    @property
    def rpc(self) -> str:
        """The JSON-RPC URL: ``--rpc`` / ``TENZRO_NODE_RPC``, else the record's, else `DEFAULT_RPC`."""
        return self._rpc or self._recorded("rpc_url") or DEFAULT_RPC

    @property
    def ipfs_url(self) -> str:
        """The Kubo RPC URL: ``--ipfs`` / ``TENZRO_IPFS_API``, else the record's, else `DEFAULT_IPFS`."""
        return self._ipfs or self._recorded("ipfs_url") or DEFAULT_IPFS

    def signer(self):
        """The keystore's unlocked account (password from the env var or a prompt)."""
        if self.keystore is None:
            raise click.UsageError("this verb sends a transaction: pass --keystore FILE (or set TENZRO_KEYSTORE)")
        from tenzro_operator.keys import unlock

        return unlock(self.keystore, self.password_env)

    def chain(self, signer: bool = False):
        """A `ChainClient`; with ``signer`` the keystore is unlocked (password from the env var or a prompt)."""
        from tenzro_operator.chain import ChainClient

        account = self.signer() if signer else None
        return ChainClient(self.rpc, self.deployments, account, retries=3, backoff_s=0.25)

    def ipfs(self):
        from tenzro_operator.ipfs import IpfsClient

        return IpfsClient(self.ipfs_url)


#: ``--rpc`` (None: the deployment record's rpc_url, `Ctx.rpc`) and ``--deployments``, also on
#: verbs that take no keystore (``tenzro explorer``)
rpc_option = click.option("--rpc", envvar="TENZRO_NODE_RPC", default=None, show_envvar=True,
                          help=f"JSON-RPC endpoint of the chain  [default: the rpc_url recorded in --deployments, "
                               f"else {DEFAULT_RPC}]")
deployments_option = click.option("--deployments", envvar="TENZRO_DEPLOYMENTS", default=DEFAULT_DEPLOYMENTS,
                                  show_default=True, show_envvar=True, type=click.Path(dir_okay=False, path_type=Path),
                                  help="deployments/<network>.json (addresses, ABIs, chain id and block 0 hash)")


def common_options(fn: Callable) -> Callable:
    """``--rpc --deployments --keystore --password-env --ipfs`` on a verb; passes ``ctx: Ctx``."""

    @rpc_option
    @deployments_option
    @click.option("--keystore", envvar="TENZRO_KEYSTORE", default=None, show_envvar=True,
                  type=click.Path(dir_okay=False, path_type=Path), help="encrypted keystore of the sender")
    @click.option("--password-env", envvar="TENZRO_PASSWORD_ENV", default="TENZRO_KEYSTORE_PASSWORD",
                  show_default=True, show_envvar=True,
                  help="environment variable holding the keystore password (else a prompt)")
    @click.option("--ipfs", envvar="TENZRO_IPFS_API", default=None, show_envvar=True,
                  help=f"Kubo RPC API of the IPFS node  [default: the ipfs_url recorded in --deployments, "
                       f"else {DEFAULT_IPFS}]")
    @functools.wraps(fn)
    def wrapper(rpc, deployments, keystore, password_env, ipfs, **kw):
        return fn(Ctx(rpc, deployments, keystore, password_env, ipfs), **kw)

    return wrapper


format_option = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
                             show_default=True, help="table for people, json for scripts")


def parse_task_id(value: str) -> bytes:
    """``--task-id``: `tenzro_operator.spec.task_id_argument`; a bad one is a click usage error."""
    from tenzro_operator.errors import SpecError
    from tenzro_operator.spec import task_id_argument

    try:
        return task_id_argument(value)
    except SpecError as exc:
        raise click.BadParameter(exc.reason, param_hint="--task-id") from None


def parse_did(value: str) -> str:
    """``--did``: W3C DID syntax (`tenzro_operator.did`), refused before any transaction."""
    from tenzro_operator.did import check_did

    try:
        return check_did(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--did") from None


def run_of(chain, value: str):
    """The run ``--task-id`` names, or one line saying there is none on this chain."""
    from tenzro_operator.errors import ChainRevert

    tid = parse_task_id(value)
    try:
        return chain.get_run(tid)
    except ChainRevert as exc:
        if exc.error_name != "Registry__UnknownTask":
            raise
        raise TenzroError(f"no run with task id {value!r} (0x{tid.hex()}) on {chain.shown_url}; "
                          f"`tenzro train list-runs` shows the posted runs") from None


def hex32(b: bytes) -> str:
    return "0x" + bytes(b).hex()


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


#: columns of a table written to a pipe or a file: wide enough that a 66-character id or hash stays
#: on one line (grep, copy-paste), as the natural width of the table, never padded to it
PIPE_WIDTH = 1000


def console() -> Console:
    """stdout; on a terminal its width, elsewhere (a pipe, a file, a test) `PIPE_WIDTH` unless
    ``COLUMNS`` says otherwise, so ids are not folded at 80 columns."""
    wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(file=sys.stdout, soft_wrap=True, width=PIPE_WIDTH if wide else None)


def kv_table(title: str, rows: list[tuple[str, Any]]) -> None:
    t = Table(title=title, show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    for k, v in rows:
        t.add_row(k, str(v))
    console().print(t)


def tx_out(fmt: str, title: str, fields: dict[str, Any]) -> None:
    if fmt == "json":
        echo_json(fields)
    else:
        kv_table(title, list(fields.items()))


def when(ts: int) -> str:
    """Unix seconds as ISO-8601 UTC with the raw value: ``2026-11-22T18:41:17Z (1795372877)``; 0 is "-"."""
    if not ts:
        return "-"
    return f"{datetime.fromtimestamp(ts, timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} ({ts})"
