"""Keystores: round trip, wrong password, missing / malformed files, password sources, devnet keys."""

from __future__ import annotations

import json
import logging

import pytest

from tenzro_operator import keys
from tenzro_operator.errors import KeystoreError

# anvil's documented default accounts (Foundry book): index 0 and 1.
ANVIL_0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
ANVIL_1 = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
ANVIL_0_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


def test_anvil_accounts_match_foundry_defaults():
    assert keys.anvil_account(0).address == ANVIL_0
    assert keys.anvil_account(1).address == ANVIL_1
    assert "0x" + keys.anvil_account(0).key.hex().removeprefix("0x") == ANVIL_0_KEY


def test_round_trip(tmp_path):
    path = tmp_path / "k.json"
    addr = keys.create_keystore(path, "s3cret", ANVIL_0_KEY, scrypt_n=2**12)
    assert addr == ANVIL_0
    assert (path.stat().st_mode & 0o777) == 0o600
    assert "s3cret" not in path.read_text()
    assert keys.keystore_address(path) == ANVIL_0
    assert keys.load_keystore(path, "s3cret").address == ANVIL_0


def test_new_random_key_and_no_overwrite(tmp_path):
    path = tmp_path / "k.json"
    a = keys.create_keystore(path, "pw", scrypt_n=2**12)
    assert keys.load_keystore(path, "pw").address == a
    with pytest.raises(KeystoreError, match="already exists"):
        keys.create_keystore(path, "pw", scrypt_n=2**12)
    with pytest.raises(KeystoreError, match="empty password"):
        keys.create_keystore(tmp_path / "e.json", "")


def test_wrong_password_is_clear_and_never_echoed(tmp_path, caplog):
    path = tmp_path / "k.json"
    keys.create_keystore(path, "right-horse", ANVIL_0_KEY, scrypt_n=2**12)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(KeystoreError) as ei:
        keys.load_keystore(path, "wrong-battery")
    assert str(ei.value) == f"wrong password for keystore {path}"
    assert "wrong-battery" not in caplog.text and "right-horse" not in caplog.text
    assert ei.value.__cause__ is None  # no chained exception that could carry secrets


def test_missing_and_malformed(tmp_path):
    with pytest.raises(KeystoreError, match="does not exist"):
        keys.load_keystore(tmp_path / "nope.json", "pw")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(KeystoreError, match="not valid JSON"):
        keys.load_keystore(bad, "pw")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(KeystoreError, match="no 'crypto' section"):
        keys.load_keystore(other, "pw")


def test_password_from_env_or_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("MY_PW", "from-env")
    assert keys.resolve_password("MY_PW") == "from-env"
    monkeypatch.delenv("MY_PW")
    monkeypatch.setattr("sys.stdin", open("/dev/null"))  # not a terminal: no prompt possible
    with pytest.raises(KeystoreError, match=r"set \$MY_PW"):
        keys.resolve_password("MY_PW")
    path = tmp_path / "k.json"
    keys.create_keystore(path, "pw", ANVIL_0_KEY, scrypt_n=2**12)
    monkeypatch.setenv("MY_PW", "pw")
    assert keys.unlock(path, "MY_PW").address == ANVIL_0


def test_prompt_when_interactive(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr(keys.getpass, "getpass", lambda prompt: "typed")
    assert keys.resolve_password("NO_SUCH_VAR") == "typed"


def test_devnet_keystores(tmp_path):
    paths = keys.create_devnet_keystores(tmp_path, {"sponsor": 1, "trainer-0": 3}, "pw")
    assert keys.load_keystore(paths["sponsor"], "pw").address == ANVIL_1
    assert keys.load_keystore(paths["trainer-0"], "pw").address == keys.anvil_account(3).address
