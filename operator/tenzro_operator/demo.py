"""The main job (`make demo`): a full training run on the devnet, end to end, on real data.

The run is posted on the root flow (contracts/PROTOCOL.md §5: trainers deliver signed commit and
reveal messages over IPFS pubsub, the syncer commits each round with one ``commitRound``, a
watcher re-checks every round within its challenge window, trainers seal and claim their rewards
with Merkle credit proofs) with the defence of a new spec, `tenzro_trainer.config.ROBUST_DEFAULTS`
(the rule, the norm screen, loss-improvement scoring).

Steps, each printed as it happens:

1. check the devnet (anvil, IPFS node) and the deployment record (`make deploy`);
2. make keystores for a sponsor, a syncer and M trainers from anvil's
   well-known accounts (any M the registry allows: 256 trainers, M x F <= 2048 submission
   slots; the options are checked before anything starts), give the accounts beyond anvil's
   ten funded ones ETH for gas (`devnet.fund_eth`) and fund them all with TNZO from the
   deployer (the token owner);
3. the syncer account joins the syncer pool with a stake that covers the run's
   bond; the sponsor pins the dataset (the default collection of real series),
   the initial weights and the spec (with a syncer fee and bond), escrows the
   reward pool and posts the task;
4. one syncer and M trainer daemons start as separate processes, each with its
   own key and config file, and a watcher (no key) that replays each round as it
   lands; the M-th enrollment opens round 0, the syncer is elected (two steps) and
   the rounds run until the run is sealed, the trainers have claimed their rewards and
   the syncer its fee;
5. the receipt is checked by the verifier at 0x…1008 and by an off-chain
   replay from IPFS; a RewardEscrow deposit bound to the run (task id, sponsor,
   spec hash, least accepted work) is released against it;
6. a summary (per trainer: accepted, missed, reward, slashed, withdrawable, read by
   `tenzro_operator.demo_results` from the run's events;
   held-out loss per round; what the watcher checked (an honest run has no mismatch,
   else the demo fails) and its lag; the sealed model's zero-shot relative MASE
   (:func:`tenzro_trainer.zeroshot.zero_shot_score`); the run's token accounting, which must balance to
   the atto-unit: pool + stakes + syncer stake in = rewards + refunds + syncer
   fees + dust + burned + syncer stake still registered out) is printed and
   written, with a loss-curve PNG.

Everything lands under `--workdir` (default `.devnet/demo/<task id>`), the
summary and plot under `--out` (default `out/demo`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import click
import pandas as pd
import yaml
from rich.console import Console
from rich.table import Table

from tenzro_operator import devnet, escrow, replay
from tenzro_operator.chain import ChainClient, RunStatus
from tenzro_operator.demo_results import accounting, round_weights, trainer_rows, unclaimed_credits
from tenzro_operator.errors import RpcUnavailable, TenzroError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account, create_devnet_keystores
from tenzro_operator.roles.sponsor import (
    TOKEN,
    SpecDraft,
    build_spec,
    default_score_min,
    post_task,
    robust_aggregation,
)
from tenzro_operator.spec import DEFAULT_COMPRESSION, MAX_SUBMISSION_SLOTS, spec_hash
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_operator.units import format_tokens
from tenzro_operator.views import run as run_view
from tenzro_trainer.config import ROBUST_DEFAULTS
from tenzro_trainer.data.collection import default_collection
from tenzro_trainer.evaluate import HeldoutEvaluator
from tenzro_trainer.models import build_model
from tenzro_trainer.zeroshot import reference_figures, zero_shot_score

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD_ENV = "TENZRO_KEYSTORE_PASSWORD"
DEMO_PASSWORD = "tenzro-devnet-demo"  # devnet keystores of anvil's public test keys only
MAX_TRAINERS = 256  # TrainingRegistry.MAX_TRAINERS
MAX_FRAGMENTS = 128  # TrainingRegistry.MAX_FRAGMENTS
MAX_ROUNDS = 1024  # TrainingRegistry.MAX_ROUNDS
ETH = 10**18  # wei
console = Console()


class DemoError(TenzroError):
    """The demo could not complete; the message says which step and why."""


@dataclass
class DemoSettings:
    """Scale of the demo run (the Phase-1 defaults stay the defaults of the spec; see DESIGN.md)."""

    rpc: str = "http://127.0.0.1:8545"
    ipfs: str = "http://127.0.0.1:5001"
    deployments: Path = REPO_ROOT / "deployments" / "local.json"
    workdir: Path | None = None
    out: Path = REPO_ROOT / "out" / "demo"
    trainers: int = 4
    quorum: int = 3
    fragments: int = 12
    rounds: int = 8
    inner_steps: int = 24
    batch_size: int = 64
    # a round's commit phase lasts grace - min(challenge window, grace / 2) = 20 s, time
    # for the trainers' inner steps on a loaded 2-core machine; the syncer commits once it has
    # closed and the reveals are in (about 17 s a round on the devnet); the seal waits one
    # challenge window (30 s) after the last commit.
    grace_window_ms: int = 40_000
    challenge_window_ms: int = 30_000
    aggregation: str | dict = field(default_factory=robust_aggregation)  # ROBUST_DEFAULTS' rule
    norm_multiple: float = ROBUST_DEFAULTS["norm_multiple"]  # the norm screen
    scoring: bool = ROBUST_DEFAULTS["scoring"]  # loss-improvement scoring (score_min 0)
    overlap_steps: int = 0  # the spec's overlap: early inner steps while a round settles (<= inner_steps)
    compression: str | dict | None = DEFAULT_COMPRESSION  # the payload codec (spec.DEFAULT_COMPRESSION: MXFP4)
    reward_pool: int = 1_000 * TOKEN
    stake: int = 100 * TOKEN
    escrow_bonus: int = 50 * TOKEN
    syncer_fee_bps: int = 100  # 1 % of the pool to the syncer, paid per finalized round
    syncer_bond: int = 10 * TOKEN  # locked from the syncer's pool stake until the seal
    enrollment_window_ms: int = 600_000  # 10 min for the M trainers to enroll
    timeout_s: float = 900.0
    task_id: str | None = None
    model_metadata: dict = field(default_factory=lambda: {"preset": "demo"})  # the spec's architecture.metadata
    syncer_options: dict = field(default_factory=dict)  # extra syncer.yaml keys, e.g. straggler_wait_s
    # a second syncer candidate ("standin"), registered before the post and run beside the first:
    # whichever is not elected stands in (`SyncerDaemon.root_stand_by`) and replaces a silent one
    stand_in: bool = False
    eth_per_account: int = 100 * ETH  # wei every role account holds at least (gas)


def check_settings(s: DemoSettings) -> None:
    """Refuse, before anything starts, a shape the registry or the demo cannot run.

    Raises:
        DemoError: naming the option and the bound it breaks.
    """
    problems = []
    if not 1 <= s.trainers <= MAX_TRAINERS:
        problems.append(f"--trainers (M) is {s.trainers}; the registry takes 1 to {MAX_TRAINERS}")
    if not 1 <= s.quorum <= max(s.trainers, 1):
        problems.append(f"--quorum (K) is {s.quorum}; it must be between 1 and --trainers ({s.trainers})")
    if not 1 <= s.fragments <= MAX_FRAGMENTS:
        problems.append(f"--fragments (F) is {s.fragments}; the registry takes 1 to {MAX_FRAGMENTS}")
    if s.trainers * s.fragments > MAX_SUBMISSION_SLOTS:
        problems.append(f"M x F = {s.trainers} x {s.fragments} = {s.trainers * s.fragments} submissions per round; "
                        f"the registry takes at most {MAX_SUBMISSION_SLOTS}")
    if not 1 <= s.rounds <= MAX_ROUNDS:
        problems.append(f"--rounds is {s.rounds}; the registry takes 1 to {MAX_ROUNDS}")
    if s.inner_steps < 1:
        problems.append(f"--inner-steps (H) is {s.inner_steps}; it must be at least 1")
    if s.batch_size < 1:
        problems.append(f"batch size is {s.batch_size}; it must be at least 1")
    if s.timeout_s <= 0:
        problems.append(f"--timeout-s is {s.timeout_s}; it must be positive")
    if problems:
        raise DemoError("bad demo options: " + "; ".join(problems))


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    killed: bool = False  # stopped on purpose (fault injection): its exit is not a failure

    def kill(self) -> None:
        self.killed = True
        self.popen.kill()


def _client(s: DemoSettings, account=None) -> ChainClient:
    return ChainClient(s.rpc, s.deployments, account)


def _preflight(s: DemoSettings) -> tuple[ChainClient, IpfsClient]:
    if not Path(s.deployments).exists():
        raise DemoError(f"no deployment record at {s.deployments}; run `make deploy` first")
    deployer = _client(s, anvil_account(0))
    deployer.check_deployment()
    ipfs = IpfsClient(s.ipfs)
    ipfs.version()
    return deployer, ipfs


def _syncer_stake(deployer: ChainClient, s: DemoSettings) -> int:
    """What the syncer registers: the registry's minimum, and at least the run's bond."""
    return max(deployer.min_syncer_stake(), s.syncer_bond)


def _fund(deployer: ChainClient, accounts: dict[str, str], s: DemoSettings) -> list[str]:
    """ETH for gas (anvil funds only its first ten accounts) and TNZO for the pool and the stakes,
    and for a syncer half a bond more in its wallet (availability challenges' bonds, a tenth of
    the run's bond each: a pool stake does not pay them); returns the addresses that were given ETH."""
    given_eth = devnet.fund_eth(s.rpc, list(accounts.values()), s.eth_per_account, funder=deployer.account)
    syncer_need = _syncer_stake(deployer, s) + s.syncer_bond // 2
    need = {"sponsor": s.reward_pool + s.escrow_bonus, "syncer": syncer_need, "standin": syncer_need}
    pending = []
    for role, addr in accounts.items():
        amount = need.get(role, s.stake)
        if deployer.token_balance(addr) < amount:
            pending.append(deployer.send("mint", addr, amount, contract="TenzroToken"))
    for p in pending:
        deployer.wait(p)
    return given_eth


def _write_yaml(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _common(s: DemoSettings, keystore: Path | None, data_dir: Path) -> dict:
    return {"node_rpc": s.rpc, "ipfs_api": s.ipfs, "deployments": str(s.deployments),
            "keystore": None if keystore is None else str(keystore),
            "password_env": PASSWORD_ENV, "metrics_port": 0, "data_dir": str(data_dir), "poll_interval_s": 0.5}


def _spawn(name: str, argv: list[str], log: Path) -> Proc:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, PASSWORD_ENV: DEMO_PASSWORD, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as fh:
        p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO_ROOT)
    return Proc(name, p, log)


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def register_syncer(syncer: ChainClient, deployer: ChainClient, s: DemoSettings) -> int:
    """Make the syncer account a candidate whose unlocked stake covers the run's bond (a devnet
    that served earlier demos may have it registered already). Returns its pool stake, atto-units,
    the syncer's part of the run's token accounting."""
    info = syncer.syncer_info()
    if not info.registered:
        syncer.register_syncer(_syncer_stake(deployer, s))
    else:  # top up to the minimum (the daemon would) and to an unlocked stake that covers the bond;
        # a leaving candidate (an earlier demo's unregisterSyncer) joins the draws again with a top-up
        leaving = 1 if syncer.syncer_weight()[0] == 0 else 0
        short = max(deployer.min_syncer_stake() - info.stake, s.syncer_bond - info.free, leaving)
        if short:
            deployer.wait(deployer.send("mint", syncer.address, short, contract="TenzroToken"))
            syncer.register_syncer(short)
    return syncer.syncer_info().stake


SYNCER_ROLES = ("syncer", "standin")  # the syncer candidates a demo registers (the second with `stand_in`)
Spawn = Callable[[str, list[str], Path], Proc]  # (role name, argv, log file) -> the started process


def launch_daemons(s: DemoSettings, task: str, keys: dict[str, Path], work: Path, watcher: bool = True, *,
                   spawn: Spawn = _spawn, role_config: dict[str, dict] | None = None) -> list[Proc]:
    """Start the syncer (and the stand-in, when ``keys`` has a ``standin`` key: `DemoSettings.stand_in`),
    the trainers and (``watcher``) a watcher as separate processes; returns them (syncers first,
    watcher last).

    ``spawn(name, argv, log)`` starts one (default: a child process here; `demo_hosts` starts each
    in its party's host); ``role_config[name]`` (names ``syncer``, ``standin``, ``trainer-<i>``, ``watcher``) adds
    or replaces keys of that daemon's config file, e.g. its own ``ipfs_api`` and ``ipfs_bootstrap``."""
    extra = role_config or {}
    procs = []
    for role in (r for r in SYNCER_ROLES if r in keys):  # the candidates: same options, each its own key and data
        cfg = _write_yaml(work / "config" / f"{role}.yaml", {
            **_common(s, keys[role], work / role), "task_id": task, **s.syncer_options, **extra.get(role, {})})
        procs.append(spawn(role, [sys.executable, "-m", "tenzro_operator.cli.syncer", "run", "--config", str(cfg)],
                           work / "logs" / f"{role}.log"))
    for i in range(s.trainers):
        cfg = _write_yaml(work / "config" / f"trainer-{i}.yaml", {
            **_common(s, keys[f"trainer-{i}"], work / f"trainer-{i}"), "task_id": task,
            "did": f"did:tenzro:machine:demo-trainer-{i}", "inner": {"batch_size": s.batch_size},
            "device": "cpu", "dtype": "fp32", "syncer_rpc_allow_private": True,  # a syncer endpoint on 127.0.0.1
            **extra.get(f"trainer-{i}", {})})
        procs.append(spawn(f"trainer-{i}", [sys.executable, "-m", "tenzro_operator.cli.trainer", "run", "--config",
                                            str(cfg)], work / "logs" / f"trainer-{i}.log"))
    if not watcher:
        return procs
    # a watcher beside them: replays each round as it lands (read-only: no key); exits at the seal
    watcher_cfg = _write_yaml(work / "config" / "watcher.yaml", {
        **_common(s, None, work / "watcher"), "task_id": task, **extra.get("watcher", {})})
    procs.append(spawn("watcher", [sys.executable, "-m", "tenzro_operator.cli.watcher", "run", "--config",
                                   str(watcher_cfg)], work / "logs" / "watcher.log"))
    return procs


RoundHook = Callable[[int, list[Proc]], None]


def check_alive(procs: list[Proc]) -> None:
    """Raise `DemoError` with the log tail of a daemon that exited with an error (one stopped on
    purpose, ``killed``, is not a failure)."""
    for p in procs:
        code = p.popen.poll()
        if code not in (None, 0) and not p.killed:
            raise DemoError(f"{p.name} exited with code {code}; its log ({p.log}) ends with:\n{_tail(p.log)}")


def wait_sealed(chain: ChainClient, task_id: bytes, procs: list[Proc], s: DemoSettings,
                on_round: RoundHook | None = None) -> float:
    """Poll the run until Sealed; fail early with the log tail of a daemon that died.

    `on_round(round, procs)` is called once when each round opens (tests use it to kill a
    daemon mid-run; a process stopped that way is no longer watched). An RPC that stops answering
    (`RpcUnavailable` after the client's retries) is waited out like the daemons wait it out, up to
    ``s.timeout_s`` in all, with a line when it goes and when it comes back. Returns seconds.

    Raises:
        DemoError: a daemon died, or the run was not sealed within ``s.timeout_s`` seconds (the
            RPC's last error named when it was not answering).
    """
    t0 = time.monotonic()
    last = None
    down: RpcUnavailable | None = None
    with console.status("waiting for the run to start") as status:
        while True:
            try:
                run = chain.get_run(task_id)
            except RpcUnavailable as exc:
                if down is None:
                    console.print(f"{time.monotonic() - t0:5.0f} s  the RPC is not answering ({exc}); still waiting")
                down, run = exc, None
            else:
                if down is not None:
                    console.print(f"{time.monotonic() - t0:5.0f} s  the RPC answers again")
                    down = None
                if run.status == RunStatus.SEALED:
                    return time.monotonic() - t0
                shown = (run.status, run.current_round)
                if shown != last:
                    last = shown
                    if on_round is not None and run.status == RunStatus.TRAINING:
                        on_round(run.current_round, procs)
                    line = (f"run {RunStatus(run.status).name}: round {min(run.current_round + 1, run.max_rounds)}"
                            f"/{run.max_rounds}, {run.enrolled_count}/{run.trainer_count} trainers enrolled")
                    status.update(line)
                    # a kept line per change too: the spinner alone shows nothing in a log or a pipe
                    console.print(f"{time.monotonic() - t0:5.0f} s  {line}")
            check_alive(procs)
            if time.monotonic() - t0 > s.timeout_s:
                raise DemoError(f"the run was not sealed within {s.timeout_s:.0f} s: {down}" if run is None else
                                f"the run was not sealed within {s.timeout_s:.0f} s (status {RunStatus(run.status).name}, "
                                f"round {run.current_round}); logs in {procs[0].log.parent}")
            time.sleep(1.0)


def stop(procs: list[Proc], timeout_s: float = 30.0) -> None:
    for p in procs:
        if p.popen.poll() is None:
            p.popen.terminate()
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.popen.kill()


def sealed_model_zero_shot(runtime: TaskRuntime, state: dict) -> dict:
    """The sealed model's zero-shot quality (:func:`tenzro_trainer.zeroshot.zero_shot_score`: series no
    training collection holds, relative to SeasonalNaive) for the summary, with the reference
    recipe's recorded figure on the same set under ``reference`` (None when not recorded)."""
    model = build_model(runtime.model_cfg)
    model.load_state_dict(state)
    return {**zero_shot_score(model), "reference": reference_figures()}


def plot_loss(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([r["round"] for r in rows], [r["heldout_loss"] for r in rows], marker="o", label="held-out loss (normalized MSE)")
    ax.set_xlabel("rounds finalized")
    ax.set_ylabel("held-out loss")
    ax2 = ax.twinx()
    ax2.plot([r["round"] for r in rows], [r["mase"] for r in rows], marker="s", color="tab:orange", label="MASE (geo. mean)")
    ax2.set_ylabel("MASE")
    ax.set_title(title, fontsize=9)
    handles = ax.get_lines() + ax2.get_lines()
    ax.legend(handles, [h.get_label() for h in handles], loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def spec_draft(s: DemoSettings, task: str, sponsor_address: str) -> SpecDraft:
    """The demo's spec draft: its scale and its defence (rule, norm screen, and scoring with
    ``score_min: 0`` unless ``scoring`` is off)."""
    return SpecDraft(
        task_id=task, sponsor_address=sponsor_address, model_metadata=dict(s.model_metadata),
        fragment_count=s.fragments, trainer_count=s.trainers,
        quorum=s.quorum, inner_steps=s.inner_steps, max_rounds=s.rounds, grace_window_ms=s.grace_window_ms,
        aggregation=s.aggregation, reward_pool=s.reward_pool, min_stake=s.stake,
        syncer_fee_bps=s.syncer_fee_bps, syncer_bond=s.syncer_bond,
        enrollment_window_ms=s.enrollment_window_ms, challenge_window_ms=s.challenge_window_ms,
        norm_multiple=s.norm_multiple, score_min=default_score_min(s.scoring),
        overlap_steps=s.overlap_steps, compression=s.compression)


@dataclass
class PostedRun:
    """A task posted by `post_demo_task`, its daemons not started yet."""

    task: str  # the spec's task id (text)
    task_id: bytes  # bytes32 on-chain
    spec: object  # tenzro_operator.spec.TaskSpec
    df: pd.DataFrame  # the pinned dataset
    work: Path  # keys, configs, daemon data and logs
    keys: dict[str, Path]  # role -> keystore
    addresses: dict[str, str]  # role -> address
    posted_block: int
    syncer_stake: int  # atto-units, the syncer candidates' pool stake before the run (`SYNCER_ROLES`)
    sponsor: ChainClient
    ipfs: IpfsClient


def post_demo_task(s: DemoSettings) -> PostedRun:
    """Steps 1-3: check the options and the devnet, make and fund the accounts, register the
    syncer, pin the dataset, weights and spec, escrow the pool and post the task."""
    check_settings(s)
    deployer, ipfs = _preflight(s)
    task = s.task_id or f"demo-{int(time.time())}"
    work = s.workdir or REPO_ROOT / ".devnet" / "demo" / task
    console.rule(f"[bold]tenzro-train demo[/]: task {task}")
    roles = {"sponsor": 1, "syncer": 2, **{f"trainer-{i}": 3 + i for i in range(s.trainers)},
             **({"standin": 3 + s.trainers} if s.stand_in else {})}
    keys = create_devnet_keystores(work / "keys", roles, DEMO_PASSWORD)
    addresses = {r: anvil_account(i).address for r, i in roles.items()}
    given_eth = _fund(deployer, addresses, s)
    console.print(f"funded sponsor, syncer and {s.trainers} trainers with TNZO from the deployer"
                  + (f"; {len(given_eth)} account(s) beyond anvil's funded ones got "
                     f"{s.eth_per_account / ETH:g} ETH for gas" if given_eth else ""))

    syncers = [r for r in SYNCER_ROLES if r in roles]
    syncer_stake = sum(register_syncer(_client(s, anvil_account(roles[r])), deployer, s) for r in syncers)
    who = "syncer candidate" if len(syncers) == 1 else f"{len(syncers)} syncer candidates ({', '.join(syncers)})"
    console.print(f"{who} with {syncer_stake / TOKEN:g} TNZO of pool stake{' in all' * (len(syncers) > 1)} (the "
                  f"run's bond: {s.syncer_bond / TOKEN:g} TNZO)")

    df = default_collection()
    sponsor = _client(s, anvil_account(roles["sponsor"]))
    spec = build_spec(ipfs, spec_draft(s, task, sponsor.address), df)
    posted_block = sponsor.block_number()
    task_id, spec_cid = post_task(sponsor, ipfs, spec)
    console.print(f"posted {task} (0x{task_id.hex()[:16]}…): {df.unique_id.nunique()} series, dataset "
                  f"{spec.dataset_ref}, spec {spec_cid}, pool {s.reward_pool / TOKEN:g} TNZO escrowed")
    console.print(f"aggregation {spec.aggregation_name} {spec.aggregation_params or ''}, norm screen "
                  f"x{s.norm_multiple:g}, loss-improvement scoring "
                  + ("on (score_min 0)" if spec.require_protocol().score_min is not None else "off"))
    return PostedRun(task, task_id, spec, df, work, keys, addresses, posted_block, syncer_stake, sponsor, ipfs)


def run_demo(s: DemoSettings, on_round: RoundHook | None = None) -> dict:
    """Run the whole job; returns the summary dict (also written to `<out>/summary.json`).

    Raises:
        DemoError: bad options (before anything starts), a daemon died, the run did not seal in
            ``timeout_s`` seconds, the receipt did not verify or the tokens do not balance.
    """
    t_start = time.monotonic()
    p = post_demo_task(s)
    procs = launch_daemons(s, p.task, p.keys, p.work)
    console.print(f"started 1 syncer and {s.trainers} trainer processes (logs in {p.work / 'logs'})")
    try:
        train_s = wait_sealed(p.sponsor, p.task_id, procs, s, on_round)
        wait_settled(procs)
        claim_for_the_stopped(p.sponsor, p.task_id, procs, p.addresses)
    finally:
        stop(procs)
    console.print(f"run sealed after {train_s:.0f} s")
    return summarize(s, p.sponsor, p.ipfs, p.spec, p.df, p.task, p.task_id, p.posted_block, p.addresses, t_start,
                     p.syncer_stake, watcher_rounds(p.work / "watcher"))


def wait_settled(procs: list[Proc], timeout_s: float = 120.0) -> None:
    """After the seal, let every daemon finish its part and exit by itself: the trainers claim
    their rewards, the syncer its fee, the watcher checks the last round. One still
    running after ``timeout_s`` is named (the summary's checks then say what is missing)."""
    deadline = time.monotonic() + timeout_s
    for p in procs:
        if p.killed:
            continue
        try:
            p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            console.print(f"[yellow]{p.name} had not finished {timeout_s:.0f} s after the seal[/] (log: {p.log})")
    check_alive(procs)


def claim_for_the_stopped(chain: ChainClient, task_id: bytes, procs: list[Proc], addresses: dict[str, str]) -> None:
    """Claim the reward of every trainer whose process was stopped on purpose (`Proc.killed`) and
    that has credits from the rounds it delivered before: anyone may claim for a trainer, the
    reward goes to the trainer (``claim`` with its credits proof, `tenzro_operator.views.reward`). The
    summary's check that every trainer with credits claimed then holds for the living daemons,
    which must claim by themselves."""
    from tenzro_operator.views.reward import reward_report

    for p in procs:
        if not (p.killed and p.name in addresses):
            continue
        rep = reward_report(chain, task_id, addresses[p.name])
        if rep.paid_credits and not rep.claimed:
            chain.claim_reward(task_id, rep.index, rep.credit_word, rep.proof)
            console.print(f"claimed {p.name}'s reward for it (its process was stopped): {rep.reward / TOKEN:g} TNZO "
                          f"for {rep.credits} credits")


def watcher_rounds(data_dir: Path) -> dict:
    """What the demo's watcher saw (its ``watcher-rounds.jsonl``): rounds checked, mismatches, and
    its lag behind the chain, seconds between a round's commit and the end of its check."""
    path = data_dir / "watcher-rounds.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    lags = sorted(r["lag_s"] for r in rows)
    return {"rounds_checked": len(rows), "mismatches": sum(1 for r in rows if not r["ok"]),
            "lag_s_median": lags[len(lags) // 2] if lags else None, "lag_s_max": lags[-1] if lags else None,
            "rounds": rows}


def summarize(s: DemoSettings, chain: ChainClient, ipfs: IpfsClient, spec, df: pd.DataFrame, task: str,
              task_id: bytes, from_block: int, addresses: dict[str, str], t_start: float,
              syncer_stake_in: int, watcher: dict) -> dict:
    receipt = chain.get_receipt(task_id)
    report = replay.verify_receipt(chain, ipfs, task_id)  # also asks the verifier at 0x…1008
    on_chain_ok = report.verifier_ok
    console.print(f"receipt: run root 0x{receipt.run_root.hex()[:16]}…, verifier at 0x…1008 says "
                  f"{'[green]valid[/]' if on_chain_ok else '[red]INVALID[/]'}; replay from IPFS: "
                  f"{'[green]matches[/]' if report.ok else '[red]MISMATCH[/]'}")

    trainer0 = addresses["trainer-0"]
    before = chain.token_balance(trainer0)
    # bound to this run: its sponsor and spec hash, and at least one full model's worth of accepted
    # work per round (credits weigh each accepted fragment by its parameter count)
    min_credits = spec.architecture.param_count * spec.max_rounds
    eid = escrow.deposit(chain, trainer0, s.escrow_bonus, task_id, expiry_s=3600, sponsor=spec.sponsor_address,
                         spec_hash=spec_hash(spec), min_credits=min_credits)
    escrow.release(chain, eid, task_id)
    paid = chain.token_balance(trainer0) - before
    console.print(f"RewardEscrow #{eid} (bound to sponsor {spec.sponsor_address[:10]}…, spec hash "
                  f"0x{spec_hash(spec).hex()[:12]}…, >= {min_credits} credits) released {paid / TOKEN:g} TNZO to "
                  f"trainer-0 against the receipt")

    runtime = TaskRuntime.from_spec(spec)
    ev = HeldoutEvaluator(runtime.model_cfg, runtime.split(df))  # df: the pinned dataset (same hash)
    curve = []
    for r, state in enumerate(round_weights(chain, ipfs, runtime, task_id, spec, from_block)):
        res = ev(state)
        curve.append({"round": r, "heldout_loss": res.loss, "mase": res.mase, "smape": res.smape})
    zero_shot = sealed_model_zero_shot(runtime, state)

    run = chain.get_run(task_id)
    trainers = trainer_rows(chain, task_id, from_block, {a.lower(): r for r, a in addresses.items()})
    # payloads that scoring (or a check) left out, from the committed transcripts
    view = run_view.build(chain, task_id, ipfs=ipfs)
    for row in trainers:
        row["scored_out"] = view.trainer(row["address"]).scored_out
    unclaimed = unclaimed_credits(chain, task_id, from_block)
    acct = accounting(chain, task_id, from_block, addresses["sponsor"],
                      [addresses[r] for r in SYNCER_ROLES if r in addresses], syncer_stake_in)
    summary = {"task": task, "task_id": "0x" + task_id.hex(), "aggregation": spec.aggregation_name,
               "aggregation_params": spec.aggregation_params, "score_min": spec.require_protocol().score_min,
               "posted_block": from_block, "rounds": run.max_rounds,
               "trainers": trainers, "syncer": {"address": addresses["syncer"], "elected": run.syncer,
                                                "fees_tnzo": run.syncer_fees_accrued / TOKEN,
                                                "fee_unclaimed_tnzo": chain.syncer_fee_of(task_id, run.syncer) / TOKEN},
               "accounting": {k: (v if isinstance(v, bool) else str(v)) for k, v in acct.items()},
               "heldout": curve, "zero_shot": zero_shot, "watcher": watcher,
               "receipt": {"run_root": "0x" + receipt.run_root.hex(), "verifier_ok": on_chain_ok, "replay_ok": report.ok},
               "escrow_released_tnzo": paid / TOKEN, "wall_s": time.monotonic() - t_start, "settings": {
                   k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(s).items()}}
    _print_summary(summary)
    s.out.mkdir(parents=True, exist_ok=True)
    (s.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    png = plot_loss(curve, s.out / "loss-curve.png", f"{task}: {s.trainers} trainers, K={s.quorum}, "
                                                      f"F={s.fragments}, H={s.inner_steps}")
    console.print(f"summary: {s.out / 'summary.json'}; loss curve: {png}; total {summary['wall_s']:.0f} s")
    if not (on_chain_ok and report.ok):
        raise DemoError("the receipt did not verify (see above)")
    if watcher["mismatches"]:
        raise DemoError(f"the watcher found {watcher['mismatches']} round(s) that differ from their replay "
                        f"(an honest run has none): see its log")
    if not acct["conserved"]:
        raise DemoError(f"the run's tokens do not balance: in {acct['in']} atto, out {acct['out']} atto")
    if unclaimed:
        raise DemoError(f"{len(unclaimed)} trainer(s) with credits did not claim their reward: {', '.join(unclaimed)} "
                        f"(see their logs)")
    return summary


def _print_summary(summary: dict) -> None:
    t = Table(title="trainers (rewards claimed with credit proofs)")
    for col in ("trainer", "accepted", "scored out", "reward (TNZO)", "slashed (TNZO)", "withdrawable (TNZO)"):
        t.add_column(col, justify="right" if col != "trainer" else "left")
    for row in sorted(summary["trainers"], key=lambda r: r["trainer"]):
        out = row.get("scored_out")
        t.add_row(row["trainer"], str(row["accepted"]), "-" if out is None else str(out), f"{row['reward_tnzo']:.4f}",
                  f"{row['slashed_tnzo']:.4f}", f"{row['withdrawable_tnzo']:.4f}")
    console.print(t)
    h = Table(title="held-out metrics of the global weights")
    for col in ("round", "loss", "MASE", "sMAPE"):
        h.add_column(col, justify="right")
    for row in summary["heldout"]:
        h.add_row(str(row["round"]), f"{row['heldout_loss']:.4f}", f"{row['mase']:.3f}", f"{row['smape']:.3f}")
    console.print(h)
    w = summary["watcher"]
    console.print(f"watcher: {w['rounds_checked']}/{summary['rounds']} rounds replayed as they landed, "
                  f"{w['mismatches']} mismatches" + (f"; lag behind the commit median {w['lag_s_median']:.0f} s, "
                                                      f"max {w['lag_s_max']:.0f} s" if w["rounds_checked"] else ""))
    z = summary["zero_shot"]
    console.print(f"zero-shot relative MASE of the sealed model: {z['relative_mase']:.3f} (WQL {z['relative_wql']:.3f}; "
                  f"{z['series']} series no training run has seen, {z['windows']} windows, vs SeasonalNaive = 1; "
                  f"beats it on {z['beats_seasonal_naive']}/{z['series']} series)")
    ref = z.get("reference")
    if ref:
        scored = (f"{ref['rounds']} DiLoCo rounds on the training mixture, mean of {ref['models']} seeds"
                  if ref["members"] == 1 else f"mean of {ref['models']} forecast ensembles of {ref['members']} "
                  f"runs of {ref['rounds']} DiLoCo rounds on training mixtures") + (
                      ", forecast as `tenzro forecast` does" if ref["flip"] and ref["infer_positive"] else "")
        console.print(f"reference: the {ref['label']} ({scored}, {ref['windows_per_series']} windows per series; "
                      f"trainer/benchmarks/results/zero_shot.md) scores {ref['relative_mase']:.3f} on the same series; "
                      + ", ".join(f"{k} {v:.3f}" for k, v in ref["baselines"].items()))
    a = {k: (v if isinstance(v, bool) else int(v)) for k, v in summary["accounting"].items()}
    t = Table(title="run token accounting (TNZO, exact in atto-units)")
    for col in ("in", "TNZO", "out", "TNZO "):
        t.add_column(col, justify="left" if col in ("in", "out") else "right")
    ins = [("reward pool", a["pool"]), ("trainer stakes", a["stakes"]), ("syncer stake", a["syncer_stake_in"])]
    outs = [("rewards", a["rewards"]), ("stake refunds", a["refunds"]), ("syncer fees", a["syncer_fees"]),
            ("dust to sponsor", a["dust"]), ("burned (slashes)", a["burned"]), ("provers' bounties", a["bounties"]),
            ("syncer stake still registered", a["syncer_stake_out"])]
    for i in range(max(len(ins), len(outs))):
        left = ins[i] if i < len(ins) else ("", None)
        right = outs[i] if i < len(outs) else ("", None)
        t.add_row(left[0], "" if left[1] is None else format_tokens(left[1], symbol=""), right[0],
                  "" if right[1] is None else format_tokens(right[1], symbol=""))
    t.add_row("[bold]total in[/]", format_tokens(a["in"], symbol=""), "[bold]total out[/]",
              format_tokens(a["out"], symbol=""))
    console.print(t)
    console.print(f"conservation: in {a['in']} atto {'==' if a['conserved'] else '!='} out {a['out']} atto: "
                  + ("[green]balanced[/]" if a["conserved"] else "[red]NOT BALANCED[/]"))


@click.command()
@click.option("--rpc", default=DemoSettings.rpc, show_default=True)
@click.option("--ipfs", default=DemoSettings.ipfs, show_default=True)
@click.option("--deployments", type=click.Path(path_type=Path), default=DemoSettings.deployments, show_default=True)
@click.option("--trainers", default=DemoSettings.trainers, show_default=True, help="M")
@click.option("--quorum", default=DemoSettings.quorum, show_default=True, help="K")
@click.option("--fragments", default=DemoSettings.fragments, show_default=True, help="F")
@click.option("--rounds", default=DemoSettings.rounds, show_default=True)
@click.option("--inner-steps", default=DemoSettings.inner_steps, show_default=True, help="H")
@click.option("--timeout-s", default=DemoSettings.timeout_s, show_default=True,
              help="Seconds the run may take to seal.")
@click.option("--out", type=click.Path(path_type=Path), default=DemoSettings.out, show_default=True)
def main(**kw) -> None:
    """Run the demo on the devnet (start it with `make devnet-up` and deploy with `make deploy`)."""
    try:
        run_demo(DemoSettings(**kw))
    except TenzroError as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
