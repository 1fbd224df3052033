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
(so remembering a failed signature does not help). It publishes through an IPFS node of its own,
swarm-connected to the devnet's node (a peer of its own, as on a real network), and posts to the
syncer's endpoint in batches of `delivery.MAX_BATCH`.

Needs the devnet up and deployed (`make deploy`); then::

    .venv/bin/python operator/benchmarks/flood.py --rates 1000,2000,4000,8000

Prints a table and writes operator/benchmarks/results/flood.md, which ends with the lines
``forged messages per second absorbed with every round on time: <N>`` and
``syncer peak RSS growth under the largest absorbed flood: <MiB> MiB``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import click
import httpx

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "operator" / "benchmarks" / "results" / "flood.md"
FLOODER_PROCESSES = 2  # the outsider's processes (one interpreter each), sharing its IPFS node
PUBSUB_THREADS = 8  # concurrent publishes to the outsider's node (one HTTP call each)
OUTSIDER_ADDRESS = "127.0.0.2"  # the flooder's source address on the loopback interface
TASK = f"flood-bench-{int(time.time())}"  # one name per invocation: every run of it starts from one snapshot


# ----------------------------------------------------------------------------- forged messages


def _plan(model) -> list[tuple[str, object]]:
    """How to fill each field of ``model`` (a root-flow pydantic message class): a constant (its
    ``type``), or a generator of a random value of the field's shape."""
    out: list[tuple[str, object]] = []
    for name, info in model.model_fields.items():
        if name == "type":
            out.append((name, info.default))
        elif name == "signature":
            out.append((name, lambda: "0x" + os.urandom(65).hex()))
        elif name == "cid":
            out.append((name, lambda: "bafkrei" + os.urandom(26).hex()))
        elif name == "url":
            out.append((name, "http://127.0.0.1:9/"))
        elif info.annotation is int:
            out.append((name, lambda: secrets.randbelow(2**31)))
        else:
            out.append((name, lambda: "0x" + os.urandom(32).hex()))
    return out


def _forge(plan, **known) -> bytes:
    """One message of a `_plan` with the ``known`` fields and fresh random values in the others, in
    the messages' own encoding (canonical JSON: sorted keys, no spaces)."""
    fields = {n: known[n] if n in known else (g() if callable(g) else g) for n, g in plan}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


class Forger:
    """Fresh forged messages of one task: commitments and reveals naming an enrolled trainer, the
    open round and a real fragment; announcements naming the run's syncer and a newer time."""

    def __init__(self, task_id: bytes, fragments: int) -> None:
        from tenzro_operator.roles.delivery import Announcement
        from tenzro_operator.root_flow import CommitMessage, RevealMessage

        self.task, self.fragments = "0x" + task_id.hex(), fragments
        self.round, self.trainers, self.syncer = 0, ["0x" + "11" * 20], "0x" + "22" * 20
        self._plans = [_plan(CommitMessage), _plan(RevealMessage)]
        self._announcement = _plan(Announcement)

    def submission(self) -> bytes:
        return _forge(self._plans[secrets.randbelow(2)], task=self.task, round=self.round, fragment=secrets.randbelow(self.fragments),
                      trainer=self.trainers[secrets.randbelow(len(self.trainers))])

    def announcement(self) -> bytes:
        return _forge(self._announcement, task=self.task, syncer=self.syncer, issued=int(time.time()) + 1)


def flood(rpc: str, deployments: str, task_id: bytes, fragments: int, endpoint: str, ipfs_api: str,
          devnet_swarm: str, rate: int, stop_at: float, counts) -> None:
    """The outsider's process: half the rate to the syncer's endpoint (batches of `MAX_BATCH`), half
    on pubsub through its own node (submission topic, and one in five on the syncer topic), until
    ``stop_at`` (time.time()). ``counts``: a shared array (sent over RPC, sent over pubsub, errors)."""
    from tenzro_operator.chain import ChainClient
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.pubsub import submission_topic, syncer_topic
    from tenzro_operator.roles.delivery import DELIVER, MAX_BATCH, encode_message

    chain = ChainClient(rpc, deployments)
    forger = Forger(task_id, fragments)
    ipfs = IpfsClient(ipfs_api)
    ipfs.swarm_connect(devnet_swarm)
    done = threading.Event()

    def watch_chain() -> None:  # the public facts a forger needs, read once a second
        while not done.is_set():
            try:
                run = chain.get_run(task_id)
                forger.round, forger.syncer = run.current_round, run.syncer.lower()
                forger.trainers = [a.lower() for a in chain.trainers_of(task_id)] or forger.trainers
            except Exception:  # noqa: BLE001 - the run may not exist yet; try again
                pass
            done.wait(1.0)

    def paced(per_s: float, send_batch, batch: int) -> None:
        interval, nxt = batch / per_s, time.monotonic()
        while time.time() < stop_at:
            try:
                send_batch(batch)
            except Exception:  # noqa: BLE001 - a refusal or a dead endpoint: count it, go on
                with counts.get_lock():
                    counts[2] += 1
            nxt += interval
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()  # behind: send as fast as we can, without a burst to catch up

    # from a loopback address of its own, as a client on another host would be: the syncer's
    # per-client limit then tells it from the trainers, who post from 127.0.0.1
    http = httpx.Client(timeout=10.0, transport=httpx.HTTPTransport(local_address=OUTSIDER_ADDRESS))

    def rpc_batch(n: int) -> None:
        body = [{"jsonrpc": "2.0", "id": i, "method": DELIVER, "params": {"message": encode_message(forger.submission())}}
                for i in range(n)]
        http.post(endpoint, json=body)
        with counts.get_lock():
            counts[0] += n

    def pubsub_one(_n: int) -> None:
        if secrets.randbelow(5) == 0:
            ipfs.pubsub_publish(syncer_topic(task_id), forger.announcement())
        else:
            ipfs.pubsub_publish(submission_topic(task_id), forger.submission())
        with counts.get_lock():
            counts[1] += 1

    threads = [threading.Thread(target=watch_chain, daemon=True),
               threading.Thread(target=paced, args=(rate / 2, rpc_batch, MAX_BATCH), daemon=True)]
    threads += [threading.Thread(target=paced, args=(rate / 2 / PUBSUB_THREADS, pubsub_one, 1), daemon=True)
                for _ in range(PUBSUB_THREADS)]
    for t in threads:
        t.start()
    for t in threads[1:]:
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
    from tenzro_operator.ipfs_node import start_ipfs_node, stop_ipfs_node

    port = _free_port()
    work = Path(tempfile.mkdtemp(prefix=f"flood-{rate}-"))
    s = demo.DemoSettings(rpc=args["rpc"], ipfs=args["ipfs"], workdir=work / "run", out=work / "out", task_id=TASK,
                          trainers=args["trainers"], quorum=args["quorum"], fragments=args["fragments"],
                          rounds=args["rounds"], timeout_s=args["timeout_s"],
                          syncer_options={"submission_rpc_port": port, "submission_rpc_host": "127.0.0.1"})
    p = demo.post_demo_task(s)
    procs = demo.launch_daemons(s, p.task, p.keys, p.work, watcher=False)
    syncer_pid = procs[0].popen.pid
    counts = mp.Array("q", 3)  # sent over RPC, sent over pubsub, failed sends
    state = {"peak": 0, "base": 0, "stop": False}
    flooders, node = [], None

    def on_round(r: int, _procs) -> None:
        nonlocal node
        if r != 0:
            return
        state["base"] = _rss_kib(syncer_pid)
        state["t0"] = time.monotonic()
        if rate:
            node = start_ipfs_node(work / "outsider-ipfs", _free_port())
            devnet_swarm = IpfsClient(args["ipfs"]).id()["Addresses"][0]
            flooders.extend(mp.Process(target=flood, daemon=True, args=(
                args["rpc"], str(s.deployments), p.task_id, s.fragments, f"http://127.0.0.1:{port}/", node.api_url,
                devnet_swarm, rate / FLOODER_PROCESSES, time.time() + s.timeout_s, counts))
                for _ in range(FLOODER_PROCESSES))
            for f in flooders:
                f.start()

    def sample() -> None:
        while not state["stop"]:
            state["peak"] = max(state["peak"], _rss_kib(syncer_pid))
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
            f.terminate()
            f.join(10)
        if node is not None:
            stop_ipfs_node(node)
    role_of = {a.lower(): r for r, a in p.addresses.items()}
    rows = trainer_rows(p.sponsor, p.task_id, p.posted_block, role_of)
    return {"rate": rate, "sent_rpc": counts[0], "sent_pubsub": counts[1], "errors": counts[2], "error": error,
            "achieved": (counts[0] + counts[1]) / elapsed if rate and elapsed > 0 else 0.0,
            "durations": round_durations(p.sponsor, p.task_id, p.posted_block),
            # per enrollment index (the index picks the shard and seeds the scoring batches), not per
            # name: the trainers enroll in whatever order they get there
            "trainers": [(t["accepted"], t["credits"], t["reward_tnzo"]) for t in rows],
            "rss_base_mib": state["base"] / 1024, "rss_peak_mib": state["peak"] / 1024}


# ----------------------------------------------------------------------------- main


def render(rows: list[dict], base: dict, slack: int, command: str) -> str:
    lines = ["# Flood: a keyless outsider against a root-flow syncer while a devnet run trains", "",
             f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} CPU cores shared by anvil, the IPFS nodes, the syncer, "
             f"{base['m']} trainers, and the flooder (no watcher). Each row is one run from the same chain snapshot and task "
             "(same data, seeds and scoring batches). On time: every round's duration (chain seconds between "
             f"commits) at most the unflooded run's + {slack} s; credits: every trainer's accepted count and "
             "reward identical to the unflooded run's. Half the rate goes to the syncer's JSON-RPC endpoint, half on "
             "pubsub from the outsider's own IPFS node (one in five of those on the syncer topic: announcements).",
             "", f"Unflooded run: round durations {base['durations']} s, syncer RSS {base['rss_peak_mib']:.0f} MiB peak.",
             "", "| target msg/s | achieved msg/s | sent RPC | sent pubsub | round durations (s) | on time | credits same "
                 "| syncer RSS growth (MiB) | run |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['rate']} | {r['achieved']:.0f} | {r['sent_rpc']} | {r['sent_pubsub']} | {r['durations']} | "
                     f"{'yes' if r['on_time'] else 'NO'} | {'yes' if r['credits_same'] else 'NO'} | "
                     f"{r['rss_peak_mib'] - r['rss_base_mib']:.1f} | {r['error'] or 'sealed, all claimed'} |")
    ok = [r for r in rows if r["on_time"] and r["credits_same"]]
    best = max(ok, key=lambda r: r["achieved"]) if ok else None
    lines += ["", f"forged messages per second absorbed with every round on time: {best['achieved']:.0f}" if best
              else "forged messages per second absorbed with every round on time: 0",
              f"syncer peak RSS growth under the largest absorbed flood: "
              f"{(best['rss_peak_mib'] - best['rss_base_mib']) if best else 0:.1f} MiB"]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--rates", default="1000,2000,4000,8000", show_default=True,
              help="Forged messages per second, comma-separated: one run each (after a run without a flood).")
@click.option("--rpc", default="http://127.0.0.1:8545", show_default=True)
@click.option("--ipfs", default="http://127.0.0.1:5001", show_default=True)
@click.option("--trainers", default=4, show_default=True)
@click.option("--quorum", default=3, show_default=True)
@click.option("--fragments", default=4, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--timeout-s", default=420.0, show_default=True, help="Seconds a run may take to seal.")
@click.option("--slack-s", default=2, show_default=True, help="Chain seconds a flooded round may take over the unflooded one.")
def main(rates, rpc, ipfs, trainers, quorum, fragments, rounds, timeout_s, slack_s) -> None:
    web3 = httpx.Client(timeout=30.0)

    def call(method: str, params: list):
        r = web3.post(rpc, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
        if "error" in r:
            raise click.ClickException(f"{method}: {r['error']}")
        return r["result"]

    args = {"rpc": rpc, "ipfs": ipfs, "trainers": trainers, "quorum": quorum, "fragments": fragments, "rounds": rounds,
            "timeout_s": timeout_s}
    snapshot = call("evm_snapshot", [])  # the state every run starts from (anvil drops it on revert)
    base = one_run(0, args)
    base["m"] = trainers
    print(f"unflooded: rounds {base['durations']} s, RSS peak {base['rss_peak_mib']:.0f} MiB", flush=True)
    rows = []
    for rate in [int(x) for x in rates.split(",") if x.strip()]:
        call("evm_revert", [snapshot])
        snapshot = call("evm_snapshot", [])
        row = one_run(rate, args)
        row["on_time"] = len(row["durations"]) == len(base["durations"]) and all(
            d <= b + slack_s for d, b in zip(row["durations"], base["durations"]))
        row["credits_same"] = row["trainers"] == base["trainers"]
        rows.append(row)
        print(f"target {rate}/s achieved {row['achieved']:.0f}/s: rounds {row['durations']} s, on time "
              f"{row['on_time']}, credits same {row['credits_same']}, RSS +"
              f"{row['rss_peak_mib'] - row['rss_base_mib']:.1f} MiB; trainers {row['trainers']} (unflooded "
              f"{base['trainers']}){'; ' + row['error'] if row['error'] else ''}", flush=True)
    text = render(rows, base, slack_s, "python " + " ".join(sys.argv))
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
