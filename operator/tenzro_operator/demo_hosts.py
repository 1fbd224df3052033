"""The main job with every party on its own host (`make demo-hosts`, issue 25).

The same spec and the same summary as `make demo` (`tenzro_operator.demo`: its post, daemons,
wait and summary are reused), but each party runs on a host of its own: a Linux network namespace
of `tenzro_operator.netns` (``10.77.0.<i>``, joined by a bridge, no route out), each host with its
own IPFS node (scripts/ipfs/node.mjs on ``<address>:5001``, swarm ``<address>:4001``), data dir
and processes:

====================  =======================================================================
host                  runs
====================  =======================================================================
``chain``             anvil on ``10.77.0.1:8545`` (its own devnet data dir, ``ape run deploy``
                      there), the sponsor's step (keystores, funding, pins, the post)
``syncer``            the syncer daemon
``watcher``           the watcher daemon; after the seal, the receipt's replay (summary)
``trainer0``..        one trainer daemon each (M = 4 by default)
``standin``           with a ``syncer`` cut only: a second syncer candidate (`DemoSettings.stand_in`)
====================  =======================================================================

Every daemon's ``ipfs_bootstrap`` lists only the rendezvous nodes (`RENDEZVOUS`: the chain host's,
where the sponsor pinned the spec and the data, and the watcher's); the trainers and the syncer
announce their own nodes, signed, on the run's nodes topic, and each daemon dials the nodes it
fetches from (`tenzro_operator.peer_book`), so payloads, weights and pubsub messages cross the
links (bitswap, gossipsub) between nodes that were never configured to know each other. After the run it checks, for every accepted payload
of the committed transcripts, that it was fetched across the link: pinned on its trainer's node and
on no other trainer's, and present (offline read, sha256 as signed) on the syncer's node, whose repo
was empty before the post. It prints each host's bytes sent and received (its ``eth0`` counters,
from before the post to the seal) next to what the codec says a round costs (the run's payload
bytes per trainer per round, and the weights a trainer fetches) and to synchronous data-parallel
training (a ring all-reduce of the full fp32 gradient at every inner step: ``2 x params x 4 B x H``
sent per trainer per round), beside what each node's bitswap received and how much of it were
copies of blocks it had already (`IpfsClient.bitswap_stat`), and ends with::

    bytes per trainer host per round (measured on the link): <N>
    ratio to synchronous data-parallel: <N>x

``N`` = a trainer host's bytes sent plus received over the window, averaged over the trainer hosts,
divided by the rounds; the ratio is the data-parallel bytes *sent* over it (conservative: a ring
all-reduce receives as much again). Needs root and iproute2 (`netns.unavailable_reason`);
everything (processes, namespaces) is removed at the end, on an error and on Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import click
from rich.table import Table

from tenzro_operator import devnet
from tenzro_operator.chain import ChainClient
from tenzro_operator.demo import (
    REPO_ROOT,
    SYNCER_ROLES,
    DemoError,
    DemoSettings,
    Proc,
    _spawn,
    check_settings,
    console,
    launch_daemons,
    post_demo_task,
    stop,
    summarize,
    wait_sealed,
    wait_settled,
    watcher_rounds,
)
from tenzro_operator.errors import IpfsError, TenzroError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node
from tenzro_operator.keys import anvil_account
from tenzro_operator.netns import Hosts, LinkCounters, NetnsError, unavailable_reason
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_operator.views import run as run_view

RPC_PORT = 8545  # anvil on the chain host
API_PORT = 5001  # every host's IPFS RPC API (each host has its own port space)
SWARM_PORT = 4001  # every host's libp2p swarm
SPONSOR_INDEX = 1  # anvil account of the sponsor (demo.post_demo_task's roles)
FP32_BYTES = 4
LAST_LINES = ("bytes per trainer host per round (measured on the link): {n}",
              "ratio to synchronous data-parallel: {ratio}x")


@dataclass
class HostsSettings:
    """Where the hosts' data goes and how long their services may take to answer (seconds)."""

    node_start_timeout_s: float = 90.0  # a Helia node's ready line, on a loaded 2-core machine
    chain_start_timeout_s: float = 60.0
    deploy_timeout_s: float = 600.0  # `ape run deploy` (compiles first when the contracts changed)
    # faults (issue 25), each (host, a, b): the host's link is cut when round index a opens and
    # restored when round b opens (or after the seal). A trainer's host: the run goes on without
    # it, its trainer rejoins. "syncer": the host of the syncer elected then, cut when that round's
    # commit phase closes; a stand-in syncer candidate runs on a host of its own and takes the run
    # over (`HostFault`)
    cuts: tuple[tuple[str, int, int], ...] = ()
    # (host, a, b): the host's IPFS node is killed (SIGKILL) kill_after_close_s seconds after round
    # a's commit phase closes (its trainer has pinned and revealed) and restarted on its repo when
    # round b opens (or after the seal)
    node_kills: tuple[tuple[str, int, int], ...] = ()
    kill_after_close_s: float = 3.0
    # (host, bits per second): a tc token bucket on that host's link, both ways, for the whole run
    caps: tuple[tuple[str, int], ...] = ()


def host_names(trainers: int, stand_in: bool = False) -> list[str]:
    """The hosts, in address order: chain (.1), syncer (.2), watcher (.3), trainer0.. (.4..), then
    the stand-in syncer's (``stand_in``)."""
    return ["chain", "syncer", "watcher", *(f"trainer{i}" for i in range(trainers)), *(["standin"] * stand_in)]


def host_of(role: str) -> str:
    """The host a demo role runs on (``trainer-2`` -> ``trainer2``; ``sponsor`` -> ``chain``)."""
    return {"sponsor": "chain"}.get(role, role.replace("-", ""))


# -- the chain host -------------------------------------------------------------------------------


def start_chain(hosts: Hosts, data_dir: Path, timeout_s: float) -> subprocess.Popen:
    """anvil on the chain host's address (``<address>:8545``, chain id 31337), its state persisted in
    ``<data_dir>/anvil/state.json``, as `devnet.start_anvil` does on 127.0.0.1. Raises DemoError
    when it does not answer within ``timeout_s`` seconds (with its log's tail)."""
    state = data_dir / "anvil" / "state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    log = data_dir / "logs" / "anvil.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    addr = hosts.address("chain")
    argv = [devnet.anvil_binary(), "--host", addr, "--port", str(RPC_PORT), "--chain-id", str(devnet.ANVIL_CHAIN_ID),
            "--state", str(state), "--state-interval", "5", "--silent"]
    with open(log, "ab") as fh:
        proc = hosts.popen("chain", argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    url = f"http://{addr}:{RPC_PORT}"
    deadline = time.monotonic() + timeout_s
    with hosts.inside("chain"):
        while devnet.rpc_answers(url) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DemoError(f"anvil on the chain host ({url}) did not start: {log.read_text(errors='replace')[-800:]}")
            time.sleep(0.2)
    return proc


def deploy_on_chain_host(hosts: Hosts, rpc: str, out: Path, timeout_s: float) -> Path:
    """`ape run deploy` inside the chain host against ``rpc``; the record goes to ``out``.
    Raises DemoError with ape's output when it fails or takes longer than ``timeout_s`` seconds."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "APE_FOUNDRY_HOST": rpc,
           "PATH": f"{REPO_ROOT / 'node_modules' / '.bin'}:{bin_dir}:{os.environ.get('PATH', '')}"}
    env.setdefault("APE_DATA_FOLDER", str(REPO_ROOT / ".ape"))  # as the Makefile: this checkout's
    env.setdefault("SOLCX_BINARY_PATH", str(REPO_ROOT / ".solc"))
    argv = [str(bin_dir / "ape"), "run", "deploy", "--network", "ethereum:local:foundry", "--out", str(out)]
    try:
        done = hosts.run("chain", argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DemoError(f"`ape run deploy` on the chain host took more than {timeout_s:.0f} s") from None
    if done.returncode != 0 or not out.exists():
        raise DemoError(f"`ape run deploy` on the chain host failed ({done.returncode}): "
                        f"{(done.stdout + done.stderr)[-1500:]}")
    return out


# -- the nodes ------------------------------------------------------------------------------------


def start_nodes(hosts: Hosts, root: Path, timeout_s: float) -> dict[str, subprocess.Popen]:
    """One IPFS node per host, born inside it, bound to its address (API 5001, swarm 4001), its repo
    in ``<root>/<host>`` (fresh: a repo left from an earlier run is refused). Returns host -> process
    (``api_url``, ``swarm_addr``, ``peer_id``). Raises DemoError naming the host whose node failed."""
    nodes: dict[str, subprocess.Popen] = {}
    for host in hosts.names:
        repo = root / host
        if repo.exists():
            raise DemoError(f"{repo} exists already: every host's IPFS node starts empty (pick a new --workdir)")
        with hosts.inside(host):
            try:
                nodes[host] = start_ipfs_node(repo, API_PORT, host=hosts.address(host), swarm_port=SWARM_PORT,
                                              timeout_s=timeout_s, log_path=root / f"{host}.log")
            except TenzroError as exc:
                for proc in nodes.values():
                    stop_ipfs_node(proc)
                raise DemoError(f"the IPFS node of host {host} did not start: {exc}") from None
    return nodes


RENDEZVOUS = ("chain", "watcher")  # the hosts whose nodes every daemon lists in ipfs_bootstrap


def role_configs(nodes: dict[str, subprocess.Popen], trainers: int) -> dict[str, dict]:
    """Each daemon's own node (``ipfs_api``) and the rendezvous nodes (``ipfs_bootstrap``: the
    sponsor's, which holds the spec and the data, and the watcher's, subscribed to the run's topics);
    every other node a daemon needs it learns from the run's signed node announcements
    (`tenzro_operator.peer_book`; private addresses allowed: the hosts are on 10.77.0.0/24)."""
    out = {}
    for role in ["syncer", "watcher", *(f"trainer-{i}" for i in range(trainers)), *(["standin"] * ("standin" in nodes))]:
        host = host_of(role)
        out[role] = {"ipfs_api": nodes[host].api_url, "ipfs_dial_private": True,
                     "ipfs_bootstrap": [nodes[h].swarm_addr for h in RENDEZVOUS if h != host]}
    return out


def spawn_in(hosts: Hosts):
    """A `demo.launch_daemons` spawn function that starts each daemon inside its role's host."""
    def spawn(name: str, argv: list[str], log: Path) -> Proc:
        with hosts.inside(host_of(name)):
            return _spawn(name, argv, log)
    return spawn


def counters(hosts: Hosts) -> dict[str, LinkCounters]:
    return {h: hosts.counters(h) for h in hosts.names}


# -- after the run --------------------------------------------------------------------------------


def payload_report(hosts: Hosts, nodes: dict[str, subprocess.Popen], s: DemoSettings, task_id: bytes,
                   from_block: int, addresses: dict[str, str]) -> dict:
    """Where every payload of the committed transcripts lives, read from inside the syncers'
    hosts: each round's transcript and payloads offline (its own blocks only) from the node of the
    syncer that committed the round (the sender of its ``commitRound``), the pins of each trainer's
    node from inside that host.

    Returns ``{"accepted", "fetched", "not_fetched": [...], "payload_bytes", "submitted",
    "weights_bytes_per_round", "committed_by": {round: host}, "verdicts": [...]}``; a payload
    counts as fetched when the committing syncer's node holds it (its sha256 is the signed one)
    and its own trainer's node, and no other trainer's, pinned it. ``verdicts``: every submission
    of the transcripts, ``{"round", "fragment", "trainer": host, "verdict": "accepted" or the
    rejection's reason, "pinned_by_owner"}``."""
    owner_host = {a.lower(): host_of(r) for r, a in addresses.items() if r.startswith("trainer-")}
    pins = {}
    for h in owner_host.values():
        with hosts.inside(h), IpfsClient(nodes[h].api_url, retries=1) as c:
            pins[h] = c.pins()
    accepted = fetched = payload_bytes = submitted = 0
    weights_bytes = []
    not_fetched = []
    verdicts = []
    syncer_host = {a.lower(): host_of(r) for r, a in addresses.items() if r in SYNCER_ROLES}
    with hosts.inside("chain"):
        chain = ChainClient(s.rpc, s.deployments)
        rounds = committed_with_sender(chain, task_id, from_block, s.rounds)
    committed_by = {r: syncer_host[sender.lower()] for r, (_, sender) in rounds.items()}
    for r, (ev, _) in sorted(rounds.items()):
        host = committed_by[r]
        with hosts.inside(host), IpfsClient(nodes[host].api_url, offline=True, retries=1) as own:
            tr = RoundTranscript.parse(own.cat(ev["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                       bytes(ev["transcriptHash"]))
            weights_bytes.append(sum(len(own.cat(fr.weights.cid)) for fr in tr.fragments))
            for fr in tr.fragments:
                for sub, was_accepted in [*((a, True) for a in fr.accepted), *((j, False) for j in fr.rejected)]:
                    try:
                        data = own.cat(sub.cid)
                    except IpfsError:  # a rejected payload the syncer could not fetch (Unavailable)
                        data = None
                    submitted += 1
                    payload_bytes += len(data or b"")
                    owner = owner_host[sub.trainer.lower()]
                    verdicts.append({"round": r, "fragment": fr.fragment, "trainer": owner,
                                     "verdict": "accepted" if was_accepted else sub.reason,
                                     "pinned_by_owner": sub.cid in pins[owner]})
                    if not was_accepted:
                        continue
                    accepted += 1
                    others = [h for h, p in pins.items() if h != owner and sub.cid in p]
                    ok = (data is not None and "0x" + hashlib.sha256(data).hexdigest() == sub.sha256
                          and sub.cid in pins[owner] and not others)
                    fetched += ok
                    if not ok:
                        not_fetched.append({"round": r, "fragment": fr.fragment, "trainer": owner, "cid": sub.cid,
                                            "on_syncer_node": data is not None, "syncer": host,
                                            "pinned_by_owner": sub.cid in pins[owner], "pinned_by_others": others})
    return {"accepted": accepted, "fetched": fetched, "not_fetched": not_fetched, "payload_bytes": payload_bytes,
            "submitted": submitted, "weights_bytes_per_round": weights_bytes, "committed_by": committed_by,
            "verdicts": verdicts}


def committed_with_sender(chain: ChainClient, task_id: bytes, from_block: int,
                          before_round: int) -> dict[int, tuple[dict, str]]:
    """``round -> (RoundCommitted args, the address that sent that commitRound)``: the rounds below
    ``before_round``, the last commit of each (`root_flow.committed_rounds`'s rule)."""
    out = {}
    for ev in chain.get_logs(from_block, chain.block_number(), ["RoundCommitted"], task_id=task_id):
        if int(ev["args"]["round"]) < before_round:
            out[int(ev["args"]["round"])] = (dict(ev["args"]), chain.w3.eth.get_transaction(ev["tx_hash"])["from"])
    return out


def repo_bytes(repo: Path) -> int:
    """Bytes of the blocks a node's repo holds (its ``blocks`` folder): what it added or fetched once."""
    return sum(f.stat().st_size for f in (repo / "blocks").rglob("*") if f.is_file())


class HostFault:
    """One fault of `HostsSettings` as `demo.wait_sealed`'s round hook: ``down(host)`` when round
    ``rounds[0]`` opens, ``up(host)`` when round ``rounds[1]`` opens (or at the end, `end`, if the
    run sealed first); ``events`` records ``(action, round, seconds since the hook was made)``.

    ``host`` "syncer" is the host of the syncer elected when the round opens (``elected()``). With
    ``after_close_s`` (seconds) the fault comes mid-round, from a timer thread: that long after the
    round's commit phase closes (``until_closes()`` seconds after the opening is seen), when the
    trainers have fetched the weights, trained, committed and (after a second or two) revealed."""

    def __init__(self, what: str, host: str, rounds: tuple[int, int], down, up, *, after_close_s: float | None = None,
                 elected=None, until_closes=None) -> None:
        self.what, self.host, self.rounds, self.down, self.up = what, host, rounds, down, up
        self.after_close_s, self.elected, self.until_closes = after_close_s, elected, until_closes
        self.events: list[tuple[str, int, float]] = []
        self._armed = False
        self._t0 = time.monotonic()
        self._timer: threading.Timer | None = None

    def __call__(self, round_: int, procs) -> None:
        if not self._armed and self.rounds[0] <= round_ < self.rounds[1]:
            self._armed = True
            if self.host == "syncer":
                self.host = self.elected()
            if self.after_close_s is None:
                self._down(round_)
                return
            self._timer = threading.Timer(max(0.0, self.until_closes() + self.after_close_s), self._down, (round_,))
            self._timer.daemon = True
            self._timer.start()
        elif round_ >= self.rounds[1]:
            self.end(round_)

    def _down(self, round_: int) -> None:
        self.down(self.host)
        self.events.append((self.what, round_, time.monotonic() - self._t0))
        console.print(f"FAULT: {self.host}: {self.what} in round {round_ + 1}")

    def end(self, round_: int) -> None:
        """Undo the fault, if it came and was not undone yet; one not come yet is called off."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
        if len(self.events) == 1:
            self.up(self.host)
            self.events.append(("restore", round_, time.monotonic() - self._t0))
            console.print(f"FAULT: {self.host}: restored at round {round_ + 1}")


def host_faults(hosts: Hosts, hs: HostsSettings, nodes: dict[str, subprocess.Popen], repos: Path,
                elected, until_closes) -> list[HostFault]:
    """The `HostsSettings` faults as hooks: each cut (``hosts.cut`` / ``restore``; a "syncer" cut
    comes when the round's commit phase closes) and each node kill (SIGKILL of the host's IPFS
    node ``kill_after_close_s`` after the commit phase closes; restarted on its repo in
    ``repos/<host>``, same address and key, when undone: ``nodes`` gets the new process). Raises
    DemoError for a host that does not exist or rounds out of order (before anything starts)."""
    def restart(host: str) -> None:
        with hosts.inside(host):
            nodes[host] = start_ipfs_node(repos / host, API_PORT, host=hosts.address(host), swarm_port=SWARM_PORT,
                                          timeout_s=hs.node_start_timeout_s, log_path=repos / f"{host}.log")

    def kill(host: str) -> None:  # no shutdown: what it had not written to its repo is lost
        nodes[host].kill()
        stop_ipfs_node(nodes[host])  # reaps it and closes its pipe

    out = []
    for kind, items in (("cut", hs.cuts), ("node killed", hs.node_kills)):
        for host, a, b in items:
            if (host not in hosts.names and not (host == "syncer" and kind == "cut")) or not 0 <= a < b:
                raise DemoError(f"cannot {kind.split()[0]} {host!r} from round {a} to {b}: hosts are {hosts.names}")
            if kind == "cut":
                out.append(HostFault("cut", host, (a, b), hosts.cut, hosts.restore, elected=elected,
                                     until_closes=until_closes, after_close_s=0.0 if host == "syncer" else None))
            else:
                out.append(HostFault("node killed", host, (a, b), kill, restart, until_closes=until_closes,
                                     after_close_s=hs.kill_after_close_s))
    return out


def network_summary(hosts: Hosts, window: dict[str, LinkCounters], payloads: dict, spec, s: DemoSettings,
                    syncer_pins_before: int, stored: dict[str, int], bitswap: dict[str, dict]) -> dict:
    """The figures printed after the demo's summary (bytes; per round = over ``s.rounds`` rounds;
    ``stored``: host -> bytes of blocks in its node's repo at the end, `repo_bytes`; ``bitswap``:
    host -> its node's `IpfsClient.bitswap_stat` after the seal)."""
    trainers = [h for h in hosts.names if h.startswith("trainer")]
    measured = sum(window[h].tx_bytes + window[h].rx_bytes for h in trainers) / len(trainers) / s.rounds
    params, h_steps = spec.architecture.param_count, spec.inner_steps
    sync_dp = 2 * params * FP32_BYTES * h_steps
    w = payloads["weights_bytes_per_round"]
    return {
        "namespace_prefix": hosts.prefix,
        "hosts": {h: {"address": hosts.address(h), "tx_bytes": window[h].tx_bytes, "rx_bytes": window[h].rx_bytes,
                      "stored_bytes": stored[h], "bitswap_received_bytes": bitswap[h]["DataReceived"],
                      "bitswap_duplicate_bytes": bitswap[h]["DupDataReceived"]} for h in hosts.names},
        "payloads": {k: payloads[k] for k in ("accepted", "fetched", "not_fetched", "submitted")},
        "syncer_node_pins_before_post": syncer_pins_before,
        "codec_payload_bytes_per_trainer_round": payloads["payload_bytes"] / (len(trainers) * s.rounds),
        "weights_bytes_per_round": sum(w) / len(w) if w else 0,
        "params": params, "inner_steps": h_steps,
        "sync_dp_bytes_per_trainer_round": sync_dp,
        "measured_bytes_per_trainer_host_round": round(measured),
        "ratio_to_sync_dp": sync_dp / measured if measured else float("inf"),
    }


def print_network(net: dict, rounds: int) -> None:
    t = Table(title=f"MB (10^6 bytes) on each host's link, from before the post to the seal ({rounds} rounds; "
                    f"exact bytes in summary.json)")
    for col in ("host", "sent", "received", "sent / round", "received / round", "blocks stored", "bitswap in",
                "copies"):  # the addresses are on the `hosts:` line
        t.add_column(col, justify="left" if col == "host" else "right")
    for h, row in net["hosts"].items():
        t.add_row(h, *(f"{v / 1e6:.2f}" for v in (
            row["tx_bytes"], row["rx_bytes"], row["tx_bytes"] / rounds, row["rx_bytes"] / rounds, row["stored_bytes"],
            row["bitswap_received_bytes"], row["bitswap_duplicate_bytes"])))
    console.print(t)
    console.print("(blocks stored: what the host's node holds at the end, each block once: added there or "
                  "fetched; bitswap in: the blocks its node took from peers since it started; copies: of them, "
                  "those of blocks that had arrived already)")
    p = net["payloads"]
    console.print(f"payloads: {p['fetched']}/{p['accepted']} accepted payloads fetched across the link (on the "
                  f"syncer's node, whose repo held {net['syncer_node_pins_before_post']} pins before the post; "
                  f"pinned by their own trainer's node only)")
    codec, weights = net["codec_payload_bytes_per_trainer_round"], net["weights_bytes_per_round"]
    console.print(f"codec: {codec:,.0f} payload bytes per trainer per round (the run's {p['submitted']} payloads), "
                  f"plus {weights:,.0f} bytes of weights a trainer fetches per round: {codec + weights:,.0f} expected")
    console.print(f"synchronous data-parallel: 2 x {net['params']:,} params x {FP32_BYTES} B x H={net['inner_steps']} "
                  f"= {net['sync_dp_bytes_per_trainer_round']:,} bytes sent per trainer per round (ring all-reduce "
                  f"of the fp32 gradient at every inner step; as much again received)")
    console.print(LAST_LINES[0].format(n=net["measured_bytes_per_trainer_host_round"]), highlight=False)
    console.print(LAST_LINES[1].format(ratio=f"{net['ratio_to_sync_dp']:.1f}"), highlight=False)


# -- the job --------------------------------------------------------------------------------------


def run_demo_hosts(s: DemoSettings, hs: HostsSettings | None = None) -> dict:
    """Run the main job with every party on its own host; returns the demo's summary with a
    ``network`` part (also written to ``<out>/summary.json``).

    ``s.rpc``, ``s.ipfs`` and ``s.deployments`` are set here (the chain host's). Raises DemoError: namespaces unavailable (not root, no iproute2), bad options, a host's
    service did not start, the run did not seal, the receipt did not verify, or an accepted payload
    was not fetched across the link. Everything it started is removed before it returns or raises.
    """
    reason = unavailable_reason()
    if reason:
        raise DemoError(f"`make demo-hosts` needs network namespaces: {reason}")
    hs = hs or HostsSettings()
    task = s.task_id or f"demo-hosts-{int(time.time())}"
    work = s.workdir or REPO_ROOT / ".devnet" / "demo-hosts" / task
    s = replace(s, stand_in=s.stand_in or any(h == "syncer" for h, _, _ in hs.cuts))
    check_settings(s)
    t_start = time.monotonic()
    names = host_names(s.trainers, s.stand_in)
    try:
        hosts = Hosts(names)
    except NetnsError as exc:
        raise DemoError(f"cannot make the hosts: {exc}") from None
    procs: list[Proc] = []
    nodes: dict[str, subprocess.Popen] = {}
    anvil = None
    try:
        posted: list = []  # the run, once posted: who is elected names the host a "syncer" cut takes down

        def elected() -> str:
            me = posted[0].sponsor.get_run(posted[0].task_id).syncer.lower()
            return next(host_of(r) for r, a in posted[0].addresses.items() if r in SYNCER_ROLES and a.lower() == me)

        def until_closes() -> float:  # anvil stamps blocks with this machine's clock
            return posted[0].sponsor.commit_phase(posted[0].task_id)[0] - time.time()

        faults = host_faults(hosts, hs, nodes, work / "ipfs", elected, until_closes)  # checked before anything starts

        def on_round(round_: int, procs) -> None:
            for f in faults:
                f(round_, procs)
        for host, rate in hs.caps:
            if host not in names:
                raise DemoError(f"cannot cap {host!r}: hosts are {names}")
            hosts.cap(host, rate)
            console.print(f"{host}'s link capped at {rate / 1e6:g} Mbit/s each way (tc token bucket)")
        console.print("hosts: " + ", ".join(f"{h} {hosts.address(h)}" for h in names)
                      + f" (namespaces {hosts.prefix}*, bridge {hosts.bridge_ns}, no route out)")
        chain_addr = hosts.address("chain")
        anvil = start_chain(hosts, work / "chain", hs.chain_start_timeout_s)
        rpc = f"http://{chain_addr}:{RPC_PORT}"
        nodes.update(start_nodes(hosts, work / "ipfs", hs.node_start_timeout_s))  # the faults hold this dict
        console.print(f"chain host: anvil on {rpc}; {len(nodes)} IPFS nodes, one per host (API :{API_PORT}, "
                      f"swarm :{SWARM_PORT})")
        deployments = deploy_on_chain_host(hosts, rpc, work / "chain" / "deployments.json", hs.deploy_timeout_s)
        s = replace(s, rpc=rpc, ipfs=nodes["chain"].api_url, deployments=deployments, workdir=work, task_id=task)
        syncer_pins_before = 0
        for h in [h for h in SYNCER_ROLES if h in names]:
            with hosts.inside(h), IpfsClient(nodes[h].api_url, retries=1) as c:
                syncer_pins_before += len(c.pins())
        before = counters(hosts)
        with hosts.inside("chain"):  # the sponsor's step, and the wait, from the chain host
            p = post_demo_task(s)
            posted.append(p)
            procs = launch_daemons(s, p.task, p.keys, p.work, spawn=spawn_in(hosts),
                                   role_config=role_configs(nodes, s.trainers))
            console.print(f"started the syncer{' and a stand-in' * s.stand_in}, {s.trainers} trainers and the "
                          f"watcher, each on its own host (logs in {p.work / 'logs'})")
            train_s = wait_sealed(p.sponsor, p.task_id, procs, s, on_round=on_round)
            window = {h: c - before[h] for h, c in counters(hosts).items()}
            for f in faults:  # a host still cut comes back (its daemon sees the run over and exits), a node restarts
                f.end(s.rounds)
            wait_settled(procs)
        stop(procs)
        bitswap = {}  # what each node's bitswap received since it started (the run and its set-up)
        for h in names:
            with hosts.inside(h), IpfsClient(nodes[h].api_url, retries=1) as c:
                bitswap[h] = c.bitswap_stat()
        console.print(f"run sealed after {train_s:.0f} s")
        payloads = payload_report(hosts, nodes, s, p.task_id, p.posted_block, p.addresses)
        with hosts.inside("watcher"):  # the receipt's replay and the summary, from the watcher's host
            ipfs_w = IpfsClient(nodes["watcher"].api_url)
            for h, node in nodes.items():
                if h != "watcher":
                    ipfs_w.swarm_connect(node.swarm_addr)
            sponsor_w = ChainClient(s.rpc, s.deployments, anvil_account(SPONSOR_INDEX))
            console.print(f"replaying the run from the watcher's host ({hosts.address('watcher')}, its own node)")
            summary = summarize(s, sponsor_w, ipfs_w, p.spec, p.df, p.task, p.task_id, p.posted_block, p.addresses,
                                t_start, p.syncer_stake, watcher_rounds(p.work / "watcher"))
        stored = {h: repo_bytes(work / "ipfs" / h) for h in names}
        net = network_summary(hosts, window, payloads, p.spec, s, syncer_pins_before, stored, bitswap)
        # each live round's time, opening to commit (chain seconds), and who was credited in it
        rounds = [r for r in run_view.build(sponsor_w, p.task_id, trainers=False).rounds if r.live]
        net["caps"] = dict(hs.caps)
        net["round_s"] = [r.committed_at - r.opened_at for r in rounds]
        console.print(f"round times (chain seconds, opening to commit): {net['round_s']}"
                      + (f" with {', '.join(f'{h} at {r / 1e6:g} Mbit/s' for h, r in hs.caps)}" if hs.caps else ""))
        if faults:
            index = {a.lower(): i for i, a in enumerate(sponsor_w.trainers_of(p.task_id))}
            net["faults"] = [{"fault": f.what, "host": f.host, "events": f.events} for f in faults]
            net["credited_rounds"] = {
                host_of(role): [r.round for r in rounds if r.accepted_bitmaps[index[a.lower()]]]
                for role, a in p.addresses.items() if role.startswith("trainer") and a.lower() in index}
            net["committed_by"] = payloads["committed_by"]
            net["verdicts"] = payloads["verdicts"]
            for f in net["faults"]:
                console.print(f"fault: {f['host']}: {f['events']}")
            console.print(f"rounds credited per trainer host {net['credited_rounds']}; rounds committed by "
                          f"{net['committed_by']}")
        summary["network"] = net
        summary["receipt"]["replayed_from"] = f"watcher ({hosts.address('watcher')})"
        (s.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        print_network(net, s.rounds)
        if net["payloads"]["not_fetched"]:
            raise DemoError(f"{len(net['payloads']['not_fetched'])} accepted payload(s) were not fetched across the "
                            f"link: {net['payloads']['not_fetched'][:3]}")
        return summary
    finally:
        stop(procs)
        for proc in nodes.values():
            stop_ipfs_node(proc)
        if anvil is not None and anvil.poll() is None:
            anvil.terminate()
            try:
                anvil.wait(15)
            except subprocess.TimeoutExpired:
                anvil.kill()
        hosts.close()


@click.command()
@click.option("--trainers", default=DemoSettings.trainers, show_default=True, help="M (one host each)")
@click.option("--quorum", default=DemoSettings.quorum, show_default=True, help="K")
@click.option("--rounds", default=DemoSettings.rounds, show_default=True)
@click.option("--timeout-s", default=DemoSettings.timeout_s, show_default=True,
              help="Seconds the run may take to seal.")
@click.option("--workdir", type=click.Path(path_type=Path), default=None,
              help="Keys, configs, the hosts' data and logs (default .devnet/demo-hosts/<task id>).")
@click.option("--out", type=click.Path(path_type=Path), default=REPO_ROOT / "out" / "demo-hosts", show_default=True)
@click.option("--cut", default=None, metavar="HOST",
              help="Fault drill: cut this host's link (e.g. trainer3) when round 1 opens, restore it when round 2 "
                   "opens; 'syncer' cuts the elected syncer's host, and a stand-in syncer runs on a host of its own.")
@click.option("--kill-node", default=None, metavar="HOST",
              help="Fault drill: kill this host's IPFS node (e.g. trainer1) in round 1, 3 s after its commit phase "
                   "closes (its trainer has pinned and revealed), and restart it on its repo when round 2 opens.")
@click.option("--cap", "caps", multiple=True, metavar="HOST=MBIT",
              help="Cap a host's link with a tc token bucket, e.g. trainer0=10 (Mbit/s each way); repeatable.")
def main(cut: str | None, kill_node: str | None, caps: tuple[str, ...], **kw) -> None:
    """Run the demo with every party on its own host (network namespaces; needs root)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds: the hosts are removed
    try:
        parsed = []
        for c in caps:
            host, _, mbit = c.partition("=")
            try:
                parsed.append((host, int(float(mbit) * 1e6)))
            except ValueError:
                raise click.BadParameter(f"{c!r} is not HOST=MBIT (e.g. trainer0=10)", param_hint="--cap") from None
        run_demo_hosts(DemoSettings(**kw), HostsSettings(cuts=((cut, 0, 1),) if cut else (), caps=tuple(parsed),
                                                         node_kills=((kill_node, 0, 1),) if kill_node else ()))
    except TenzroError as exc:
        console.print(f"[red]demo-hosts failed:[/] {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
