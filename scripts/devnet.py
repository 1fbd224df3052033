"""Devnet launcher: `python scripts/devnet.py up|down|status`.

Starts anvil (state persisted under .devnet/anvil) and the local Helia IPFS
node (repo under .devnet/ipfs) on 127.0.0.1:8545 and 127.0.0.1:5001 (or the
--rpc-port / --ipfs-port given), waits until both answer and records their
pids and the chain's block 0 hash in .devnet/pids.json. `check` exits 1 unless
the services on those ports are this data dir's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from tenzro_operator import devnet
from tenzro_operator.errors import TenzroError

console = Console()


def _cfg(data_dir: str, rpc_port: int | None, ipfs_port: int | None) -> devnet.DevnetConfig:
    return devnet.recorded_config(Path(data_dir).resolve(), rpc_port, ipfs_port)


_options = [
    click.option("--data-dir", default=str(devnet.DEFAULT_DATA_DIR), show_default=True, help="Where chain state, IPFS repo, logs and pids live."),
    click.option("--rpc-port", type=int, default=None,
                 help=f"[default: the port recorded in DATA_DIR/pids.json, else {devnet.DEFAULT_RPC_PORT}]"),
    click.option("--ipfs-port", type=int, default=None,
                 help=f"[default: the port recorded in DATA_DIR/pids.json, else {devnet.DEFAULT_IPFS_PORT}]"),
]


def with_options(f):
    for opt in reversed(_options):
        f = opt(f)
    return f


@click.group()
def cli() -> None:
    """Start, stop and inspect the local devnet (anvil + IPFS node)."""


@cli.command()
@with_options
def up(data_dir: str, rpc_port: int, ipfs_port: int) -> None:
    """Start anvil and the IPFS node (reuses them if already running)."""
    pids = devnet.up(_cfg(data_dir, rpc_port, ipfs_port))
    console.print(f"devnet up: chain {pids['rpc_url']} (pid {pids.get('anvil', '?')}), "
                  f"IPFS {pids['ipfs_url']} (pid {pids.get('ipfs', '?')})")


@cli.command()
@with_options
def down(data_dir: str, rpc_port: int, ipfs_port: int) -> None:
    """Stop the devnet's services (anvil writes its state on the way out)."""
    stopped = devnet.down(_cfg(data_dir, rpc_port, ipfs_port))
    console.print(f"devnet down: stopped {', '.join(stopped) or 'nothing (not running)'}")


@cli.command()
@with_options
def check(data_dir: str, rpc_port: int, ipfs_port: int) -> None:
    """Exit 0 iff the chain (and IPFS node) on the ports are the ones this data dir started
    (`make deploy` runs it, so it never deploys into another checkout's devnet)."""
    pids = devnet.require_ours(_cfg(data_dir, rpc_port, ipfs_port))
    console.print(f"devnet ours: chain {pids['rpc_url']} (block 0 {pids['genesis_hash']})")


@cli.command()
@with_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(data_dir: str, rpc_port: int, ipfs_port: int, as_json: bool) -> None:
    """Show which services answer; exits 1 if one does not."""
    cfg = _cfg(data_dir, rpc_port, ipfs_port)
    rows = devnet.status(cfg)
    if as_json:
        click.echo(devnet.status_json(cfg))
    else:
        t = Table(title="devnet")
        for col in ("service", "url", "pid", "state", "detail"):
            t.add_column(col)
        for s in rows:
            t.add_row(s.name, s.url, str(s.pid or "-"), "[green]up[/]" if s.up else "[red]down[/]",
                      ", ".join(f"{k}={v}" for k, v in s.detail.items()))
        console.print(t)
    sys.exit(0 if all(s.up for s in rows) else 1)


def main() -> None:
    try:
        cli(standalone_mode=True)
    except TenzroError as e:
        console.print(f"[red]error:[/] {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
