"""Keys: eth-account encrypted keystores (Web3 Secret Storage v3), unlocked with a password
taken from an environment variable or an interactive prompt.

The password is never printed, logged or put in an exception message. Devnet helpers derive
anvil's well-known accounts from its public test mnemonic (BIP-44 path ``m/44'/60'/0'/0/i``)
so the demo can give each role its own keystore.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from tenzro_operator.errors import KeystoreError

__all__ = [
    "ANVIL_MNEMONIC",
    "DEFAULT_PASSWORD_ENV",
    "anvil_account",
    "create_devnet_keystores",
    "create_keystore",
    "keystore_address",
    "load_keystore",
    "resolve_password",
    "unlock",
]

ANVIL_MNEMONIC = "test test test test test test test test test test test junk"
"""anvil's default mnemonic: public, for devnets only."""
DEFAULT_PASSWORD_ENV = "TENZRO_KEYSTORE_PASSWORD"
DEVNET_SCRYPT_N = 2**12
"""scrypt cost for throw-away devnet keystores (fast to unlock); real keys use eth-account's default."""

Account.enable_unaudited_hdwallet_features()


def create_keystore(path: str | Path, password: str, private_key: str | bytes | None = None, *,
                    overwrite: bool = False, scrypt_n: int | None = None) -> str:
    """Encrypt a key (a new random one when ``private_key`` is None) into a keystore file.

    The file is written with mode 0600 through a temp file and a rename.
    ``scrypt_n`` lowers the KDF cost (devnets only); None keeps eth-account's default (2**18).

    Returns:
        The account's checksummed address.
    Raises:
        KeystoreError: the file exists (and ``overwrite`` is false), empty password, bad key.
    """
    p = Path(path)
    if p.exists() and not overwrite:
        raise KeystoreError(f"keystore {p} already exists; refusing to overwrite it")
    if not password:
        raise KeystoreError("refusing to encrypt a keystore with an empty password")
    try:
        acct = Account.from_key(private_key) if private_key is not None else Account.create()
    except (ValueError, TypeError) as exc:
        raise KeystoreError(f"not a valid secp256k1 private key for keystore {p}") from exc
    doc = Account.encrypt(acct.key, password, kdf="scrypt", iterations=scrypt_n)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, p)
    return acct.address


def _read_keystore(p: Path) -> dict:
    try:
        text = p.read_text()
    except FileNotFoundError as exc:
        raise KeystoreError(f"keystore {p} does not exist") from exc
    except OSError as exc:
        raise KeystoreError(f"keystore {p} cannot be read: {exc.strerror}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeystoreError(f"keystore {p} is not valid JSON (line {exc.lineno}): not an encrypted keystore") from exc
    if not isinstance(doc, dict) or "crypto" not in {k.lower() for k in doc}:
        raise KeystoreError(f"keystore {p} has no 'crypto' section: not an eth-account keystore (v3)")
    return doc


def keystore_address(path: str | Path) -> str | None:
    """The checksummed address a keystore declares (without decrypting), or None if it has none."""
    doc = _read_keystore(Path(path))
    addr = doc.get("address")
    if not addr:
        return None
    from eth_utils import to_checksum_address

    return to_checksum_address(addr if addr.startswith("0x") else "0x" + addr)


def load_keystore(path: str | Path, password: str) -> LocalAccount:
    """Decrypt a keystore into a signing account.

    Raises:
        KeystoreError: missing file, malformed JSON, unsupported format, or wrong password
            (the message says which; it never contains the password).
    """
    p = Path(path)
    doc = _read_keystore(p)
    try:
        key = Account.decrypt(doc, password)
    except ValueError as exc:
        if "MAC mismatch" in str(exc):
            raise KeystoreError(f"wrong password for keystore {p}") from None
        raise KeystoreError(f"keystore {p} cannot be decrypted: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise KeystoreError(f"keystore {p} is malformed: missing or bad field {exc}") from None
    return Account.from_key(key)


def resolve_password(env_var: str | None = DEFAULT_PASSWORD_ENV, *, prompt: bool = True,
                     what: str = "keystore") -> str:
    """The keystore password: ``$env_var`` if set (and non-empty), else an interactive prompt
    (getpass, no echo) when stdin is a terminal and ``prompt`` is true.

    Raises:
        KeystoreError: no variable set and no terminal to prompt on.
    """
    if env_var:
        value = os.environ.get(env_var)
        if value:
            return value
    if prompt and sys.stdin is not None and sys.stdin.isatty():
        value = getpass.getpass(f"Password for {what}: ")
        if value:
            return value
        raise KeystoreError("empty password entered")
    where = f"set ${env_var}" if env_var else "pass --password-env NAME"
    raise KeystoreError(f"no password for {what}: {where} or run in a terminal to be prompted")


def unlock(path: str | Path, password_env: str | None = DEFAULT_PASSWORD_ENV, *, prompt: bool = True) -> LocalAccount:
    """`resolve_password` then `load_keystore`."""
    return load_keystore(path, resolve_password(password_env, prompt=prompt, what=f"keystore {path}"))


def anvil_account(index: int) -> LocalAccount:
    """anvil's default account ``index`` (0 is the deployer), derived from `ANVIL_MNEMONIC`."""
    if not 0 <= index < 2**31:
        raise KeystoreError(f"bad account index {index}")
    return Account.from_mnemonic(ANVIL_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


def create_devnet_keystores(directory: str | Path, roles: dict[str, int], password: str,
                            *, overwrite: bool = True) -> dict[str, Path]:
    """Write a keystore per role from anvil's well-known accounts (devnets only).

    Args:
        directory: where ``<role>.json`` files go.
        roles: role name -> anvil account index, e.g. ``{"sponsor": 1, "syncer": 2, "trainer-0": 3}``.
        password: password of every keystore.
    Returns:
        role -> keystore path.
    """
    d = Path(directory)
    out: dict[str, Path] = {}
    for role, index in roles.items():
        path = d / f"{role}.json"
        create_keystore(path, password, anvil_account(index).key, overwrite=overwrite, scrypt_n=DEVNET_SCRYPT_N)
        out[role] = path
    return out
