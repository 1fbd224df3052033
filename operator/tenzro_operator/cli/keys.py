"""``tenzro keys``: encrypted keystores (eth-account, Web3 Secret Storage v3): ``new`` and
``devnet`` (anvil's well-known accounts). Registered by `tenzro_operator.cli.main`."""

from __future__ import annotations

from pathlib import Path

import click

from tenzro_operator.errors import TenzroError


@click.command("new")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--password-env", default="TENZRO_KEYSTORE_PASSWORD", show_default=True)
@click.option("--import-key-env", default=None, help="env var holding a private key to import (else a new key)")
def keys_new(out: Path, password_env: str, import_key_env: str | None) -> None:
    """Create an encrypted keystore (password from --password-env or a prompt); prints the address."""
    import os

    from tenzro_operator.keys import create_keystore, resolve_password

    key = None
    if import_key_env:
        key = os.environ.get(import_key_env)
        if not key:
            raise TenzroError(f"${import_key_env} is not set")
    click.echo(create_keystore(out, resolve_password(password_env, what=str(out)), key))


@click.command("devnet")
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--role", "roles", multiple=True, required=True, help="ROLE=INDEX of anvil's accounts, repeatable")
@click.option("--password-env", default="TENZRO_KEYSTORE_PASSWORD", show_default=True)
def keys_devnet(directory: Path, roles: tuple[str, ...], password_env: str) -> None:
    """Keystores from anvil's well-known test accounts (devnets only)."""
    from tenzro_operator.keys import anvil_account, create_devnet_keystores, resolve_password

    mapping = {}
    for r in roles:
        name, _, idx = r.partition("=")
        if not name or not idx.isdigit():
            raise click.BadParameter(f"{r!r}: expected ROLE=INDEX", param_hint="--role")
        mapping[name] = int(idx)
    paths = create_devnet_keystores(directory, mapping, resolve_password(password_env, what="devnet keystores"))
    for role, p in paths.items():
        click.echo(f"{role}\t{anvil_account(mapping[role]).address}\t{p}")


def register(keys: click.Group) -> None:
    """Attach ``new``, ``devnet`` to the ``tenzro keys`` group."""
    for command in (keys_new, keys_devnet,):
        keys.add_command(command)
