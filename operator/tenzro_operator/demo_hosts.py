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
====================  =======================================================================

Every daemon's ``ipfs_bootstrap`` lists the other hosts' nodes, so payloads, weights and pubsub
messages cross the links (bitswap, gossipsub). After the run it checks, for every accepted payload
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
import time
from dataclasses import dataclass, replace
from pathlib import Path

import click
from rich.table import Table

from tenzro_operator import devnet, run_view
from tenzro_operator.chain import ChainClient
from tenzro_operator.demo import (
    REPO_ROOT,
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
from tenzro_operator.ipfs_node import start_ipfs_node, stop_ipfs_node
from tenzro_operator.keys import anvil_account
from tenzro_operator.netns import Hosts, LinkCounters, NetnsError, unavailable_reason
from tenzro_operator.root_flow import committed_rounds
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript

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
    # fault (issue 25): this host's link is cut when round cut_rounds[0] opens and restored when
    # round cut_rounds[1] opens (the run goes on without it; its trainer rejoins)
    cut: str | None = None
    cut_rounds: tuple[int, int] = (0, 1)
    # (host, bits per second): a tc token bucket on that host's link, both ways, for the whole run
    caps: tuple[tuple[str, int], ...] = ()


def host_names(trainers: int) -> list[str]:
    """The hosts, in address order: chain (.1), syncer (.2), watcher (.3), trainer0.. (.4..)."""
    return ["chain", "syncer", "watcher", *(f"trainer{i}" for i in range(trainers))]


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


def role_configs(nodes: dict[str, subprocess.Popen], trainers: int) -> dict[str, dict]:
    """Each daemon's own node (``ipfs_api``) and the other hosts' nodes (``ipfs_bootstrap``)."""
    out = {}
    for role in ["syncer", "watcher", *(f"trainer-{i}" for i in range(trainers))]:
        host = host_of(role)
        out[role] = {"ipfs_api": nodes[host].api_url,
                     "ipfs_bootstrap": [p.swarm_addr for h, p in nodes.items() if h != host]}
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
    """Where every payload of the committed transcripts lives, read from inside the syncer's host:
    the transcripts and payloads from the syncer's node offline (its own blocks only), the pins of
    each trainer's node from inside that host.

    Returns ``{"accepted", "fetched", "not_fetched": [...], "payload_bytes", "submitted",
    "weights_bytes_per_round"}``; a payload counts as fetched when the syncer's node holds it (its
    sha256 is the signed one) and its own trainer's node, and no other trainer's, pinned it."""
    owner_host = {a.lower(): host_of(r) for r, a in addresses.items() if r.startswith("trainer-")}
    pins = {}
    for h in owner_host.values():
        with hosts.inside(h), IpfsClient(nodes[h].api_url, retries=1) as c:
            pins[h] = c.pins()
    accepted = fetched = payload_bytes = submitted = 0
    weights_bytes = []
    not_fetched = []
    with hosts.inside("syncer"), IpfsClient(nodes["syncer"].api_url, offline=True, retries=1) as own:
        chain = ChainClient(s.rpc, s.deployments)
        for r, ev in sorted(committed_rounds(chain, task_id, from_block, s.rounds).items()):
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
                    if not was_accepted:
                        continue
                    accepted += 1
                    host = owner_host[sub.trainer.lower()]
                    others = [h for h, p in pins.items() if h != host and sub.cid in p]
                    ok = (data is not None and "0x" + hashlib.sha256(data).hexdigest() == sub.sha256
                          and sub.cid in pins[host] and not others)
                    fetched += ok
                    if not ok:
                        not_fetched.append({"round": r, "fragment": fr.fragment, "trainer": host, "cid": sub.cid,
                                            "on_syncer_node": data is not None, "pinned_by_owner": sub.cid in pins[host],
                                            "pinned_by_others": others})
    return {"accepted": accepted, "fetched": fetched, "not_fetched": not_fetched, "payload_bytes": payload_bytes,
            "submitted": submitted, "weights_bytes_per_round": weights_bytes}


def repo_bytes(repo: Path) -> int:
    """Bytes of the blocks a node's repo holds (its ``blocks`` folder): what it added or fetched once."""
    return sum(f.stat().st_size for f in (repo / "blocks").rglob("*") if f.is_file())


class LinkCut:
    """The `HostsSettings.cut` fault as `demo.wait_sealed`'s round hook: takes ``host``'s link down
    when round ``rounds[0]`` opens, up again when round ``rounds[1]`` opens (and at the end, if the
    run sealed first); ``events`` records ``(action, round, seconds since the hook was made)``."""

    def __init__(self, hosts: Hosts, host: str, rounds: tuple[int, int]) -> None:
        if host not in hosts.names or not 0 <= rounds[0] < rounds[1]:
            raise DemoError(f"cannot cut {host!r} from round {rounds[0]} to {rounds[1]}: hosts are {hosts.names}")
        self.hosts, self.host, self.rounds = hosts, host, rounds
        self.events: list[tuple[str, int, float]] = []
        self._t0 = time.monotonic()

    def __call__(self, round_: int, procs) -> None:
        if not self.events and self.rounds[0] <= round_ < self.rounds[1]:
            self.hosts.cut(self.host)
            self.events.append(("cut", round_, time.monotonic() - self._t0))
            console.print(f"FAULT: {self.host}'s link cut at round {round_ + 1}")
        elif round_ >= self.rounds[1]:
            self.restore(round_)

    def restore(self, round_: int) -> None:
        """Bring the link up again, if it is down (cut once, not restored yet)."""
        if len(self.events) == 1:
            self.hosts.restore(self.host)
            self.events.append(("restore", round_, time.monotonic() - self._t0))
            console.print(f"FAULT: {self.host}'s link restored at round {round_ + 1}")


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

    ``s.rpc``, ``s.ipfs`` and ``s.deployments`` are set here (the chain host's); the flow is the root
    flow. Raises DemoError: namespaces unavailable (not root, no iproute2), bad options, a host's
    service did not start, the run did not seal, the receipt did not verify, or an accepted payload
    was not fetched across the link. Everything it started is removed before it returns or raises.
    """
    reason = unavailable_reason()
    if reason:
        raise DemoError(f"`make demo-hosts` needs network namespaces: {reason}")
    hs = hs or HostsSettings()
    task = s.task_id or f"demo-hosts-{int(time.time())}"
    work = s.workdir or REPO_ROOT / ".devnet" / "demo-hosts" / task
    check_settings(replace(s, flow="root"))
    t_start = time.monotonic()
    names = host_names(s.trainers)
    try:
        hosts = Hosts(names)
    except NetnsError as exc:
        raise DemoError(f"cannot make the hosts: {exc}") from None
    procs: list[Proc] = []
    nodes: dict[str, subprocess.Popen] = {}
    anvil = None
    try:
        fault = LinkCut(hosts, hs.cut, hs.cut_rounds) if hs.cut else None  # checked before anything starts
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
        nodes = start_nodes(hosts, work / "ipfs", hs.node_start_timeout_s)
        console.print(f"chain host: anvil on {rpc}; {len(nodes)} IPFS nodes, one per host (API :{API_PORT}, "
                      f"swarm :{SWARM_PORT})")
        deployments = deploy_on_chain_host(hosts, rpc, work / "chain" / "deployments.json", hs.deploy_timeout_s)
        s = replace(s, rpc=rpc, ipfs=nodes["chain"].api_url, deployments=deployments, workdir=work, task_id=task,
                    flow="root")
        with hosts.inside("syncer"), IpfsClient(nodes["syncer"].api_url, retries=1) as c:
            syncer_pins_before = len(c.pins())
        before = counters(hosts)
        with hosts.inside("chain"):  # the sponsor's step, and the wait, from the chain host
            p = post_demo_task(s)
            procs = launch_daemons(s, p.task, p.keys, p.work, spawn=spawn_in(hosts),
                                   role_config=role_configs(nodes, s.trainers))
            console.print(f"started the syncer, {s.trainers} trainers and the watcher, each on its own host "
                          f"(logs in {p.work / 'logs'})")
            train_s = wait_sealed(p.sponsor, p.task_id, procs, s, on_round=fault)
            window = {h: c - before[h] for h, c in counters(hosts).items()}
            if fault is not None:
                fault.restore(s.rounds)
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
        if fault is not None:
            index = {a.lower(): i for i, a in enumerate(sponsor_w.trainers_of(p.task_id))}
            net["fault"] = {"cut": hs.cut, "events": fault.events, "credited_rounds": {
                host_of(role): [r.round for r in rounds if r.accepted_bitmaps[index[a.lower()]]]
                for role, a in p.addresses.items() if role.startswith("trainer") and a.lower() in index}}
            console.print(f"fault: {hs.cut} cut {fault.events}; rounds credited per trainer host "
                          f"{net['fault']['credited_rounds']}")
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
              help="Fault drill: cut this host's link (e.g. trainer3) when round 1 opens, restore it when round 2 opens.")
@click.option("--cap", "caps", multiple=True, metavar="HOST=MBIT",
              help="Cap a host's link with a tc token bucket, e.g. trainer0=10 (Mbit/s each way); repeatable.")
def main(cut: str | None, caps: tuple[str, ...], **kw) -> None:
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
        run_demo_hosts(DemoSettings(**kw), HostsSettings(cut=cut, caps=tuple(parsed)))
    except TenzroError as exc:
        console.print(f"[red]demo-hosts failed:[/] {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
