"""``make demo-adversarial``: the demo's honest set-up on the root flow (contracts/PROTOCOL.md §5)
plus six cheats, each caught, and the run sealed anyway with every honest party whole.

Separate processes on the devnet, each with its own key and config (`tenzro_operator.demo`'s
machinery): the sponsor posts a root-flow task with loss-improvement scoring (``score_min: 0``);
syncer A, whose pool stake is exactly the run's bond, lies twice; stand-in syncer B; four honest
trainers; a copycat trainer; a sign-flipping trainer; a trainer that withholds its forced
payloads; a trainer that loops availability challenges; a watcher with a key. The cheats and
what catches them:

1. **false invalid report** (syncer A, round 0): A calls ``proveInvalid`` against an honest
   trainer's valid off-chain submission; the registry refuses it (there is no on-chain slot to
   slash, and no evidence): caught when nobody is slashed and the attempt was made (A's log);
2. **wrong aggregate** (syncer A, round 1, fragment 0, one weight +1.0): the watcher recomputes
   the round from its committed inputs and sends ``proveAggregate``: A loses its bond (10 % to the
   watcher), the run goes back to round 1, B is elected and finishes: caught when the registry
   upheld the proof against A;
3. **copycat** (a trainer that re-signs every honest reveal as its own): its commitments come
   after the commit phase, so no syncer credits it: caught when its credits are 0;
4. **sign flip** (a trainer that sends -delta): scored out by the syncer (its payload makes the
   loss worse): caught when its credits are 0;
5. **withheld forced payload** (issue #23 attack 5: a trainer forces every payload on-chain, puts
   the bytes on no IPFS node and answers no challenge, so that the syncer must either aggregate a
   payload it cannot read or leave out a live submission): the syncer demands each one whole
   (``challengeAvailability``, chunk 2^32 - 1), the challenge lapses, ``expireAvailability``
   slashes the trainer (reason Unavailable) and the submission is out of the round: caught when
   its credits are 0, it was slashed for unavailability and no syncer was convicted of leaving it
   out;
6. **availability loop** (issue #23 attack 1: a trainer forces its payloads, publicly fetchable,
   challenges chunk after chunk of its own submissions and answers each at the last seconds, to hold
   every round's commit back for ever and get each syncer replaced): the registry refuses the loop
   at its bounds (three chunk challenges a submission, none after the round's window): caught when
   the registry refused it, every one of its challenges was answered (its bonds came back to
   itself: the loop earned nothing) and no syncer was replaced for it.

The summary table shows per party the stake it put in, its reward, what it lost to slashes, its
bounty; no syncer but a lying one may lose its bond; the run's tokens must balance exactly (in:
pool, stakes, the syncers' pool stakes; out: claims, refunds, fees, the rounding dust left to the
sponsor, burned, bounty, the syncers' stakes left), every honest trainer must get its stake back and a reward, and the receipt must verify by
replay. It ends with ``caught: <X> of <Y>`` and exits 1 unless X = Y and everything else holds.

``cheats`` (``--cheat``, repeatable) runs a subset of the six (default: all): syncer A keeps only
the selected faults (it is the elected syncer either way), the cheating trainers run only when
selected (M = 4 honest + the selected cheating trainers), stand-in syncer B only with the wrong
aggregate (nothing else rewinds a round); the watcher always watches. ``caught`` then covers the
selected cheats, and every other check holds as for all six.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import click
from rich.table import Table

from tenzro_operator import replay
from tenzro_operator.chain import ChunkOpening, RunStatus, SlashReason
from tenzro_operator.credits import paid_credits
from tenzro_operator.demo import (
    DEMO_PASSWORD,
    REPO_ROOT,
    DemoError,
    DemoSettings,
    _client,
    _common,
    _fund,
    _preflight,
    _spawn,
    _write_yaml,
    check_alive,
    console,
    stop,
    wait_sealed,
)
from tenzro_operator.demo_results import accounting
from tenzro_operator.errors import ChainRevert, TenzroError
from tenzro_operator.keys import anvil_account, create_devnet_keystores
from tenzro_operator.roles.sponsor import TOKEN, SpecDraft, build_spec, post_task
from tenzro_operator.root_flow import committed_rounds, cumulative_credits
from tenzro_operator.units import format_tokens
from tenzro_trainer.data.collection import default_collection

__all__ = ["ADVERSARIAL", "CHEATS", "run_adversarial"]

HONEST = 4  # honest trainers
BOND = 150 * TOKEN  # the run's syncer bond at least (`_bond`): whole TNZO, above the devnet's minimum syncer stake
ADVERSARIAL = DemoSettings(trainers=HONEST + 2, quorum=3, fragments=4, rounds=4, grace_window_ms=40_000,
                           syncer_bond=BOND, timeout_s=600.0, out=REPO_ROOT / "out" / "demo-adversarial")
CHALLENGE_WINDOW_MS = 30_000  # a round stays provable this long after its commit; the seal waits it out
# each cheat: syncer A's fault flag (the false report names the honest trainer at index 0), or the
# cheating trainer's config (its fault and how it delivers)
SYNCER_FAULTS = {"false invalid report": {"false_invalid_report": [0, 0, 0]},
                 "wrong aggregate": {"wrong_aggregate_at": [1, 0]}}
TRAINER_FAULTS = {"copycat": {"fault": {"kind": "copycat"}}, "sign flip": {"fault": {"kind": "sign_flip"}},
                  "withheld forced payload": {"fault": {"kind": "withhold"}, "force_onchain": True,
                                              "publish_pubsub": False},
                  "availability loop": {"fault": {"kind": "challenge_loop"}, "force_onchain": True,
                                        "publish_pubsub": False}}
LOOP_BONDS = 12  # challenge bonds the looping trainer holds (at most 3 a submission; its answers credit them back)
CHEATS = (*SYNCER_FAULTS, *TRAINER_FAULTS)


def _roles(s: DemoSettings) -> dict[str, int]:
    """Anvil account indices; the syncers' and the watcher's are fresh per run (a syncer slashed or
    left registered by an earlier run never takes part)."""
    k = 100 + 3 * (int(time.time()) % 100_000)
    return {"sponsor": 1, **{f"trainer-{i}": 3 + i for i in range(s.trainers)},
            "syncer-a": k, "syncer-b": k + 1, "watcher": k + 2}


def _trainer_kinds(cheats: Collection[str]) -> dict[str, str]:
    """Trainer role -> kind: the honest trainers, then the selected cheating trainers in order."""
    kinds = [*["honest"] * HONEST, *(c for c in TRAINER_FAULTS if c in cheats)]
    return {f"trainer-{i}": kind for i, kind in enumerate(kinds)}


def run_adversarial(s: DemoSettings = ADVERSARIAL, cheats: Collection[str] = CHEATS) -> dict:
    """Run the scenario (see the module docstring) with the selected ``cheats`` (names of `CHEATS`;
    ``s.trainers`` becomes 4 + the cheating trainers); returns the summary. Raises `DemoError` when
    a cheat is not caught, an honest party lost anything, the tokens do not balance or the receipt
    does not verify."""
    t_start = time.monotonic()
    if unknown := set(cheats) - set(CHEATS):
        raise DemoError(f"unknown cheats {sorted(unknown)}; known: {', '.join(CHEATS)}")
    cheats = [c for c in CHEATS if c in cheats]
    kinds = _trainer_kinds(cheats)
    syncers = ["syncer-a", "syncer-b"] if "wrong aggregate" in cheats else ["syncer-a"]
    s = replace(s, trainers=len(kinds))
    deployer, ipfs = _preflight(s)
    task = s.task_id or f"adversarial-{int(time.time())}"
    work = s.workdir or REPO_ROOT / ".devnet" / "demo" / task
    console.rule(f"[bold]tenzro-train adversarial demo[/]: task {task}")
    roles = _roles(s)
    keys = create_devnet_keystores(work / "keys", roles, DEMO_PASSWORD)
    addr = {r: anvil_account(i).address for r, i in roles.items()}
    _fund(deployer, {r: a for r, a in addr.items() if r not in ("syncer-a", "syncer-b", "watcher")}, s)
    s = replace(s, syncer_bond=_bond(deployer))
    for r in syncers:
        _fund(deployer, {"syncer": addr[r]}, s)
    _fund(deployer, {"watcher": addr["watcher"]}, replace(s, stake=0))
    a = _client(s, anvil_account(roles["syncer-a"]))
    a.register_syncer(s.syncer_bond)  # exactly one bond: once slashed it can never be drawn again
    spec_df = default_collection()
    sponsor = _client(s, anvil_account(roles["sponsor"]))
    spec = build_spec(ipfs, SpecDraft(
        task_id=task, sponsor_address=sponsor.address, model_metadata=dict(s.model_metadata),
        fragment_count=s.fragments, trainer_count=s.trainers, quorum=s.quorum, inner_steps=s.inner_steps,
        max_rounds=s.rounds, grace_window_ms=s.grace_window_ms, reward_pool=s.reward_pool, min_stake=s.stake,
        syncer_fee_bps=s.syncer_fee_bps, syncer_bond=s.syncer_bond, challenge_window_ms=CHALLENGE_WINDOW_MS,
        enrollment_window_ms=s.enrollment_window_ms, score_min=0.0), spec_df)
    posted_block = sponsor.block_number()
    task_id, _ = post_task(sponsor, ipfs, spec)
    console.print(f"posted {task} on the root flow with scoring (score_min 0): M={s.trainers}, K={s.quorum}, "
                  f"F={s.fragments}, {s.rounds} rounds, syncer bond {s.syncer_bond / TOKEN:g} TNZO")

    def spawn(name: str, module: str, cfg: dict) -> object:
        path = _write_yaml(work / "config" / f"{name}.yaml", cfg)
        return _spawn(name, [sys.executable, "-m", module, "run", "--config", str(path)], work / "logs" / f"{name}.log")

    syncer = lambda r, **kw: {**_common(s, keys[r], work / r), "task_id": task, "evaluate": False,  # noqa: E731
                              "straggler_wait_s": 15.0, "register_stake": str(s.syncer_bond // TOKEN), **kw}
    trainer = lambda i, **kw: {**_common(s, keys[f"trainer-{i}"], work / f"trainer-{i}"), "task_id": task,  # noqa: E731
                               "did": f"did:tenzro:machine:adversarial-{i}", "inner": {"batch_size": s.batch_size},
                               **kw}
    a_fault = {k: v for c in cheats for k, v in SYNCER_FAULTS.get(c, {}).items()}
    procs = [spawn("syncer-a", "tenzro_operator.cli.syncer", syncer("syncer-a", fault=a_fault or None))]
    procs += [spawn(f"trainer-{i}", "tenzro_operator.cli.trainer", trainer(i)) for i in range(HONEST)]
    procs.append(spawn("watcher", "tenzro_operator.cli.watcher",
                       {**_common(s, keys["watcher"], work / "watcher"), "task_id": task}))
    try:
        # the honest trainers hold indices 0..3 (the false report names index 0), then the cheaters
        _wait(lambda: sponsor.get_run(task_id).enrolled_count >= HONEST, 300, "the honest trainers to enroll", procs)
        for i in range(HONEST, s.trainers):
            if kinds[f"trainer-{i}"] == "availability loop":  # its own challenges' bonds
                deployer.wait(deployer.send("mint", addr[f"trainer-{i}"], LOOP_BONDS * s.syncer_bond // 10,
                                            contract="TenzroToken"))
            procs.append(spawn(f"trainer-{i}", "tenzro_operator.cli.trainer",
                               trainer(i, **TRAINER_FAULTS[kinds[f"trainer-{i}"]])))
        _wait(lambda: sponsor.get_run(task_id).syncer == addr["syncer-a"], 300, "syncer A to be elected", procs)
        if "syncer-b" in syncers:
            procs.append(spawn("syncer-b", "tenzro_operator.cli.syncer", syncer("syncer-b")))
        a_cheats = ", ".join(c for c in cheats if c in SYNCER_FAULTS) or "none"
        cheaters = "".join(f", {kinds[f'trainer-{i}']}" for i in range(HONEST, s.trainers))
        console.print(f"started syncer A (cheats: {a_cheats}), 4 honest trainers{cheaters}, a watcher with a key"
                      f"{', then stand-in syncer B' * (len(syncers) > 1)} (logs in {work / 'logs'})")
        train_s = wait_sealed(sponsor, task_id, procs, s)
        watcher = next(p for p in procs if p.name == "watcher")
        try:
            watcher.popen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            console.print(f"[yellow]the watcher had not finished 120 s after the seal[/] (log: {watcher.log})")
        _wait(lambda: _claims(sponsor, task_id, posted_block) >= HONEST, 120, "the honest trainers' claims", procs)
    finally:
        stop(procs)
    console.print(f"run sealed after {train_s:.0f} s")
    summary = _summarize(s, cheats, syncers, sponsor, ipfs, task_id, posted_block, addr, work, t_start)
    for r in syncers:  # leave the pool (best effort): this run's syncers are drawn in no later election
        try:
            _client(s, anvil_account(roles[r])).unregister_syncer()
        except ChainRevert:
            pass
    return summary


def _bond(chain) -> int:
    """The run's syncer bond (atto-units, whole TNZO): `BOND`, or more than any candidate already in
    the pool has free (a devnet that served earlier runs), so that only A and B can be drawn."""
    free = [chain.syncer_info(c).free for c in chain.syncer_candidates()]
    return max([BOND] + [(f // TOKEN + 1) * TOKEN for f in free])


def _wait(cond, timeout_s: float, what: str, procs) -> None:
    t0 = time.monotonic()
    while not cond():
        check_alive(procs)
        if time.monotonic() - t0 > timeout_s:
            raise DemoError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(1.0)


def _events(chain, task_id: bytes, from_block: int, name: str) -> list:
    return chain.get_logs(from_block, chain.block_number(), [name], task_id=task_id)


def _claims(chain, task_id: bytes, from_block: int) -> int:
    return len(_events(chain, task_id, from_block, "RewardClaimed"))


def _summarize(s: DemoSettings, cheats: list[str], syncers: list[str], chain, ipfs, task_id: bytes, from_block: int,
               addr: dict[str, str], work: Path, t_start: float) -> dict:
    run = chain.get_run(task_id)
    if run.status != RunStatus.SEALED:
        raise DemoError(f"the run is {run.status.name}, not sealed")
    trainers = [t.lower() for t in chain.trainers_of(task_id)]
    role_of = {v.lower(): k for k, v in addr.items()}
    kinds = _trainer_kinds(cheats)
    credits = cumulative_credits(committed_rounds(chain, task_id, from_block, run.max_rounds), run.fragment_sizes,
                                 len(trainers))
    ev = functools.cache(lambda name: _events(chain, task_id, from_block, name))  # the run is over: read once
    claims = {e["args"]["trainer"].lower(): int(e["args"]["reward"]) for e in ev("RewardClaimed")}
    refunds = {e["args"]["account"].lower(): int(e["args"]["stakeRefund"]) for e in ev("PayoutCredited")}
    proofs = ev("RoundProvenWrong")
    slashed = {e["args"]["syncer"].lower(): int(e["args"]["slashed"]) for e in proofs}
    bounty: dict[str, int] = {}  # per prover: of a wrong round, or of a trainer's slash (the expiry's challenger)
    for e in proofs + ev("InvalidProven"):
        bounty[e["args"]["prover"].lower()] = bounty.get(e["args"]["prover"].lower(), 0) + int(e["args"]["bounty"])
    claimable = int(ev("RootRunSealed")[0]["args"]["claimable"])
    a_log = (work / "logs" / "syncer-a.log").read_text(errors="replace")
    credits_of = {kinds.get(role_of.get(t, ""), "?"): paid_credits(credits[i])  # cheaters: one each
                  for i, t in enumerate(trainers)}
    address_of = {kinds.get(role_of.get(t, ""), "?"): t for t in trainers}
    of = lambda name, kind: [e for e in ev(name) if e["args"]["trainer"].lower() == address_of.get(kind)]  # noqa: E731
    at = lambda e: (int(e["args"]["round"]), int(e["args"]["fragment"]))  # noqa: E731
    demanded = {at(e) for e in of("AvailabilityChallenged", "withheld forced payload")
                if int(e["args"]["chunkIndex"]) == ChunkOpening.WHOLE_PAYLOAD}
    lapsed = {at(e) for e in of("TrainerSlashed", "withheld forced payload")
              if int(e["args"]["reason"]) == SlashReason.UNAVAILABLE}
    honest = {t for t in trainers if kinds.get(role_of.get(t, ""), "") == "honest"}
    caught = {
        "false invalid report": "FAULT INJECTION: reporting trainer" in a_log
        and not any(e["args"]["trainer"].lower() in honest for e in ev("InvalidProven") + ev("TrainerSlashed")),
        "wrong aggregate": [e["args"]["syncer"].lower() for e in proofs] == [addr["syncer-a"].lower()],
        **{c: credits_of.get(c) == 0 for c in TRAINER_FAULTS},  # the looper's, below: it trains honestly
    }
    # and it was demanded whole and slashed for each payload it withheld (no syncer convicted: below)
    caught["withheld forced payload"] &= bool(demanded) and demanded <= lapsed
    # the looper: every challenge of its submissions its own and answered, the registry's refusal
    # logged, and no syncer elected but A (and B after A's conviction)
    looper = address_of.get("availability loop")
    loop_log = work / "logs" / f"{role_of.get(looper, '-')}.log"
    loops = of("AvailabilityChallenged", "availability loop")
    caught["availability loop"] = (
        bool(loops) and all(e["args"]["challenger"].lower() == looper for e in loops)
        and len(of("AvailabilityAnswered", "availability loop")) == len(loops)
        and len(ev("SyncerElected")) == len(syncers)
        and loop_log.exists() and "the availability loop on round" in loop_log.read_text(errors="replace"))
    caught = {c: caught[c] for c in cheats}
    # per party: stake in, reward, slashed, bounty (atto-units)
    rows = [("sponsor", "sponsor", s.reward_pool, claimable - sum(claims.values()), 0, 0)]
    fees_claimed = {}
    for e in ev("SyncerFeeClaimed"):
        fees_claimed[e["args"]["syncer"].lower()] = fees_claimed.get(e["args"]["syncer"].lower(), 0) + int(e["args"]["amount"])
    syncer_kind = {"syncer-a": "syncer (lies)" if set(cheats) & set(SYNCER_FAULTS) else "syncer",
                   "syncer-b": "syncer (stand-in)"}
    for r in syncers:  # fees earned: claimed, or still owed (A's for the round it committed honestly)
        a = addr[r].lower()
        fee = chain.syncer_fee_of(task_id, addr[r]) + fees_claimed.get(a, 0)
        rows.append((r, syncer_kind[r], s.syncer_bond, fee, slashed.get(a, 0), bounty.get(a, 0)))
    for i, t in enumerate(trainers):
        role = role_of.get(t, t)
        rows.append((role, kinds.get(role, "?"), s.stake, claims.get(t, 0), s.stake - refunds.get(t, 0), 0))
    rows.append(("watcher", "watcher", 0, 0, 0, bounty.get(addr["watcher"].lower(), 0)))
    table = Table(title="parties (TNZO, exact in atto-units)")
    for col in ("party", "kind", "stake in", "reward / fee", "slashed", "bounty"):
        table.add_column(col, justify="left" if col in ("party", "kind") else "right")
    for role, kind, stake_in, reward, lost, won in rows:
        table.add_row(role, kind, *(format_tokens(x, symbol="") for x in (stake_in, reward, lost, won)))
    console.print(table)

    acct = accounting(chain, task_id, from_block, addr["sponsor"], [addr[r] for r in syncers],
                      len(syncers) * s.syncer_bond)
    tokens_in, tokens_out, burned = acct["in"], acct["out"], acct["burned"]
    honest_whole = all(refunds.get(t, 0) == s.stake and claims.get(t, 0) > 0 for t in honest)
    liar = addr["syncer-a"].lower() if "wrong aggregate" in cheats else None
    honest_whole &= all(a == liar for a in slashed)  # an honest syncer keeps its bond
    report = replay.verify_receipt(chain, ipfs, task_id)
    console.print(f"tokens: in {tokens_in} atto {'==' if tokens_in == tokens_out else '!='} out {tokens_out} atto "
                  f"(claims, dust left to the sponsor, refunds, fees, burned {format_tokens(burned)}, bounty, the "
                  f"syncers' stakes left); honest parties whole: {honest_whole}; receipt verified by replay: "
                  f"{report.ok} (verifier 0x…1008: {report.verifier_ok})")
    for name, ok in caught.items():
        console.print(f"  {'[green]caught[/]' if ok else '[red]NOT caught[/]'}: {name}")
    n = sum(caught.values())
    summary = {"task_id": "0x" + task_id.hex(), "caught": caught, "tokens_in": str(tokens_in),
               "tokens_out": str(tokens_out), "honest_whole": honest_whole, "receipt_ok": report.ok,
               "wall_s": round(time.monotonic() - t_start, 1),
               "parties": [dict(zip(("party", "kind", "address", "stake_in", "reward", "slashed", "bounty"),
                                    (r[0], r[1], addr.get(r[0], r[0]), *map(str, r[2:])))) for r in rows]}
    s.out.mkdir(parents=True, exist_ok=True)
    (s.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(f"summary: {s.out / 'summary.json'}; total {summary['wall_s']:.0f} s")
    console.print(f"caught: {n} of {len(caught)}")
    if n != len(caught) or tokens_in != tokens_out or not honest_whole or not (report.ok and report.verifier_ok):
        raise DemoError("the adversarial scenario failed (see above)")
    return summary


@click.command()
@click.option("--rpc", default=DemoSettings.rpc, show_default=True)
@click.option("--ipfs", default=DemoSettings.ipfs, show_default=True)
@click.option("--deployments", type=click.Path(path_type=Path), default=DemoSettings.deployments, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=ADVERSARIAL.out, show_default=True)
@click.option("--cheat", "cheats", multiple=True, type=click.Choice(CHEATS),
              help="run only this cheat (repeatable; default: all six)")
def main(rpc: str, ipfs: str, deployments: Path, out: Path, cheats: tuple[str, ...]) -> None:
    """Run the adversarial scenario on the devnet (`make deploy` first)."""
    try:
        run_adversarial(replace(ADVERSARIAL, rpc=rpc, ipfs=ipfs, deployments=deployments.resolve(), out=out),
                        cheats or CHEATS)
    except TenzroError as exc:
        console.print(f"[red]adversarial demo failed:[/] {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
