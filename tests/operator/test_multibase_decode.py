"""`pubsub.multibase_decode`, run on every message an outsider sends the syncer (each JSON-RPC
``message`` param, and the data of every pubsub message its subscription reads; issue #24's
flood). Its alphabet check was a character loop in Python (~0.34 ms for a 4 KiB message, ~45 µs
for a 500-byte forged one); these tests hold the C check to the same verdicts (its cost
is measured in operator/benchmarks/results/flood.md, not asserted here)."""

from __future__ import annotations

import base64
import os

import pytest

from tenzro_operator.errors import IpfsPubsubError
from tenzro_operator.ipfs.pubsub import multibase_decode, multibase_encode


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 63, 4096])
def test_what_it_encodes_it_decodes_in_both_bases(n):
    data = os.urandom(n)
    assert multibase_decode(multibase_encode(data)) == data
    assert multibase_decode("m" + base64.b64encode(data).decode()) == data  # padded base64
    assert multibase_decode("m" + base64.b64encode(data).decode().rstrip("=")) == data


@pytest.mark.parametrize("text", [
    "", "z123", "uab+c", "mab-c", "uab/c", "mab_c", "uab c", "uab\nc", "uabé1", "uab\u0661c",  # Arabic-Indic digit: alnum, not ASCII
    "uabcde", "u" + "A" * 5, "uab=c", "u\x00abc",
])
def test_anything_outside_the_alphabet_is_refused(text):
    with pytest.raises(IpfsPubsubError):
        multibase_decode(text)
