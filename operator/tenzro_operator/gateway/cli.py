"""``tenzro gateway run --config gateway.yaml``: serve the JSON-RPC gateway in the foreground.

Exit codes: 0 on SIGTERM / SIGINT; 1 on a clear error (config, keystore, chain node not
answering, deployment record not this chain's, address in use), one line on stderr.
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["register"]


def register(cli: click.Group) -> None:
    """Attach the ``gateway`` group (``gateway run``) to the top-level ``tenzro`` group."""

    @cli.group("gateway")
    def gateway() -> None:
        """The tenzro_training_* JSON-RPC gateway (operator/RPC.md)."""

    @gateway.command("run")
    @click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                  help="gateway.yaml (fields: operator/RPC.md); without it, TENZRO_* variables and defaults")
    @click.option("--host", default=None, help="override the config's host")
    @click.option("--port", default=None, type=click.IntRange(0, 65535), help="override the config's port (0: any)")
    @click.option("--log-level", default=None, type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
                  help="override the config's log_level")
    def run(config_path: Path | None, host: str | None, port: int | None, log_level: str | None) -> None:
        """Serve tenzro_training_* (JSON-RPC 2.0 over HTTP POST) until Ctrl-C or SIGTERM. Prints
        ``gateway on <url>`` once listening."""
        from tenzro_operator.config import GatewayConfig, load_config
        from tenzro_operator.errors import TenzroError
        from tenzro_operator.gateway.app import build_gateway
        from tenzro_operator.logs import configure_logging
        from tenzro_operator.redact import redact_url

        overrides = {k: v for k, v in {"host": host, "port": port, "log_level": log_level}.items() if v is not None}
        try:
            cfg = load_config(config_path, GatewayConfig, **overrides)
            configure_logging(cfg.log_level, cfg.log_format, role="gateway")
            server = build_gateway(cfg)
        except TenzroError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            chain_url = redact_url(cfg.node_rpc)
            server.serve_forever(ready=lambda url: click.echo(f"gateway on {url} (chain {chain_url})", nl=True))
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}") from None
