"""Issue #24, the trainer's delivery to a syncer endpoint under attack: a syncer-signed URL naming
the trainer's own services (loopback with a query string), an endpoint that trickles, one that
answers far more than a batch answer, one that redirects, one that hangs; and the forced path's
state across a restart. Every hostile server is a raw socket server on 127.0.0.1 in a thread,
bounded in time and bytes."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from tenzro_operator.errors import IpfsError, RpcUnavailable
from tenzro_operator.roles.delivery import DeliveryError, post_messages
from tenzro_operator.roles.endpoint_policy import Endpoint, EndpointRefused, PinnedTransport, resolve_endpoint
from tenzro_operator.roles.trainer_delivery import ForcedPath, SubmissionDelivery
from tenzro_operator.roles.trainer_rounds import RoundFollowing
from tenzro_operator.root_flow import RootFlowError

OK_ANSWER = b'[{"jsonrpc":"2.0","id":0,"result":{"accepted":true}}]'


class Hostile:
    """A one-thread HTTP/1.1 server on 127.0.0.1: ``behave(conn, request_bytes)`` answers each
    connection; every request's head is kept in ``requests``. Stops at ``close`` (bounded: every
    behaviour ends by itself within ~20 s)."""

    def __init__(self, behave) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.behave, self.requests, self.sent = behave, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    self.requests.append(data.split(b"\r\n\r\n")[0].decode(errors="replace"))
                    self.behave(self, conn)
                except OSError:
                    pass

    def send(self, conn, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(25)


@pytest.fixture
def hostile():
    servers = []

    def make(behave):
        servers.append(Hostile(behave))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def _answer(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
            "Connection: close\r\n\r\n").encode() + body


def _ok(srv, conn):
    srv.send(conn, _answer(OK_ANSWER))


def _trickle(srv, conn):
    """A valid answer, one byte every 0.1 s from the status line on (~20 s in all, at most)."""
    for b in _answer(OK_ANSWER)[:200]:
        if srv._stop.is_set():
            return
        srv.send(conn, bytes([b]))
        time.sleep(0.1)


def _padded(srv, conn):
    """A valid batch answer padded with 8 MiB of JSON whitespace, chunked (no Content-Length)."""
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                   b"Connection: close\r\n\r\n")
    pad = b" " * (1 << 16)
    for piece in [b"["] + [pad] * 128 + [OK_ANSWER[1:]]:
        srv.send(conn, b"%x\r\n%s\r\n" % (len(piece), piece))
    srv.send(conn, b"0\r\n\r\n")


def _huge_declared(srv, conn):
    """Declares 256 MiB, sends 64 KiB and waits (a client that honours the length would read on)."""
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 268435456\r\n\r\n")
    srv.send(conn, b" " * (1 << 16))
    srv._stop.wait(5)


def _hang(srv, conn):
    srv._stop.wait(10)


# ----------------------------------------------------------------------------- the URL policy


@pytest.mark.parametrize("url,why", [
    ("http://127.0.0.1:5001/api/v0/pin/rm?arg=bafkqaaa", "query string"),
    ("http://127.0.0.1:9112/", "loopback"),
    ("http://localhost:9112/", "loopback"),
    ("http://[::1]:9112/", "loopback"),
    ("http://10.1.2.3/", "private"),
    ("http://192.168.0.7:9112/", "private"),
    ("http://[fc00::1]/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://100.64.0.1/", "non-global"),
    ("http://0.0.0.0:9112/", "unspecified"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://user:pw@93.184.216.34/", "user info"),
    ("http://93.184.216.34/#x", "fragment"),
    ("ftp://93.184.216.34/", "http(s)"),
])
def test_an_announced_url_off_policy_is_refused(url, why):
    with pytest.raises(EndpointRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        resolve_endpoint(url, allow_private=False)


def test_the_policy_allows_public_hosts_and_private_ones_only_when_configured():
    assert resolve_endpoint("https://93.184.216.34:8443/rpc", allow_private=False).address == "93.184.216.34"
    assert resolve_endpoint("http://127.0.0.1:9112/", allow_private=True).address == "127.0.0.1"
    with pytest.raises(EndpointRefused, match="query string"):  # allowed hosts still take no query string
        resolve_endpoint("http://127.0.0.1:9112/?a=1", allow_private=True)
    for url in ("http://0.0.0.0:9112/", "http://224.0.0.1/"):  # never, whatever is allowed
        with pytest.raises(EndpointRefused):
            resolve_endpoint(url, allow_private=True)
    # the trainer's own IPFS API / chain node: refused even with private hosts allowed
    with pytest.raises(EndpointRefused, match="own service"):
        resolve_endpoint("http://localhost:5001/api/v0/shutdown", allow_private=True,
                         own=["http://127.0.0.1:5001", "http://127.0.0.1:8545"])
    assert resolve_endpoint("http://127.0.0.1:9112/", allow_private=True, own=["http://127.0.0.1:5001"]).port == 9112
    # the operator's own configured URL is taken as written
    assert resolve_endpoint("http://127.0.0.1:9112/?key=k", allow_private=False, trusted=True).port == 9112


def test_the_connection_goes_to_the_checked_address_without_a_second_lookup(hostile):
    """A name that resolves nowhere (.invalid), pinned to the checked 127.0.0.1: the request reaches
    the server with the name as its Host (what a DNS answer changed after the check cannot steer)."""
    srv = hostile(_ok)
    ep = Endpoint(url=f"http://syncer.invalid:{srv.port}/", host="syncer.invalid", port=srv.port, address="127.0.0.1")
    with httpx.Client(transport=PinnedTransport(ep, time.monotonic() + 5), trust_env=False) as c:
        assert c.post(ep.url, json=[]).status_code == 200
    assert f"host: syncer.invalid:{srv.port}" in srv.requests[0].lower()


# ----------------------------------------------------------------------------- the client's limits


def test_a_trickling_endpoint_is_cut_at_the_total_deadline(hostile):
    """The issue's 20.3 s held despite a 3 s timeout: every byte came within the per-read timeout."""
    srv = hostile(_trickle)
    t0 = time.monotonic()
    with pytest.raises(DeliveryError, match="Timeout"):
        post_messages(srv.url, [b"{}"], 1.0)
    assert time.monotonic() - t0 < 3.0  # 1 s deadline, generous margin; the trickle lasts ~20 s
    assert srv.sent < 40  # cut after ~10 bytes of 200


def test_an_answer_over_the_cap_is_not_read_further(hostile):
    srv = hostile(_padded)
    with pytest.raises(DeliveryError, match="over the cap of 65536"):
        post_messages(srv.url, [b"{}"], 5.0, max_response_bytes=1 << 16)


def test_an_answer_declared_over_the_cap_is_refused_unread(hostile):
    srv = hostile(_huge_declared)
    t0 = time.monotonic()
    with pytest.raises(DeliveryError, match="268435456 bytes is over the cap"):
        post_messages(srv.url, [b"{}"], 3.0)
    assert time.monotonic() - t0 < 2.0


def test_a_redirect_is_not_followed(hostile):
    target = hostile(_ok)
    srv = hostile(lambda s, c: s.send(c, _answer(b"", "307 Temporary Redirect", f"Location: {target.url}\r\n")))
    with pytest.raises(DeliveryError, match="HTTP 307"):
        post_messages(srv.url, [b"{}"])
    assert target.requests == []


def test_a_compressed_answer_is_refused_and_identity_asked_for(hostile):
    srv = hostile(lambda s, c: s.send(c, _answer(b"\x1f\x8b" + b"\0" * 30, extra="Content-Encoding: gzip\r\n")))
    with pytest.raises(DeliveryError, match="gzip"):
        post_messages(srv.url, [b"{}"])
    assert "accept-encoding: identity" in srv.requests[0].lower()


def test_a_well_behaved_endpoint_still_gets_its_answers_read(hostile):
    srv = hostile(_ok)
    assert post_messages(srv.url, [b"{}"]) == [None]


# ----------------------------------------------------------------------------- the trainer


class _Trainer(SubmissionDelivery, ForcedPath, RoundFollowing):
    """Its delivery, forced path and round following alone: a config, a data dir, a task, fakes for the rest."""

    def __init__(self, tmp_path, announced: str | None = None, **cfg) -> None:
        self.config = SimpleNamespace(**{"syncer_rpc": None, "publish_pubsub": True, "force_onchain": False,
                                         "syncer_rpc_allow_private": False, "syncer_rpc_deadline_s": 1.0,
                                         "syncer_rpc_max_response_bytes": 1 << 20,
                                         "ipfs_api": "http://127.0.0.1:5001", "node_rpc": "http://127.0.0.1:8545",
                                         **cfg})
        self._announced = announced
        self.data_dir, self.task_id = tmp_path, bytes(range(32))
        self.account = SimpleNamespace(address="0x" + "ab" * 20)
        self.spec = SimpleNamespace(require_protocol=lambda: SimpleNamespace(flow="root"))
        self.summary: dict = {}
        self.calls: list = []
        self.chain = SimpleNamespace(commit_submission=lambda *a: self.calls.append(("commit", a[1:3])),
                                     submit_outer_gradient=lambda *a: self.calls.append(("reveal", a[1:3])))
        self.ipfs = SimpleNamespace(cat=self._no_transcript)
        self.root_prepare()

    def syncer_rpc_url(self):
        return self._announced

    @staticmethod
    def _no_transcript(*a, **k):
        raise IpfsError("nobody serves the transcript")

    def drain(self) -> None:
        if getattr(self, "_delivery", None) is not None:
            assert self._delivery.wait_idle(15)


def test_an_announced_url_at_the_trainers_own_ipfs_api_is_never_posted_to(hostile, tmp_path, caplog):
    """The issue's attack: the run's syncer announces ``http://127.0.0.1:<kubo>/api/v0/pin/rm?arg=<cid>``."""
    kubo = hostile(_ok)
    t = _Trainer(tmp_path, f"{kubo.url}api/v0/pin/rm?arg=bafkreipayload", ipfs_api=kubo.url.rstrip("/"))
    caplog.set_level(logging.WARNING, logger="tenzro.trainer")
    t.deliver_rpc(0, [b"{}"])
    t.drain()
    assert kubo.requests == []
    assert any("not posting to the announced syncer endpoint" in r.getMessage() and "query string" in r.getMessage()
               for r in caplog.records)


def test_a_loopback_announcement_is_refused_by_default_and_posted_when_allowed(hostile, tmp_path):
    srv = hostile(_ok)
    t = _Trainer(tmp_path, srv.url)
    t.deliver_rpc(0, [b"{}"])
    t.drain()
    assert srv.requests == []
    t = _Trainer(tmp_path, srv.url, syncer_rpc_allow_private=True)
    t.deliver_rpc(0, [b"{}"])
    t.drain()
    assert len(srv.requests) == 1 and srv.requests[0].startswith("POST / ")


def test_a_hanging_endpoint_never_holds_the_trainers_loop(hostile, tmp_path, caplog):
    """The issue's trainer was held 20.3 s and never reached `force`: the post now runs on a worker."""
    srv = hostile(_hang)
    t = _Trainer(tmp_path, syncer_rpc=srv.url, syncer_rpc_deadline_s=2.0)
    caplog.set_level(logging.WARNING, logger="tenzro.trainer")
    t0 = time.monotonic()
    for _ in range(5):  # five polls of one round: the batches replace one another in the queue
        t.deliver_rpc(0, [b"{}"])
    assert time.monotonic() - t0 < 0.5  # a 2 s deadline each if it were posted here
    t.drain()
    assert 1 <= t._delivery.posted <= 2  # the first batch, then at most the latest of the others
    assert [r.getMessage() for r in caplog.records if "does not answer" in r.getMessage()]


def test_the_forced_switch_survives_a_restart(tmp_path):
    t = _Trainer(tmp_path)
    assert not t.forced
    t._committed = {4: {"transcriptCid": "bafk", "transcriptHash": b"\0" * 32}}
    t.check_left_out(4, {0: None}, bitmap=0)  # left out, the transcript unread: silence
    assert t.forced
    assert _Trainer(tmp_path).forced  # a restart keeps the forced path


def test_the_forced_paths_onchain_steps_survive_a_restart(tmp_path):
    t = _Trainer(tmp_path, force_onchain=True)
    msg = SimpleNamespace(commitment=lambda: b"\1" * 32, signed_payload=lambda: "payload")
    t._outbox = {5: [(0, msg), (1, msg)]}
    t.force(5, reveal=False, closes=0)
    assert t.calls == [("commit", (5, 0)), ("commit", (5, 1))]
    again = _Trainer(tmp_path)  # restarted in the reveal phase: reveals, does not commit again
    again._outbox = {5: [(0, msg), (1, msg)]}
    assert again.forced and again._onchain == {5: {0: "committed", 1: "committed"}}
    again.force(5, reveal=True, closes=0)
    assert again.calls == [("reveal", (5, 0)), ("reveal", (5, 1))]
    saved = json.loads(again.forced_path.read_text())
    assert saved["onchain"] == {"5": {"closes": 0, "steps": {"0": "revealed", "1": "revealed"}}} and saved["forced"]
    again.force(5, reveal=False, closes=99)  # round 5 reopened (a rewind): the new opening's commitments go on-chain
    assert again.calls[-2:] == [("commit", (5, 0)), ("commit", (5, 1))]


def test_a_commitment_sent_without_an_answer_is_revealed_after_a_restart(tmp_path):
    """A commitment whose transaction died without an answer may have been mined, and one never
    revealed is slashed (``slashUnrevealed``): it is sent again while the commit phase lasts, and
    revealed after it, also by a restarted trainer."""
    t = _Trainer(tmp_path, force_onchain=True)
    msg = SimpleNamespace(commitment=lambda: b"\1" * 32, signed_payload=lambda: "payload")
    t._outbox = {5: [(0, msg)]}

    def dies(*a):
        t.calls.append(("commit", a[1:3]))
        raise RpcUnavailable("http://127.0.0.1:1", 3, "connection reset")

    t.chain.commit_submission = dies
    with pytest.raises(RpcUnavailable):
        t.force(5, reveal=False, closes=0)
    assert t._onchain == {5: {0: "sent"}}
    with pytest.raises(RpcUnavailable):
        t.force(5, reveal=False, closes=0)  # still in the phase: sent again
    assert t.calls == [("commit", (5, 0))] * 2
    again = _Trainer(tmp_path)  # restarted in the reveal phase: reveals what may have landed
    again._outbox = {5: [(0, msg)]}
    assert again._onchain == {5: {0: "sent"}}
    again.force(5, reveal=True, closes=0)
    assert again.calls == [("reveal", (5, 0))] and again._onchain == {5: {0: "revealed"}}


def test_a_node_that_lags_behind_a_committed_round_is_read_again_not_a_failure(tmp_path):
    """The registry shows round 3 committed but the node asked for its logs does not return the
    event yet (it lags: the chaos test's proxy): read again until it does; a node that never does
    fails the step after ``wait_s``."""
    t = _Trainer(tmp_path)
    t.poll_s, t.events = 0.01, SimpleNamespace(start_block=0)
    t.sleep = lambda s: time.sleep(s)
    event = {"event": "RoundCommitted", "args": {"round": 3, "acceptedBitmaps": [1]}}
    answers = [[], [], [event]]
    t.chain.block_number = lambda: 9
    t.chain.get_logs = lambda *a, **k: answers.pop(0) if answers else []
    assert t._committed_event(3, wait_s=5.0) == event["args"] and answers == []
    with pytest.raises(RootFlowError, match="no RoundCommitted event for round 3"):
        t._committed_event(3, wait_s=0.05)


def test_a_corrupt_forced_state_is_a_warning_not_a_crash(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenzro.trainer")
    t = _Trainer(tmp_path)
    t.forced_path.write_bytes(b"\x00not json{")
    t = _Trainer(tmp_path)
    assert not t.forced and t._onchain == {}
    assert any("cannot be read" in r.getMessage() for r in caplog.records)
    t.forced_path.write_text(json.dumps({"task": "0x" + "ff" * 32, "forced": True, "onchain": {}}))
    assert not _Trainer(tmp_path).forced  # another run's state is not this one's


def test_the_trainer_config_is_public_hosts_only_by_default_and_the_devnet_example_allows_loopback():
    from pathlib import Path

    from tenzro_operator.config import TrainerConfig, load_config

    t = TrainerConfig()
    assert (t.syncer_rpc_allow_private, t.syncer_rpc_deadline_s, t.syncer_rpc_max_response_bytes) == \
        (False, 3.0, 1 << 20)
    example = Path(__file__).resolve().parents[2] / "operator/examples/trainer.yaml"
    assert load_config(example, TrainerConfig).syncer_rpc_allow_private is True
