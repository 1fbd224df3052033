"""A keyless outsider floods a root-flow syncer while a devnet run trains (issue "the off-chain intake
under attack"): forged commitments, reveals and announcements, over the syncer's pubsub topics and its
JSON-RPC endpoint (`tenzro_training_deliver`), at a fixed rate for the whole run.

Each rate is one run of the demo's job (`tenzro_operator.demo.run_demo`, root flow, real daemons as
separate processes) on the devnet, from the same chain state (anvil ``evm_snapshot`` / ``evm_revert``)
and with the same task name, so the run without a flood and the flooded ones train the same data with
the same seeds and the same scoring batches: an intake that absorbs the flood commits every round no
later than the run without it and credits every honest trainer the same. A rate is *absorbed* when

- every round's duration (its ``RoundCommitted`` block time minus the previous one's, or minus
  ``RoundOpened`` for round 0; chain seconds) is at most the unflooded run's plus ``--slack-s``
  (block times have a 1 s resolution and the machine is shared), and
- every trainer's accepted count and reward are identical to the unflooded run's.

The outsider holds no key the run knows and no stake: it reads the public chain (the open round, the
enrolled trainers, the syncer) and sends messages that name enrolled trainers, the open round and real
fragments (the ones that get past every cheap check), with fresh random words and signatures every time
(so remembering a failed signature does not help). ``--pubsub-rate`` of them a second are published
through an IPFS node of its own, swarm-connected to the devnet's node (a peer of its own, as on a
real network); the rest of the rate is posted to the syncer's endpoint in batches of
`delivery.MAX_BATCH` calls, each call one message. The flooder is cheap per message so that the
syncer, not the flooder, limits what gets through: messages filled into string templates (about
10 µs each), raw HTTP/1.1 over keep-alive sockets (`RawHttp`: 16 connections to the endpoint from
`OUTSIDER_ADDRESS`; 4 to its own node, 10 ``pubsub/pub`` requests pipelined at a time), one process
per channel. Before each run the chain's clock is set to the wall clock (``evm_revert`` takes it
back, and trainers refuse announcements issued far ahead of the chain).

Needs the devnet up and deployed (`make deploy`, or any devnet with ``--rpc``, ``--ipfs`` and
``--deployments``); then::

    .venv/bin/python operator/benchmarks/flood.py --rates 1000,2000,4000,8000 --rounds 2

Prints a table and writes operator/benchmarks/results/flood.md, which ends with the lines
``forged messages per second absorbed with every round on time: <N>`` and
``syncer peak RSS growth under the largest absorbed flood: <MiB> MiB``.
"""

from __future__ import annotations

import base64
import multiprocessing as mp
import os
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import click
import httpx

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results" / "flood.md"
RPC_CONNECTIONS = 16  # the outsider's keep-alive connections to the syncer's endpoint (one thread each)
PUB_CONNECTIONS = 4  # the outsider's keep-alive connections to its own IPFS node (one thread each)
PUB_PIPELINE = 10  # pubsub/pub requests sent at once on one connection (HTTP/1.1 pipelining)
OUTSIDER_ADDRESS = "127.0.0.2"  # the flooder's source address on the loopback interface
TASK = f"flood-bench-{int(time.time())}"  # one name per invocation: every run of it starts from one snapshot


# ----------------------------------------------------------------------------- forged messages

# The messages' own encoding (canonical JSON: sorted keys, no spaces), filled by %-formatting: a few
# microseconds a message, so that the flooder is not what limits the rate. `Forger` checks at start
# that each template still parses as its message class (a renamed field would otherwise turn the
# flood into cheap "malformed" refusals without anyone noticing).
_COMMIT = ('{"commitment":"0x%s","fragment":%d,"round":%d,"signature":"0x%s","task":"%s","trainer":"%s",'
           '"type":"commit"}')
_REVEAL = ('{"base_root":"0x%s","cid":"bafkrei%s","fragment":%d,"payload_hash":"0x%s","payload_root":"0x%s",'
           '"payload_sumsq":%d,"round":%d,"signature":"0x%s","task":"%s","trainer":"%s","type":"reveal"}')
_ANNOUNCE = ('{"issued":%d,"signature":"0x%s","syncer":"%s","task":"%s","type":"syncer_rpc",'
             '"url":"http://127.0.0.1:9/"}')
_CALL = '{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"message":"u%s"}}'
_RANDOM_BYTES = 32 + 26 + 32 + 32 + 65  # per message: the most any template takes (a reveal)
_BOUNDARY = "tzt-flood-boundary"
_PART_HEAD = (f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="data"\r\n'
              'Content-Type: application/octet-stream\r\n\r\n').encode()
_PART_TAIL = f"\r\n--{_BOUNDARY}--\r\n".encode()


class Forger:
    """Fresh forged messages of one task: commitments and reveals naming an enrolled trainer, the
    open round and a real fragment; announcements naming the run's syncer and a newer time. Every
    message has fresh random words and signature (so remembering a failed signature does not help).
    ``round``, ``trainers`` and ``syncer`` are the public facts, updated by the caller.

    Raises:
        AssertionError (at construction): a template no longer parses as its message class.
    """

    def __init__(self, task_id: bytes, fragments: int) -> None:
        self.task, self.fragments = "0x" + task_id.hex(), fragments
        self.round, self.trainers, self.syncer = 0, ["0x" + "11" * 20], "0x" + "22" * 20
        self._rng = random.Random(os.urandom(16))
        self._check()

    def _check(self) -> None:
        from tenzro_operator.roles.delivery import Announcement
        from tenzro_operator.root_flow import CommitMessage, RevealMessage, parse_message

        kinds = {CommitMessage: 0, RevealMessage: 0}
        for m in self.submissions(64):
            kinds[type(parse_message(m))] += 1
        assert all(kinds.values()), f"a template does not give both kinds: {kinds}"
        for m in self.announcements(2):
            Announcement.parse(m)

    def submissions(self, n: int) -> list[bytes]:
        """``n`` forged commitments and reveals (half each on average), encoded."""
        hexes = os.urandom(n * _RANDOM_BYTES).hex()
        rnd, trainers, task, r, out = self._rng, self.trainers, self.task, self.round, []
        for i in range(n):
            h = hexes[2 * _RANDOM_BYTES * i: 2 * _RANDOM_BYTES * (i + 1)]
            f, t = rnd.randrange(self.fragments), trainers[rnd.randrange(len(trainers))]
            if rnd.random() < 0.5:
                out.append((_COMMIT % (h[:64], f, r, h[64:194], task, t)).encode())
            else:
                out.append((_REVEAL % (h[:64], h[64:116], f, h[116:180], h[180:244], rnd.randrange(2**31), r,
                                       h[244:374], task, t)).encode())
        return out

    def announcements(self, n: int) -> list[bytes]:
        """``n`` forged endpoint announcements of the run's syncer, issued a second from now."""
        hexes, issued = os.urandom(n * 65).hex(), int(time.time()) + 1
        return [(_ANNOUNCE % (issued, hexes[130 * i:130 * (i + 1)], self.syncer, self.task)).encode() for i in range(n)]


def rpc_body(messages: list[bytes]) -> bytes:
    """One JSON-RPC batch of `DELIVER` calls, one per message (multibase base64url)."""
    from tenzro_operator.roles.delivery import DELIVER

    return ("[" + ",".join(_CALL % (i, DELIVER, base64.urlsafe_b64encode(m).rstrip(b"=").decode())
                           for i, m in enumerate(messages)) + "]").encode()


def pub_body(message: bytes) -> bytes:
    """A pubsub/pub request body: one multipart part holding ``message``."""
    return _PART_HEAD + message + _PART_TAIL


class RawHttp:
    """HTTP/1.1 over one keep-alive socket, for requests built ahead as bytes (`request`): several
    may be sent at once (pipelined) and their answers read in order. Reads answers with a
    Content-Length only (both servers send one); anything else raises, and the next call
    reconnects. Far cheaper per request than http.client (no header objects, no email parser).

    Raises (``exchange``): OSError (connection), ValueError (an answer it cannot read).
    """

    def __init__(self, host: str, port: int, source: str | None = None, timeout_s: float = 30.0) -> None:
        self.addr, self.source, self.timeout_s = (host, port), source, timeout_s
        self.host = f"{host}:{port}"
        self._sock: socket.socket | None = None
        self._buf = b""

    def request(self, path: str, body: bytes, content_type: str) -> bytes:
        """A POST of ``body`` to ``path``, as bytes on the wire."""
        return (f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def exchange(self, requests: list[bytes]) -> list[tuple[int, bytes]]:
        """Send ``requests`` at once; their (status, body) in order."""
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.addr, self.timeout_s,
                                                      (self.source, 0) if self.source else None)
                self._buf = b""
            self._sock.sendall(b"".join(requests))
            return [self._answer() for _ in requests]
        except (OSError, ValueError):
            self.close()
            raise

    def _answer(self) -> tuple[int, bytes]:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            self._recv()
        head, self._buf = self._buf[:end].decode("latin-1"), self._buf[end + 4:]
        status = int(head.split(" ", 2)[1])
        length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")[1:]
                       if line.lower().startswith("content-length:")), None)
        if length is None:
            raise ValueError(f"an answer without Content-Length: {head[:200]!r}")
        while len(self._buf) < length:
            self._recv()
        body, self._buf = self._buf[:length], self._buf[length:]
        return status, body

    def _recv(self) -> None:
        data = self._sock.recv(1 << 16)
        if not data:
            raise ConnectionResetError("the server closed the connection")
        self._buf += data

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


# counts shared by the flooder's processes (an mp.Array of these slots)
SENT_RPC, SENT_PUBSUB, FAILED, RATE_LIMITED, ANNOUNCED = range(5)


def _paced(per_s: float, stop_at: float, send, n: int, counts) -> None:
    """Call ``send()`` (which sends ``n`` messages) ``per_s / n`` times a second until ``stop_at``
    (time.time()); when behind, as fast as it can, without a burst to catch up. A failed send is
    counted in FAILED."""
    interval, nxt, seen = n / per_s, time.monotonic(), set()
    while time.time() < stop_at:
        try:
            send()
        except Exception as exc:  # noqa: BLE001 - a refusal or a dead endpoint: count it, go on
            with counts.get_lock():
                counts[FAILED] += 1
            if type(exc) not in seen:  # each kind of failure once, for the reader of the log
                seen.add(type(exc))
                print(f"flooder: a send failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        nxt += interval
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            nxt = time.monotonic()


def _watch_chain(rpc: str, deployments: str, task_id: bytes, forger: Forger, done: threading.Event) -> None:
    """The public facts a forger needs (the open round, the enrolled trainers, the syncer), read
    from the chain once a second."""
    from tenzro_operator.chain import ChainClient

    chain = ChainClient(rpc, deployments)
    while not done.is_set():
        try:
            run = chain.get_run(task_id)
            forger.round, forger.syncer = run.current_round, run.syncer.lower()
            forger.trainers = [a.lower() for a in chain.trainers_of(task_id)] or forger.trainers
        except Exception:  # noqa: BLE001 - the run may not exist yet; try again
            pass
        done.wait(1.0)


def flood_rpc(rpc: str, deployments: str, task_id: bytes, fragments: int, endpoint: str, rate: float,
              connections: int, stop_at: float, counts) -> None:
    """The outsider's JSON-RPC process: ``rate`` forged messages a second to the syncer's endpoint
    in batches of `MAX_BATCH` calls (each call one message), over ``connections`` keep-alive
    connections from `OUTSIDER_ADDRESS`, until ``stop_at``. Counts the messages sent (SENT_RPC) and
    those of batches refused whole by the per-client limit (RATE_LIMITED), read (``rate_limited``
    answers) or unread (HTTP 429, after which the endpoint closes the connection)."""
    from tenzro_operator.roles.delivery import MAX_BATCH

    forger, done = Forger(task_id, fragments), threading.Event()
    threading.Thread(target=_watch_chain, args=(rpc, deployments, task_id, forger, done), daemon=True).start()
    url = urlsplit(endpoint)

    def sender() -> None:
        # from a loopback address of its own, as a client on another host would be: the syncer's
        # per-client limit then tells it from the trainers, who post from 127.0.0.1
        conn = RawHttp(url.hostname, url.port, OUTSIDER_ADDRESS)

        def send() -> None:
            [(status, answer)] = conn.exchange([conn.request("/", rpc_body(forger.submissions(MAX_BATCH)),
                                                             "application/json")])
            if status == 429:  # refused unread, whole, and the connection closed: the next send reconnects
                conn.close()
                with counts.get_lock():
                    counts[SENT_RPC] += MAX_BATCH
                    counts[RATE_LIMITED] += MAX_BATCH
                return
            if status != 200:
                raise RuntimeError(f"the endpoint answered HTTP {status}")
            limited = answer.count(b'"reason":"rate_limited"')
            with counts.get_lock():
                counts[SENT_RPC] += MAX_BATCH
                counts[RATE_LIMITED] += limited

        _paced(rate / connections, stop_at, send, MAX_BATCH, counts)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()


def flood_pubsub(rpc: str, deployments: str, task_id: bytes, fragments: int, ipfs_api: str, devnet_swarm: str,
                 rate: float, connections: int, stop_at: float, counts) -> None:
    """The outsider's pubsub process: ``rate`` forged messages a second published through its own
    IPFS node (``ipfs_api``, swarm-connected to ``devnet_swarm``), one in five an announcement on
    the syncer topic and the others submissions, over ``connections`` keep-alive connections to
    the node, each message one ``pubsub/pub`` call, built a batch of 100 ahead."""
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.ipfs.pubsub import multibase_encode, submission_topic, syncer_topic

    IpfsClient(ipfs_api).swarm_connect(devnet_swarm)
    forger, done = Forger(task_id, fragments), threading.Event()
    threading.Thread(target=_watch_chain, args=(rpc, deployments, task_id, forger, done), daemon=True).start()
    url = urlsplit(ipfs_api)
    paths = {topic: f"/api/v0/pubsub/pub?arg={multibase_encode(topic(task_id).encode())}"
             for topic in (submission_topic, syncer_topic)}
    ctype = f"multipart/form-data; boundary={_BOUNDARY}"

    def sender() -> None:
        conn = RawHttp(url.hostname, url.port)

        def send() -> None:  # PUB_PIPELINE requests at once: four submissions to one announcement
            subs, anns = forger.submissions(PUB_PIPELINE * 4 // 5), forger.announcements(PUB_PIPELINE // 5)
            reqs = ([conn.request(paths[submission_topic], pub_body(m), ctype) for m in subs] +
                    [conn.request(paths[syncer_topic], pub_body(m), ctype) for m in anns])
            answers = conn.exchange(reqs)
            ok = sum(status == 200 for status, _ in answers)
            with counts.get_lock():
                counts[SENT_PUBSUB] += ok
                counts[ANNOUNCED] += sum(status == 200 for status, _ in answers[len(subs):])
            if ok < len(answers):
                bad = next(a for a in answers if a[0] != 200)
                raise RuntimeError(f"pubsub/pub: HTTP {bad[0]}: {bad[1][:200]!r}")

        _paced(rate / connections, stop_at, send, PUB_PIPELINE, counts)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()


# ----------------------------------------------------------------------------- one run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def round_durations(chain, task_id: bytes, from_block: int) -> list[int]:
    """Chain seconds each round took: its last ``RoundCommitted`` block time minus the previous
    round's (round 0: minus its ``RoundOpened``)."""
    logs = chain.get_logs(from_block, chain.block_number(), ["RoundOpened", "RoundCommitted"], task_id=task_id)
    opened0 = next((chain.block_timestamp(e["block_number"]) for e in logs
                    if e["event"] == "RoundOpened" and int(e["args"]["round"]) == 0), None)
    if opened0 is None:
        return []
    committed: dict[int, int] = {}
    for e in logs:
        if e["event"] == "RoundCommitted":
            committed[int(e["args"]["round"])] = chain.block_timestamp(e["block_number"])
    times = [opened0] + [committed[r] for r in sorted(committed)]
    return [b - a for a, b in zip(times, times[1:])]


def one_run(rate: int, args: dict) -> dict:
    """Post the demo's task, run its daemons until the seal and every trainer has claimed, with a
    flood of ``rate`` forged messages per second (0: none) from the moment round 0 opens, and return
    what the comparison needs: round durations, per-trainer work and reward, the syncer's RSS."""
    from tenzro_operator import demo
    from tenzro_operator.demo_results import trainer_rows
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node

    port = _free_port()
    work = Path(tempfile.mkdtemp(prefix=f"flood-{rate}-"))
    # the outsider's node first, before the run: on a loaded machine it may take a while to start
    node = start_ipfs_node(work / "outsider-ipfs", _free_port(), timeout_s=120) if rate and args["pubsub_rate"] else None
    s = demo.DemoSettings(rpc=args["rpc"], ipfs=args["ipfs"], deployments=args["deployments"], workdir=work / "run",
                          out=work / "out", task_id=TASK,
                          trainers=args["trainers"], quorum=args["quorum"], fragments=args["fragments"],
                          rounds=args["rounds"], timeout_s=args["timeout_s"],
                          syncer_options={"submission_rpc_port": port, "submission_rpc_host": "127.0.0.1"})
    p = demo.post_demo_task(s)
    procs = demo.launch_daemons(s, p.task, p.keys, p.work, watcher=False)
    syncer_pid = procs[0].popen.pid
    counts = mp.Array("q", 5)  # SENT_RPC, SENT_PUBSUB, FAILED, RATE_LIMITED, ANNOUNCED
    state = {"peak": 0, "base": 0, "stop": False, "load": os.getloadavg()[0]}
    flooders: list[mp.Process] = []

    def on_round(r: int, _procs) -> None:
        if r != 0:
            return
        state["base"] = _rss_kib(syncer_pid)
        state["t0"] = time.monotonic()
        if rate:
            stop_at, pub_rate = time.time() + s.timeout_s, min(rate, args["pubsub_rate"])
            common = (args["rpc"], str(s.deployments), p.task_id, s.fragments)
            if rate > pub_rate:
                flooders.append(mp.Process(target=flood_rpc, daemon=True, args=common + (
                    f"http://127.0.0.1:{port}/", rate - pub_rate, RPC_CONNECTIONS, stop_at, counts)))
            if pub_rate > 0:
                devnet_swarm = IpfsClient(args["ipfs"]).id()["Addresses"][0]
                flooders.append(mp.Process(target=flood_pubsub, daemon=True, args=common + (
                    node.api_url, devnet_swarm, pub_rate, PUB_CONNECTIONS, stop_at, counts)))
            for f in flooders:
                f.start()

    def sample() -> None:  # the syncer's RSS and the machine's 1-minute load average, twice a second
        while not state["stop"]:
            state["peak"] = max(state["peak"], _rss_kib(syncer_pid))
            state["load"] = max(state["load"], os.getloadavg()[0])
            time.sleep(0.5)

    threading.Thread(target=sample, daemon=True).start()
    error = ""
    try:
        demo.wait_sealed(p.sponsor, p.task_id, procs, s, on_round)
        demo.wait_settled(procs)
    except demo.DemoError as exc:
        error = str(exc).splitlines()[0]
    finally:
        elapsed = time.monotonic() - state.get("t0", time.monotonic())
        state["stop"] = True
        demo.stop(procs)
        for f in flooders:
            if f.pid is not None:
                f.terminate()
                f.join(10)
        if node is not None:
            stop_ipfs_node(node)
    role_of = {a.lower(): r for r, a in p.addresses.items()}
    rows = trainer_rows(p.sponsor, p.task_id, p.posted_block, role_of)
    return {"rate": rate, "sent_rpc": counts[SENT_RPC], "sent_pubsub": counts[SENT_PUBSUB], "errors": counts[FAILED],
            "rate_limited": counts[RATE_LIMITED], "announced": counts[ANNOUNCED], "error": error, "elapsed_s": elapsed,
            "achieved": (counts[SENT_RPC] + counts[SENT_PUBSUB]) / elapsed if rate and elapsed > 0 else 0.0,
            "load_peak": state["load"],
            "durations": round_durations(p.sponsor, p.task_id, p.posted_block),
            # per enrollment index (the index picks the shard and seeds the scoring batches), not per
            # name: the trainers enroll in whatever order they get there
            "trainers": [(t["accepted"], t["credits"], t["reward_tnzo"]) for t in rows],
            "rss_base_mib": state["base"] / 1024, "rss_peak_mib": state["peak"] / 1024}


# ----------------------------------------------------------------------------- main


def render(rows: list[dict], base: dict, slack: int, command: str, pub_rate: int) -> str:
    lines = ["# Flood: a keyless outsider against a root-flow syncer while a devnet run trains", "",
             f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} CPU cores shared by anvil, the devnet's IPFS node, the syncer, "
             f"{base['m']} trainers, the outsider's IPFS node and its two flooder processes (no watcher), and by "
             "other work on the machine (the peak 1-minute load average of each run is in the table). Each row is "
             "one run from the same chain snapshot and task (same data, seeds and scoring batches). On time: every "
             f"round's duration (chain seconds between commits) at most the unflooded run's + {slack} s; credits: "
             "every trainer's accepted count and reward identical to the unflooded run's.", "",
             f"How messages are counted: {pub_rate} messages a second are published on pubsub, the rest of the rate "
             "goes to the syncer's JSON-RPC endpoint in "
             "batches of 100 `tenzro_training_deliver` calls over keep-alive connections from one outsider address "
             "(127.0.0.2); each call carries one forged message and counts as one message, whatever the answer "
             "(the column in brackets: those refused whole by the per-client limit, `rate_limited`, unread past "
             "the JSON parse). The pubsub part is published from the outsider's own IPFS node (swarm-connected to "
             "the devnet's), one `pubsub/pub` call per message, 10 pipelined on each of 4 keep-alive connections (one node publishes about 1,300 a second on this "
             "machine, at about 0.5 ms of its CPU and 0.3 ms of the devnet node's a message) (in brackets: announcements on the syncer topic, one in five; the "
             "rest are commitments and reveals on the submission topic). Every message is fresh: random words "
             "and signatures, naming an enrolled trainer, the open round and a real fragment. Achieved = messages "
             "sent / seconds from round 0's opening to the last claim.",
             "", f"Unflooded run: round durations {base['durations']} s, syncer RSS {base['rss_peak_mib']:.0f} MiB peak, "
                 f"peak load average {base['load_peak']:.1f}.",
             "", "| target msg/s | achieved msg/s | sent RPC (rate-limited) | sent pubsub (announcements) | failed sends "
                 "| round durations (s) | on time | credits same | syncer RSS growth (MiB) | peak load | run |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['rate']} | {r['achieved']:.0f} | {r['sent_rpc']} ({r['rate_limited']}) | {r['sent_pubsub']} "
                     f"({r['announced']}) | {r['errors']} | {r['durations']} | {'yes' if r['on_time'] else 'NO'} | "
                     f"{'yes' if r['credits_same'] else 'NO'} | {r['rss_peak_mib'] - r['rss_base_mib']:.1f} | "
                     f"{r['load_peak']:.1f} | {r['error'] or 'sealed, all claimed'} |")
    ok = [r for r in rows if r["on_time"] and r["credits_same"]]
    best = max(ok, key=lambda r: r["achieved"]) if ok else None
    lines += ["", f"forged messages per second absorbed with every round on time: {best['achieved']:.0f}" if best
              else "forged messages per second absorbed with every round on time: 0",
              f"syncer peak RSS growth under the largest absorbed flood: "
              f"{best['rss_peak_mib'] - best['rss_base_mib']:.1f} MiB" if best else
              "syncer peak RSS growth under the floods (none absorbed): "
              f"{max((r['rss_peak_mib'] - r['rss_base_mib'] for r in rows), default=0):.1f} MiB at most"]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--rates", default="1000,2000,4000,8000", show_default=True,
              help="Forged messages per second, comma-separated: one run each (after a run without a flood).")
@click.option("--rpc", default="http://127.0.0.1:8545", show_default=True)
@click.option("--ipfs", default="http://127.0.0.1:5001", show_default=True)
@click.option("--deployments", type=click.Path(path_type=Path), default=REPO / "deployments" / "local.json",
              show_default=True, help="The devnet's deployment record.")
@click.option("--pubsub-rate", default=250, show_default=True, type=click.IntRange(0),
              help="Messages per second of the rate published on pubsub (the rest goes to the JSON-RPC endpoint); "
                   "one outsider IPFS node publishes about 1,300 a second on this machine.")
@click.option("--trainers", default=4, show_default=True)
@click.option("--quorum", default=3, show_default=True)
@click.option("--fragments", default=4, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--timeout-s", default=420.0, show_default=True, help="Seconds a run may take to seal.")
@click.option("--slack-s", default=2, show_default=True, help="Chain seconds a flooded round may take over the unflooded one.")
@click.option("--out", type=click.Path(path_type=Path), default=RESULTS, show_default=True, help="Where the table goes.")
def main(rates, rpc, ipfs, deployments, pubsub_rate, trainers, quorum, fragments, rounds, timeout_s, slack_s,
         out) -> None:
    web3 = httpx.Client(timeout=30.0)

    def call(method: str, params: list):
        r = web3.post(rpc, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
        if "error" in r:
            raise click.ClickException(f"{method}: {r['error']}")
        return r["result"]

    args = {"rpc": rpc, "ipfs": ipfs, "deployments": deployments.resolve(), "pubsub_rate": pubsub_rate, "trainers": trainers,
            "quorum": quorum, "fragments": fragments, "rounds": rounds, "timeout_s": timeout_s}
    def clock_to_now() -> None:
        # evm_revert takes the chain's clock back to the snapshot's block: a run after it would
        # start with the chain minutes behind the wall clock, and trainers then refuse the
        # syncer's announcements (issued by the wall clock, more than 120 s ahead of the chain),
        # so they would never learn its endpoint. As on a real chain: chain time = wall time.
        latest = int(call("eth_getBlockByNumber", ["latest", False])["timestamp"], 16)
        if latest < int(time.time()):
            call("evm_setTime", [int(time.time())])
            call("evm_mine", [])

    clock_to_now()
    snapshot = call("evm_snapshot", [])  # the state every run starts from (anvil drops it on revert)
    base = one_run(0, args)
    base["m"] = trainers
    if base["error"] or not base["durations"]:
        raise SystemExit(f"the run without a flood did not seal, so no rate can be judged against it: {base['error']}")
    print(f"unflooded: rounds {base['durations']} s, RSS peak {base['rss_peak_mib']:.0f} MiB", flush=True)
    rows = []
    for rate in [int(x) for x in rates.split(",") if x.strip()]:
        call("evm_revert", [snapshot])
        clock_to_now()
        snapshot = call("evm_snapshot", [])
        row = one_run(rate, args)
        row["on_time"] = not row["error"] and len(row["durations"]) == len(base["durations"]) and all(
            d <= b + slack_s for d, b in zip(row["durations"], base["durations"]))
        row["credits_same"] = row["trainers"] == base["trainers"]
        rows.append(row)
        print(f"target {rate}/s achieved {row['achieved']:.0f}/s: rounds {row['durations']} s, on time "
              f"{row['on_time']}, credits same {row['credits_same']}, RSS +"
              f"{row['rss_peak_mib'] - row['rss_base_mib']:.1f} MiB, load {row['load_peak']:.1f}; sent RPC "
              f"{row['sent_rpc']} ({row['rate_limited']} rate-limited), pubsub {row['sent_pubsub']}, failed "
              f"{row['errors']}; trainers {row['trainers']} (unflooded "
              f"{base['trainers']}){'; ' + row['error'] if row['error'] else ''}", flush=True)
    text = render(rows, base, slack_s, "python " + " ".join(sys.argv), pubsub_rate)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
