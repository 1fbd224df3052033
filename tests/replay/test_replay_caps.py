"""Issue #24: the replay (``verify-receipt``, the watcher) read every object under the IPFS
client's 1 GiB default cap, so a 768 MiB payload went into memory whole. Each read of the
root-flow checker (`tenzro_operator.root_check`) now has the cap of what it reads:
`TaskRuntime.payload_cap` for payloads, weights and momentum, the transcript cap for transcripts;
a larger object is cut off at the cap (real local IPFS node)."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from tenzro_operator.errors import IpfsTooLarge
from tenzro_operator.ipfs import DEFAULT_MAX_BYTES
from tenzro_operator.replay import verify_receipt


def test_a_capped_read_refuses_an_object_over_its_cap_without_reading_it_whole(stack):
    data = os.urandom(3 * 1024 * 1024)
    cid = stack.ipfs.add(data)
    tracemalloc.start()
    try:
        with pytest.raises(IpfsTooLarge, match=f"more than {256 * 1024} bytes"):
            stack.ipfs.cat(cid, max_bytes=256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, f"peak {peak} bytes held for a 256 KiB cap"
    assert stack.ipfs.cat(cid, max_bytes=len(data)) == data


class _Recording:
    """An IpfsClient that records the ``max_bytes`` of every ``cat``."""

    def __init__(self, ipfs) -> None:
        self._ipfs, self.caps = ipfs, []

    def cat(self, cid, **kw):
        self.caps.append((cid, kw.get("max_bytes")))
        return self._ipfs.cat(cid, **kw)

    def __getattr__(self, name):
        return getattr(self._ipfs, name)


@pytest.mark.slow
def test_every_read_of_the_replay_has_a_cap_of_its_own(stack, honest_run):
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES

    ipfs = _Recording(stack.ipfs)
    report = verify_receipt(stack.chain(), ipfs, honest_run.task_id)
    assert report.ok, report.first_mismatch
    transcripts = set(honest_run.transcript_cids)
    assert len(ipfs.caps) > len(transcripts)  # transcripts, payloads, spec, weights
    for cid, cap in ipfs.caps:
        assert cap is not None and cap < DEFAULT_MAX_BYTES, (cid, cap)
        if cid in transcripts:
            assert cap == MAX_TRANSCRIPT_BYTES
        else:
            assert cap <= 64 * 1024 * 1024, (cid, cap)  # a payload, weights or the spec of this tiny model
