"""``tenzro explorer``: serve the read-only run explorer until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import signal
from pathlib import Path

import click

DEFAULT_PORT = 8080
DEFAULT_REFRESH_S = 5  # seconds between reloads of a live run's page
MAX_CONNECTIONS = 64  # as tenzro_operator.explorer.server.MAX_CONNECTIONS (not imported: keeps `--help` fast)
READ_TIMEOUT_S = 10.0  # as tenzro_operator.explorer.server.READ_TIMEOUT_S


def register(cli: click.Group) -> None:
    """Attach ``explorer`` to the top-level ``tenzro`` group."""
    from tenzro_operator.cli.common import DEFAULT_IPFS, Ctx, deployments_option, rpc_option

    @cli.command("explorer")
    @click.option("--host", default="127.0.0.1", show_default=True,
                  help="address to listen on (the default serves this machine only)")
    @click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
                  help="TCP port (0: any free one)")
    @click.option("--refresh", "refresh_s", default=DEFAULT_REFRESH_S, show_default=True,
                  type=click.IntRange(0, 3600), help="seconds between reloads of a live run's page (0: never)")
    @click.option("--syncer-rounds", "syncer_rounds", multiple=True,
                  type=click.Path(dir_okay=False, path_type=Path),
                  help="a syncer's <data_dir>/syncer-rounds.jsonl: shows its held-out loss per round (repeatable)")
    @rpc_option
    @deployments_option
    @click.option("--ipfs", envvar="TENZRO_IPFS_API", default=DEFAULT_IPFS, show_default=True, show_envvar=True,
                  help="Kubo RPC API of the IPFS node")
    @click.option("--max-connections", default=MAX_CONNECTIONS, show_default=True, type=click.IntRange(1, 10_000),
                  help="connections served at a time (one more is answered 503)")
    @click.option("--read-timeout", "read_timeout_s", default=READ_TIMEOUT_S, show_default=True,
                  type=click.FloatRange(0.1, 600), help="seconds a client has to send a whole request")
    def explorer(host: str, port: int, refresh_s: int, syncer_rounds: tuple[Path, ...], rpc: str | None,
                 deployments: Path, ipfs: str, max_connections: int, read_timeout_s: float) -> None:
        """Watch runs in a browser: a read-only explorer of the chain and the IPFS node (runs,
        trainers, rounds, held-out loss, slashes, receipts). No key is needed; every page has a
        JSON twin under /api. Live runs refresh themselves."""
        from tenzro_operator.explorer.server import Explorer, ExplorerServer
        from tenzro_operator.explorer.sources import ChainSource, SpecCache, SyncerRecords
        from tenzro_operator.ipfs import IpfsClient
        from tenzro_operator.redact import redact_url

        rpc_url = Ctx(rpc, deployments, None, "", ipfs).rpc
        ipfs_client = IpfsClient(ipfs, timeout_s=10.0, retries=1)
        app = Explorer(ChainSource(rpc_url, deployments), ipfs_client, SpecCache(ipfs_client),
                       SyncerRecords(syncer_rounds), refresh_s=refresh_s)
        server = ExplorerServer(app, host, port, max_connections=max_connections, read_timeout_s=read_timeout_s)
        click.echo(f"explorer on {server.url}/ (chain {redact_url(rpc_url)}, IPFS {redact_url(ipfs)}); "
                   "Ctrl-C stops it")
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            ipfs_client.close()


def _interrupt(signum: int, frame) -> None:
    """SIGTERM: stop like Ctrl-C."""
    raise KeyboardInterrupt
