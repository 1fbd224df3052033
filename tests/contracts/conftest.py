"""Fixtures of the registry's ape tests: role accounts, a deployed token and registry, and
factory fixtures (``post_task``, ``enroll``, ``elect``, ``submit`` (forced submissions, commit then
reveal), ``start_run``, ``full_round`` (a round committed by root)) that drive a run the way the
operator does, EIP-712 signatures included (eth-account's
``encode_typed_data``, the same call the operator makes).

A syncer is elected only for a Training run and in two transactions
(``requestSyncerElection``, then ``electSyncer`` in a later block: anvil automines one block
per transaction), so ``start_run`` posts, enrolls the M trainers (the M-th opens round 0) and
then elects.

Amounts are token atto-units (18 decimals); times are seconds except ``graceWindowMs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ape
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from registry_helpers import (
    E18,
    INITIAL_FRAGMENTS_ROOT,
    MIN_STAKE,
    MIN_SYNCER_STAKE,
    OUTER,
    as_tuple,
    commit_forced,
    commit_round,
    deploy_registry,
    mock_contract_type,
    params,
    sha,
    to_reveal_phase,
)

@dataclass
class Roles:
    owner: object
    sponsor: object
    syncer: object
    other_syncer: object
    relayer: object
    stranger: object
    trainers: list


@pytest.fixture(scope="session")
def roles(accounts) -> Roles:
    """accounts 0..5 are roles; trainers are 4 of the 10 test accounts plus 6 generated ones
    (M = 8 needs 8 trainers with keys)."""
    extra = [accounts.generate_test_account() for _ in range(6)]
    return Roles(
        owner=accounts[0],
        sponsor=accounts[1],
        syncer=accounts[2],
        other_syncer=accounts[3],
        relayer=accounts[4],
        stranger=accounts[5],
        trainers=[accounts[6], accounts[7], accounts[8], accounts[9], *extra],
    )


@pytest.fixture(scope="session")
def sponsor(roles):
    return roles.sponsor


@pytest.fixture(scope="session")
def syncer(roles):
    return roles.syncer


@pytest.fixture(scope="session")
def trainers(roles):
    return roles.trainers


@pytest.fixture(scope="session")
def mocks():
    """mocks(name) -> ContractContainer of contracts/mocks/<name>.sol."""

    def _mock(name: str):
        return ape.contracts.ContractContainer(mock_contract_type(name))

    return _mock


@pytest.fixture(scope="module")
def token(mocks, roles):
    """A mintable 18-decimal ERC-20 (the registry works with any ERC-20)."""
    return roles.owner.deploy(mocks("MockERC20"))


@pytest.fixture(scope="module")
def registry(project, roles, token):
    """TrainingRegistry(token, minSyncerStake, syncerTimeout, minSyncerFeePerRound > 0)."""
    return deploy_registry(project, roles.owner, token)


@pytest.fixture(scope="module")
def fund(token, registry, roles, chain):
    """fund(account, amount): mint `amount` atto-units and approve the registry for them."""

    def _fund(account, amount: int):
        if chain.provider.get_balance(account.address) < 10 * E18:
            chain.provider.set_balance(account.address, 1000 * E18)
        token.mint(account, amount, sender=roles.owner)
        token.approve(registry, 2**256 - 1, sender=account)

    return _fund


@pytest.fixture(scope="module")
def syncer_pool(registry, fund, roles):
    """Registers `syncer` (only candidate) with the minimum stake."""
    fund(roles.syncer, MIN_SYNCER_STAKE)
    registry.registerSyncer(MIN_SYNCER_STAKE, sender=roles.syncer)
    return [roles.syncer]


@pytest.fixture(scope="module")
def post_task(registry, fund, roles) -> Callable:
    """post_task(name="task-1", sender=sponsor, root=True, **overrides) -> taskId (bytes32): posts
    and, with ``root``, commits the run's initial fragments root and outer rule (useRootFlow), before
    which nobody may enroll."""

    def _post(name: str = "task-1", sender=None, root: bool = True, **over) -> bytes:
        sender = sender or roles.sponsor
        p = params(name, **over)
        fund(sender, p["rewardPool"])
        registry.postTask(as_tuple(p), sender=sender)
        if root:
            registry.useRootFlow(p["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=sender)
        return p["taskId"]

    return _post


@pytest.fixture(scope="module")
def enroll(registry, fund) -> Callable:
    """enroll(task, trainer, stake=MIN_STAKE, did=...): funds and enrolls."""

    def _enroll(task: bytes, trainer, stake: int = MIN_STAKE, did: str = "did:tenzro:t"):
        fund(trainer, stake)
        return registry.enrollTrainer(task, stake, did, sender=trainer)

    return _enroll


@pytest.fixture(scope="module")
def evidence(project, registry):
    """The registry's evidence functions (ITrainingRegistryEvidence, served by its fallback)."""
    return project.ITrainingRegistryEvidence.at(registry.address)


@pytest.fixture(scope="module")
def full_registry(project, registry):
    """The registry with its whole ABI (ITrainingRegistryFull: its own functions, the evidence
    and permit functions, and the root-flow functions of RegistryRounds)."""
    return project.ITrainingRegistryFull.at(registry.address)


@pytest.fixture(scope="module")
def sign(registry, chain) -> Callable:
    """sign(trainer, task, round, fragment, payload) -> the payload tuple (payloadRoot, payloadSumsq,
    cid, payloadHash, signature) signed over the run's current weights root (EIP-712, version 2)."""

    def _sign(trainer, task: bytes, rnd: int, fragment: int, payload: tuple) -> tuple:
        root, sumsq, cid, payload_hash = payload[:4]
        typed = {
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"},
                    {"name": "verifyingContract", "type": "address"},
                ],
                "OuterGradient": [
                    {"name": "taskId", "type": "bytes32"},
                    {"name": "round", "type": "uint32"},
                    {"name": "fragment", "type": "uint16"},
                    {"name": "baseRoot", "type": "bytes32"},
                    {"name": "payloadRoot", "type": "bytes32"},
                    {"name": "payloadSumsq", "type": "uint32"},
                    {"name": "cid", "type": "string"},
                    {"name": "payloadHash", "type": "bytes32"},
                ],
            },
            "primaryType": "OuterGradient",
            "domain": {
                "name": "TenzroTrainingRegistry",
                "version": "2",
                "chainId": chain.chain_id,
                "verifyingContract": registry.address,
            },
            "message": {
                "taskId": task,
                "round": rnd,
                "fragment": fragment,
                "baseRoot": bytes(registry.getRun(task).weightsRoot),
                "payloadRoot": root,
                "payloadSumsq": sumsq,
                "cid": cid,
                "payloadHash": payload_hash,
            },
        }
        signed = Account.sign_message(encode_typed_data(full_message=typed), trainer.private_key)
        return (root, sumsq, cid, payload_hash, bytes(signed.signature))

    return _sign


@pytest.fixture(scope="module")
def submit(registry, sign, roles) -> Callable:
    """submit(task, [(trainer, fragment), ...], sender=relayer) -> {(trainer address, fragment):
    signed payload}: each trainer forces a signed stand-in submission (commitment root = a hash, sum
    of squares 1.0) of the open round: all commit in the commit phase (commitSubmission), then
    all are revealed after it (submitOuterGradient)."""

    def _submit(task: bytes, pairs, sender=None) -> dict:
        rnd = registry.getRun(task).currentRound
        signed = {}
        for trainer, fragment in pairs:
            cid = f"bafkreigrad{rnd}x{fragment}"
            fields = (sha(f"root:{cid}:{trainer.address}"), 0x3F800000, cid,
                      sha(f"payload:{trainer.address}:{rnd}:{fragment}"))
            commit_forced(registry, task, trainer, fragment, fields)
            signed[(trainer.address, fragment)] = sign(trainer, task, rnd, fragment, fields)
        to_reveal_phase(registry, task)
        for (_, fragment), sp in signed.items():
            registry.submitOuterGradient(task, rnd, fragment, sp, sender=sender or roles.relayer)
        return signed

    return _submit


@pytest.fixture(scope="module")
def elect(registry, roles) -> Callable:
    """elect(task, requester=stranger, elector=relayer): requestSyncerElection, then electSyncer
    in the next block (anvil automines each transaction); returns electSyncer's receipt."""

    def _elect(task: bytes, requester=None, elector=None):
        registry.requestSyncerElection(task, sender=requester or roles.stranger)
        return registry.electSyncer(task, sender=elector or roles.relayer)

    return _elect


@pytest.fixture(scope="module")
def syncer_of(registry, roles) -> Callable:
    """syncer_of(task) -> the role account that is the run's syncer now (syncer or other_syncer)."""

    def _of(task: bytes):
        addr = registry.getRun(task).syncer
        for a in (roles.syncer, roles.other_syncer):
            if a.address == addr:
                return a
        raise AssertionError(f"syncer {addr} of the run is not a role account")

    return _of


@pytest.fixture(scope="module")
def start_run(registry, post_task, enroll, elect, syncer_pool, roles) -> Callable:
    """start_run(name, m=3, **overrides): post, enroll m = M trainers (the last opens round 0),
    elect the syncer."""

    def _start(name: str = "task-1", m: int = 3, **over) -> bytes:
        over.setdefault("trainerCount", m)
        over.setdefault("quorum", min(2, m))
        task = post_task(name, **over)
        for t in roles.trainers[:m]:
            enroll(task, t)
        elect(task)
        return task

    return _start


@pytest.fixture(scope="module")
def full_round(registry, syncer_of) -> Callable:
    """full_round(task, round, m, f): the run's syncer commits the round (after its commit phase)
    with the first m trainers accepted on all f fragments (`commit_round`)."""

    def _full(task: bytes, rnd: int, m: int, f: int):
        n = registry.getRun(task).enrolledCount
        return commit_round(registry, task, rnd, [(1 << f) - 1 if i < m else 0 for i in range(n)], syncer_of(task))

    return _full


@pytest.fixture(scope="module")
def state(registry, token, roles) -> Callable:
    """state(*tasks): everything a revert must leave unchanged — token balances of the
    registry and of every role, withdrawable balances, the syncer pool (stakes, active runs,
    locked bonds), the burned total, and per task the run view, the trainer list, the
    metrics and open-round submission bitmaps of the trainers the tests use (the first four),
    the syncers' accrued fees, the root-flow state (opt-in, initial fragments root, credits root,
    claim deadline), the open round's commitment and, while Training, its commit phase."""

    trainers = roles.trainers[:4]
    holders = [roles.sponsor, roles.syncer, roles.other_syncer, roles.stranger, *trainers]

    def _state(*tasks: bytes):
        snap = {
            "balances": [token.balanceOf(registry)] + [token.balanceOf(a) for a in holders],
            "withdrawable": [registry.withdrawable(a) for a in holders],
            "syncers": [tuple(registry.syncerInfo(a)) for a in (roles.syncer, roles.other_syncer)],
            "candidates": list(registry.syncerCandidates()),
            "runs": registry.listRuns(0, 100),
            "burned": registry.burned(),
        }
        for task in tasks:
            run = registry.getRun(task)
            snap[task] = {
                "run": tuple(run),
                "trainers": list(registry.trainersOf(task)),
                "metrics": [tuple(registry.trainerMetrics(task, a)) for a in trainers],
                "subs": [tuple(registry.submissionsOf(task, run.currentRound, a)) for a in trainers],
                "fees": [registry.syncerFeeOf(task, a) for a in (roles.syncer, roles.other_syncer)],
                "root": tuple(registry.rootState(task)),
                "commitment": bytes(registry.roundCommitment(task, run.currentRound)),
                "phase": tuple(registry.commitPhase(task)) if run.status == 2 else None,  # Training only
            }
        return snap

    return _state


@pytest.fixture(scope="module")
def trainer_accounts(accounts, roles):
    """32 trainers with keys: the role trainers plus generated test accounts."""
    return list(roles.trainers) + [accounts.generate_test_account() for _ in range(32 - len(roles.trainers))]
