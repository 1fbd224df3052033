"""Plain helpers of the registry's ape tests (imported by conftest and the test modules):
constants, TaskParams / RootCommit builders, rounds committed by root with the credits they
add, the seal and the claims, stand-in hashes.

Amounts are token atto-units (18 decimals); times are seconds except ``graceWindowMs``.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import ape
from eth_utils import keccak
from ethpm_types import ContractType

from tenzro_operator.chain import proof_commitment

E18 = 10**18
MIN_SYNCER_STAKE = 100 * E18
SYNCER_TIMEOUT = 60  # seconds
# the deploy script's default (0.001 TNZO): the suite's registries enforce a minimum fee > 0
MIN_SYNCER_FEE_PER_ROUND = 10**15
MIN_STAKE = 10 * E18
GRACE_MS = 30_000  # 30 s
GRACE_S = 30
POOL = 1_000 * E18
ENROLL_S = 3_600  # enrollment window of the default task, seconds
SYNCER_FEE_BPS = 100  # 1 % of the pool to syncers
SYNCER_BOND = E18  # 1 % of MIN_SYNCER_STAKE: a candidate can be syncer of 100 runs at once
BPS = 10_000
MAX_SYNCER_CANDIDATES = 64  # RegistryStorage.MAX_SYNCER_CANDIDATES
ELECTION_WINDOW_BLOCKS = 256  # RegistryStorage.ELECTION_WINDOW_BLOCKS
ZERO_ADDRESS = "0x" + "00" * 20


def deploy_registry(project, owner, token, min_syncer_stake=MIN_SYNCER_STAKE, syncer_timeout=SYNCER_TIMEOUT,
                    min_syncer_fee_per_round=MIN_SYNCER_FEE_PER_ROUND):
    """A TrainingRegistry with its modules (RegistryRounds, then RegistryEvidence with it, deployed first
    with the same parameters), as scripts/deploy.py deploys them; returned with its whole ABI
    (ITrainingRegistryFull: the functions its modules serve through its fallback included)."""
    rounds = owner.deploy(project.RegistryRounds, token, min_syncer_fee_per_round)
    evidence = owner.deploy(project.RegistryEvidence, token, min_syncer_fee_per_round, rounds, min_syncer_stake,
                            syncer_timeout)
    registry = owner.deploy(project.TrainingRegistry, token, min_syncer_stake, syncer_timeout,
                            min_syncer_fee_per_round, evidence)
    return project.ITrainingRegistryFull.at(registry.address)


def leave_pool(registry, chain, candidate) -> None:
    """Takes ``candidate`` out of the syncer pool: its exit (SyncerLeaving) once the window of its
    last change has passed, then its stake (SyncerUnregistered) once the exit's has."""
    for _ in range(2):
        chain.mine(ELECTION_WINDOW_BLOCKS + 1)
        registry.unregisterSyncer(sender=candidate)


def sha(label: str) -> bytes:
    """sha256 of a label: stands in for payload / weights / transcript hashes (32 bytes)."""
    return hashlib.sha256(label.encode()).digest()


def task_id(name: str) -> bytes:
    """bytes32 task id as the operator derives it: keccak256 of the UTF-8 task_id."""
    return keccak(text=name)


CHALLENGE_S = 20  # answer window of an availability challenge, seconds


def params(name: str = "task-1", **over) -> dict:
    """TaskParams as a dict (ITrainingRegistry.TaskParams field order)."""
    f = over.get("fragmentCount", 2)
    p = dict(
        taskId=task_id(name),
        specHash=sha("spec:" + name),
        specCid="bafkreispec" + name,
        initialWeightsRoot=sha("w0:" + name),
        trainerCount=3,
        quorum=2,
        fragmentCount=f,
        innerSteps=24,
        maxRounds=2,
        graceWindowMs=GRACE_MS,
        aggregation=1,
        tier=0,
        minStake=MIN_STAKE,
        rewardPool=POOL,
        fragmentSizes=[1000 * (i + 1) for i in range(f)],
        enrollmentSeconds=ENROLL_S,
        syncerFeeBps=SYNCER_FEE_BPS,
        syncerBond=SYNCER_BOND,
        normScreenSq=0x42C80000,  # 100.0: a norm screen of x10
        challengeSeconds=CHALLENGE_S,
    )
    p.update(over)
    return p


TASK_PARAM_KEYS = (
    "taskId", "specHash", "specCid", "initialWeightsRoot", "trainerCount", "quorum",
    "fragmentCount", "innerSteps", "maxRounds", "graceWindowMs", "aggregation", "tier",
    "minStake", "rewardPool", "fragmentSizes", "enrollmentSeconds", "syncerFeeBps",
    "syncerBond", "normScreenSq", "challengeSeconds",
)


def as_tuple(p: dict) -> tuple:
    """TaskParams dict -> the tuple postTask takes (struct field order)."""
    return tuple(p[k] for k in TASK_PARAM_KEYS)


def gas_grid(full: bool) -> list[tuple[int, int]]:
    """The (M, F) shapes of a gas table: the whole 4 x 3 grid when ``full`` (its report is asked
    for), otherwise the smallest (2 x 1), one middle shape (4 x 4) and M = 2, 8, 32 at F = 12, where
    the proofs' growth with M is checked (each shape costs 20-100 s on a loaded CI machine; the
    others add no proof depth)."""
    if full:
        return [(m, f) for m in (2, 4, 8, 32) for f in (1, 4, 12)]
    return [(2, 1), (4, 4), (2, 12), (8, 12), (32, 12)]


def fee_per_round(pool: int, bps: int, rounds: int) -> int:
    """Syncer fee of one committed round, atto-units: floor(floor(pool * bps / 10000) / rounds)
    (the rule of ITrainingRegistry's header, written out here from the interface text)."""
    return pool * bps // BPS // rounds


def to_reveal_phase(registry, task: bytes) -> None:
    """Mines a block just past the open round's commit phase when it is still open (a root-flow
    round commits early, and a forced submission is revealed, only after it)."""
    closes = registry.commitPhase(task)[0]
    wait = closes + 1 - ape.chain.pending_timestamp
    if wait > 0:
        ape.chain.mine(deltatime=wait)


#: OuterRule of the suite's runs (useRootFlow): lr 0.7, momentum 0.9, Nesterov, no trim.
OUTER = (0x3F333333, 0x3F666666, True, 0)
INITIAL_FRAGMENTS_ROOT = hashlib.sha256(b"initial fragments root").digest()
# cumulative credits per (registry, task) of the rounds `commit_round` committed, by trainer index
_CREDITS: dict[tuple[str, bytes], list[int]] = {}


def commit_forced(registry, task: bytes, trainer, fragment: int, fields: tuple):
    """Trainer ``trainer``'s ``commitSubmission`` (commit phase) of the open round's fragment
    ``fragment`` for the payload ``fields`` (payloadRoot, payloadSumsq, cid, payloadHash; a signed
    tuple's first four), over the run's weights now. Returns the receipt."""
    from tenzro_trainer import round_commitment as rc

    run = registry.getRun(task)
    sh = rc.OuterGradient(task, run.currentRound, fragment, bytes(run.weightsRoot), *fields[:4]).struct_hash()
    return registry.commitSubmission(task, run.currentRound, fragment, rc.forced_commitment(sh, trainer.address),
                                     sender=trainer)


def force(registry, task: bytes, trainer, fragment: int, signed: tuple, relayer=None):
    """Trainer ``trainer`` forces ``signed`` (a payload tuple signed over the run's weights now) in
    the open round: ``commitSubmission`` in the commit phase, then the reveal after it (by
    ``relayer``, default the trainer). Returns the reveal's receipt."""
    rnd = registry.getRun(task).currentRound
    commit_forced(registry, task, trainer, fragment, signed)
    to_reveal_phase(registry, task)
    return registry.submitOuterGradient(task, rnd, fragment, signed, sender=relayer or trainer)


def root_commit(task: bytes, rnd: int, f: int, bitmaps: list[int], previous: list[int],
                unendorsed: list[int] | None = None) -> tuple:
    """RootCommit tuple: a stand-in fragments root, the accepted bitmaps and previous credits words
    (one per enrolled trainer), F fragment hashes, the transcript hash and CID, the unendorsed
    bitmaps (none: every accepted submission endorsed)."""
    return (task, rnd, sha(f"fragments:{task.hex()}:{rnd}"), bitmaps, previous,
            [sha(f"w:{task.hex()}:{rnd}:{j}") for j in range(f)], sha(f"transcript:{task.hex()}:{rnd}"),
            f"bafkreitranscript{rnd}", list(unendorsed or []))


def credits_of(registry, task: bytes) -> list[int]:
    """The cumulative credits per trainer index after the rounds `commit_round` committed, checked
    against the registry's credits root. A run without a committed round has none (its root is
    zero), also when the chain was reverted under the count: ape restores its snapshot after each
    test, and a function-scoped fixture posts the same task id again."""
    from tenzro_trainer.round_commitment import credits_tree

    n = registry.getRun(task).enrolledCount
    committed = bytes(registry.rootState(task)[2])
    if committed == bytes(32):
        return [0] * n
    kept = _CREDITS.get((registry.address, task), [])
    kept = [kept[i] if i < len(kept) else 0 for i in range(n)]
    assert credits_tree(kept).root == committed, (
        "the credits commit_round counted are not the registry's: a round committed or rewound outside it")
    return kept


def commit_round(registry, task: bytes, rnd: int, bitmaps: list[int], sender):
    """``commitRound`` of round ``rnd`` by ``sender`` once the round's commit phase is over, with
    trainer i accepted on the fragments of ``bitmaps[i]`` (one per enrolled trainer) and the
    previous credits this module counted; counts the credits the registry adds. Returns the receipt."""
    run = registry.getRun(task)
    sizes = list(run.fragmentSizes)
    previous = credits_of(registry, task)
    to_reveal_phase(registry, task)
    tx = registry.commitRound(root_commit(task, rnd, len(sizes), bitmaps, previous), sender=sender)
    _CREDITS[(registry.address, task)] = [c + sum(n for j, n in enumerate(sizes) if b >> j & 1)
                                          for c, b in zip(previous, bitmaps)]
    return tx


def seal_run(registry, task: bytes, sender):
    """``sealRootRun`` once the last round's challenge window is over. Returns the receipt."""
    ape.chain.mine(deltatime=registry.getRun(task).challengeSeconds + 1)
    return registry.sealRootRun(task, sender=sender)


def claim_all(registry, task: bytes, sender) -> list[int]:
    """Every trainer's ``claim`` against the credits `commit_round` counted (a run whose rounds
    credited nobody has no claims: its pool went back at the seal). Returns the rewards."""
    from tenzro_trainer.round_commitment import credits_tree

    credits = credits_of(registry, task)
    if not any(credits):
        return [0] * len(credits)
    tree = credits_tree(credits)
    return [registry.claim(task, i, c, tree.path(i), sender=sender).decode_logs(registry.RewardClaimed)[0].reward
            for i, c in enumerate(credits)]


REPO = Path(__file__).resolve().parents[2]
# The solc adapter of this checkout, written by scripts/toolchain/install-solc.sh during the
# bootstrap. Never ~/.solcx: a copy there may belong to another checkout that no longer exists.
SOLC = REPO / ".solc" / "solc-v0.8.28"


@functools.cache
def mock_contract_type(name: str) -> ContractType:
    """ContractType of contracts/mocks/<name>.sol, compiled with solcx (same solc 0.8.28).

    ape's source walk stops at 500 files, and the OpenZeppelin copy ape keeps under
    contracts/.cache/ uses them up, so contracts/mocks/ is not always an ape project source.
    """
    import solcx

    src = f"contracts/mocks/{name}.sol"
    out = solcx.compile_standard(
        {
            "language": "Solidity",
            "sources": {src: {"urls": [str(REPO / src)]}},
            "settings": {
                "evmVersion": "cancun",
                "optimizer": {"enabled": True, "runs": 200},
                "remappings": ["@openzeppelin/contracts/=node_modules/@openzeppelin/contracts/"],
                "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]}},
            },
        },
        solc_binary=str(SOLC),
        base_path=str(REPO),
        allow_paths=[str(REPO)],
    )
    return _contract_type(name, out["contracts"][src][name])


def inline_contract_type(source: str, name: str) -> ContractType:
    """ContractType of contract `name` in a Solidity source given as text (test-only helpers
    such as a caller that requests and elects in one transaction)."""
    import solcx

    out = solcx.compile_standard(
        {
            "language": "Solidity",
            "sources": {"Inline.sol": {"content": source}},
            "settings": {
                "evmVersion": "cancun",
                "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]}},
            },
        },
        solc_binary=str(SOLC),
    )
    return _contract_type(name, out["contracts"]["Inline.sol"][name])


def _contract_type(name: str, art: dict) -> ContractType:
    return ContractType(
        contractName=name,
        abi=art["abi"],
        deploymentBytecode={"bytecode": "0x" + art["evm"]["bytecode"]["object"]},
        runtimeBytecode={"bytecode": "0x" + art["evm"]["deployedBytecode"]["object"]},
    )


def ledger(registry, token, accounts) -> dict:
    """The terms of the registry's conservation rule (ITrainingRegistry / TrainingRegistry
    header), read from its views, and the token balance they must add up to:

        token.balanceOf(registry) == sum over runs (rewardPoolLeft + stakeHeld)
                                     + unclaimed syncer fees + syncer stakes
                                     + withdrawable + burned

    `accounts` must hold every address that was ever credited (trainers, sponsors, syncers);
    runs are all of listRuns (sealed and cancelled runs hold 0 in both terms), syncer stakes
    those of the current candidates (a candidate that left has stake 0)."""
    tasks = list(registry.listRuns(0, 10_000)[0])
    candidates = list(registry.syncerCandidates())
    runs = [registry.getRun(t) for t in tasks]
    terms = {
        "runs": sum(r.rewardPoolLeft + r.stakeHeld for r in runs),
        "fees": sum(registry.syncerFeeOf(t, a) for t in tasks for a in accounts),
        "stakes": sum(registry.syncerInfo(a)[0] for a in candidates),
        "withdrawable": sum(registry.withdrawable(a) for a in accounts),
        "burned": registry.burned(),
    }
    terms["balance"] = token.balanceOf(registry)
    return terms


def prove_committed(full, method: str, *args, sender):
    """Send proof ``method`` of ``full`` (ape, the registry's whole ABI) as a prover after its
    bounty does: ``commitProof`` of the proof's calldata first, mined a block before the proof
    (PROTOCOL.md §5 "Bounties"); returns the proof's receipt."""
    handler = getattr(full, method)
    full.commitProof(proof_commitment(bytes(handler.encode_input(*args)), sender.address), sender=sender)
    return handler(*args, sender=sender)


def nan_payload(sign, trainer, task: bytes, rnd: int, fragment: int, n: int) -> tuple:
    """A payload of n values whose last one is NaN, signed by ``trainer``, and the opening of its
    last chunk (the evidence proveInvalid(NonFinite) takes): ``(signed tuple, opening tuple)``."""
    import torch

    from tenzro_trainer.commitment import ChunkTree

    values = torch.ones(n)
    values[n - 1] = float("nan")
    tree = ChunkTree(values)
    root, sumsq = tree.root
    signed = sign(trainer, task, rnd, fragment, (root, sumsq, f"bafkreinan{rnd}x{fragment}", sha(f"nan:{rnd}:{fragment}")))
    last = tree.num_chunks - 1
    proof = tree.proof(last)
    return signed, (last, tree.chunk(last), [h for h, _ in proof], [s_ for _, s_ in proof])
