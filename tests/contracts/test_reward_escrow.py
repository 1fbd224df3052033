"""ape tests of RewardEscrow: release on a verified and sealed receipt, refusals, refunds, re-entry.

Every escrow names a registry (deposit refuses address(0)): the verifier alone accepts any
self-consistent receipt, so release also needs the registry to have sealed the task with
that run root. Since protocol v2 an escrow names the whole run (RunTerms: task id, registry,
sponsor, spec hash, least total credits) and release checks the registry's
runBinding(taskId) against it, so a run posted under the same task id by someone else, with
another spec, or with too little accepted work never pays.
Receipts come from the Python encoder (tenzro_operator.receipt) and are "sealed" on
MockReceiptRegistry (contracts/mocks), which answers getReceipt, sealedRunRoot and
runBinding like a TrainingRegistry without a training run; two tests seal a real one-round
run on the TrainingRegistry and release against it. The verifier's runtime code is placed at 0x...1008 with
anvil_setCode, as on a devnet. Every revert path checks that balances and escrow state
are unchanged.
"""

from __future__ import annotations

import hashlib
import ape
import pytest
import solcx
from ethpm_types import ContractType
from registry_helpers import OUTER, SOLC, deploy_registry

from tenzro_operator import receipt as rc

PRECOMPILE = "0x0000000000000000000000000000000000001008"
E18 = 10**18
DAY = 86_400


def h(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


TASK = rc.task_id_bytes("escrow-demo-task")
SPEC = h("spec")  # the spec hash make_receipt puts in its receipts
CREDITS = 100  # total credits the mock registry reports for a sealed run (setBinding)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def owner(accounts):
    return accounts[0]


@pytest.fixture(scope="module")
def payer(accounts):
    return accounts[1]


@pytest.fixture(scope="module")
def beneficiary(accounts):
    return accounts[2]


@pytest.fixture(scope="module")
def stranger(accounts):
    return accounts[3]


@pytest.fixture(scope="module")
def run_sponsor(accounts):
    """The sponsor of the runs the mock registry reports (an address only: it sends nothing)."""
    return accounts[7]


@pytest.fixture(scope="module")
def tnzo(project, owner, payer):
    t = owner.deploy(project.TenzroToken, 10**9 * E18)
    t.transfer(payer, 10**6 * E18, sender=owner)
    return t


@pytest.fixture(scope="module")
def at_1008(project, chain, owner):
    v = owner.deploy(project.ReceiptVerifier)
    chain.provider.set_code(PRECOMPILE, chain.provider.get_code(v.address))
    return v


@pytest.fixture(scope="module")
def escrow(project, owner, at_1008):
    return owner.deploy(project.RewardEscrow, PRECOMPILE)


@pytest.fixture(scope="module")
def mock_registry(mocks, owner):
    """MockReceiptRegistry (contracts/mocks): getReceipt answers whatever receipt a test sealed
    there. Compiled through conftest's `mocks` (ape's source walk may miss contracts/mocks/)."""
    return owner.deploy(mocks("MockReceiptRegistry"))


@pytest.fixture
def make_receipt(chain, mock_registry):
    """Build (receipt bytes, run root) with the Python encoder; by default a receipt of the
    mock registry (not sealed there: see `seal`)."""

    def make(task_id: bytes = TASK, registry: str = mock_registry.address, chain_id: int | None = None, rounds: int = 2,
             salt: str = ""):
        digests = [rc.round_digest(r, h(f"w{r}{salt}"), h(f"t{r}{salt}"), 3) for r in range(rounds)]
        data = rc.encode_receipt(
            chain_id=chain.chain_id if chain_id is None else chain_id, registry=registry, task_id=task_id,
            spec_hash=h("spec"), final_model_hash=h(f"w{rounds - 1}{salt}"),
            transcript_root=rc.transcript_root([h(f"t{r}{salt}") for r in range(rounds)]),
            trainer_count=4, round_digests=digests)
        return data, rc.run_root(data)

    return make


@pytest.fixture
def seal(mock_registry, owner, run_sponsor):
    """Seal `data` on the mock registry (replacing any receipt of its task), posted by
    `sponsor` (default run_sponsor) with `credits` total credits; returns the run root the
    registry now answers, which must be the Python reference's."""

    def do(data: bytes, sponsor=None, credits: int = CREDITS) -> bytes:
        mock_registry.seal(data, sender=owner)
        task = data[53:85]
        mock_registry.setBinding(task, sponsor or run_sponsor, credits, sender=owner)
        stored, serialized = mock_registry.getReceipt(task)
        assert bytes(serialized) == data
        assert bytes(stored[3]) == rc.run_root(data)  # TrainingReceipt.runRoot
        return bytes(stored[3])

    return do


def terms(task_id=TASK, registry=None, sponsor=None, spec_hash=SPEC, min_credits=0) -> tuple:
    """RewardEscrow.RunTerms (taskId, registry, sponsor, specHash, minCredits)."""
    return (task_id, registry, sponsor, spec_hash, min_credits)


@pytest.fixture
def deposit(chain, escrow, tnzo, payer, beneficiary, mock_registry, run_sponsor):
    def dep(amount=5 * E18, task_id=TASK, registry=mock_registry.address, life=DAY, token=None, sponsor=None,
            spec_hash=SPEC, min_credits=0):
        tok = token or tnzo
        tok.approve(escrow, amount, sender=payer)
        run = terms(task_id, registry, sponsor or run_sponsor, spec_hash, min_credits)
        tx = escrow.deposit(tok, beneficiary, amount, run, chain.pending_timestamp + life, sender=payer)
        return tx.return_value if tx.return_value is not None else escrow.escrowCount() - 1

    return dep


@pytest.fixture
def snapshot(escrow, tnzo, payer, beneficiary):
    """Everything a revert must leave unchanged."""

    def snap(escrow_id: int):
        return (
            tuple(escrow.getEscrow(escrow_id)),
            escrow.escrowCount(),
            tnzo.balanceOf(escrow),
            tnzo.balanceOf(payer),
            tnzo.balanceOf(beneficiary),
        )

    return snap


# ---------------------------------------------------------------- happy paths


def test_constructor_and_views(escrow):
    assert escrow.verifier() == PRECOMPILE
    # an unknown id reads as zeroes (Status.None), not a revert
    assert escrow.getEscrow(10**6).status == 0


def test_deposit_and_release(chain, escrow, mock_registry, tnzo, payer, beneficiary, stranger, run_sponsor,
                             make_receipt, seal):
    before_b = tnzo.balanceOf(beneficiary)
    before_p = tnzo.balanceOf(payer)
    tnzo.approve(escrow, 7 * E18, sender=payer)
    run = terms(TASK, mock_registry.address, run_sponsor.address, SPEC, CREDITS)
    tx = escrow.deposit(tnzo, beneficiary, 7 * E18, run, chain.pending_timestamp + DAY, sender=payer)
    eid = escrow.escrowCount() - 1
    (bound,) = tx.events.filter(escrow.Bound)
    assert (bound.escrowId, bound.sponsor, bytes(bound.specHash), bound.minCredits) == (
        eid, run_sponsor.address, SPEC, CREDITS)
    e = escrow.getEscrow(eid)
    assert (e.payer, e.beneficiary, e.amount, e.status) == (payer.address, beneficiary.address, 7 * E18, 1)
    assert e.registry == mock_registry.address
    assert (e.sponsor, bytes(e.specHash), e.minCredits) == (run_sponsor.address, SPEC, CREDITS)
    assert tnzo.balanceOf(payer) == before_p - 7 * E18
    data, root = make_receipt()
    seal(data)
    assert escrow.canRelease(eid, data, root)
    tx = escrow.release(eid, data, root, sender=stranger)  # anyone may trigger; the beneficiary is paid
    ev = tx.events.filter(escrow.Released)[0]
    assert ev.escrowId == eid and ev.amount == 7 * E18 and bytes(ev.runRoot) == root
    assert tnzo.balanceOf(beneficiary) == before_b + 7 * E18
    assert escrow.getEscrow(eid).status == 2
    assert not escrow.canRelease(eid, data, root)


def test_release_through_normally_deployed_verifier(project, owner, chain, tnzo, mock_registry, payer, beneficiary,
                                                     run_sponsor, make_receipt, seal):
    v = owner.deploy(project.ReceiptVerifier)
    esc = owner.deploy(project.RewardEscrow, v.address)
    tnzo.approve(esc, E18, sender=payer)
    esc.deposit(tnzo, beneficiary, E18, terms(TASK, mock_registry.address, run_sponsor.address),
                chain.pending_timestamp + 100, sender=payer)
    data, root = make_receipt(rounds=5)
    seal(data)
    before = tnzo.balanceOf(beneficiary)
    tx = esc.release(0, data, root, sender=payer)
    assert tnzo.balanceOf(beneficiary) == before + E18
    print("release gas (R=5, anchored to MockReceiptRegistry):", tx.gas_used)


def test_refund_after_expiry(chain, escrow, tnzo, payer, deposit, snapshot, make_receipt):
    eid = deposit(life=1000)
    s = snapshot(eid)
    with ape.reverts(escrow.RewardEscrow__NotExpired):
        escrow.refund(eid, sender=payer)
    assert snapshot(eid) == s
    chain.mine(deltatime=1001)
    data, root = make_receipt()
    with ape.reverts(escrow.RewardEscrow__Expired):
        escrow.release(eid, data, root, sender=payer)
    assert snapshot(eid) == s
    before = tnzo.balanceOf(payer)
    tx = escrow.refund(eid, sender=payer)
    assert tx.events.filter(escrow.Refunded)[0].amount == 5 * E18
    assert tnzo.balanceOf(payer) == before + 5 * E18
    assert escrow.getEscrow(eid).status == 3
    s2 = snapshot(eid)
    with ape.reverts(escrow.RewardEscrow__NotOpen):
        escrow.refund(eid, sender=payer)
    with ape.reverts(escrow.RewardEscrow__NotOpen):
        escrow.release(eid, data, root, sender=payer)
    assert snapshot(eid) == s2


# ---------------------------------------------------------------- refusals


def test_release_refusals_leave_state_unchanged(escrow, payer, deposit, snapshot, make_receipt, seal, chain):
    eid = deposit()
    data, root = make_receipt()
    seal(data)  # the anchor would pass: every refusal below comes from the receipt itself
    s = snapshot(eid)
    bad = [
        ("wrong root", escrow.RewardEscrow__ReceiptRejected, data, bytes(x ^ 1 for x in root[:1]) + root[1:]),
        ("other task", escrow.RewardEscrow__TaskMismatch, *make_receipt(task_id=h("other"))),
        ("other chain", escrow.RewardEscrow__ChainMismatch, *make_receipt(chain_id=1)),
        ("truncated", escrow.RewardEscrow__MalformedReceipt, data[:-1], root),
        ("extra byte", escrow.RewardEscrow__MalformedReceipt, data + b"\x00", root),
        ("wrong version", escrow.RewardEscrow__MalformedReceipt, b"\x02" + data[1:], root),
    ]
    for why, err, d, r in bad:
        assert not escrow.canRelease(eid, d, r), why
        with ape.reverts(err):
            escrow.release(eid, d, r, sender=payer)
        assert snapshot(eid) == s, why
    with ape.reverts(escrow.RewardEscrow__UnknownEscrow):
        escrow.release(10**6, data, root, sender=payer)
    assert snapshot(eid) == s


def test_registry_mismatch(escrow, payer, deposit, snapshot, make_receipt):
    named = "0x" + "22" * 20
    eid = deposit(registry=named)
    data, root = make_receipt(registry="0x" + "33" * 20)
    s = snapshot(eid)
    with ape.reverts(escrow.RewardEscrow__RegistryMismatch):
        escrow.release(eid, data, root, sender=payer)
    assert snapshot(eid) == s


def test_forged_receipt_verifier_accepts_registry_never_sealed(chain, escrow, tnzo, beneficiary, stranger,
                                                               deposit, snapshot, make_receipt, seal):
    """The attack the registry anchor stops: a self-consistent receipt for the escrow's task,
    chain and registry, built by anyone, is accepted by the verifier but was never sealed."""
    task = rc.task_id_bytes("forgery-target")
    eid = deposit(amount=4 * E18, task_id=task)
    forged, forged_root = make_receipt(task_id=task, rounds=3, salt="forged")
    # the on-chain verifier at 0x...1008 answers 0x01 for the forgery
    answer = chain.provider.web3.eth.call({"to": PRECOMPILE, "data": rc.verifier_input(forged, forged_root)})
    assert bytes(answer) == b"\x01"
    s = snapshot(eid)
    assert not escrow.canRelease(eid, forged, forged_root)
    with ape.reverts(escrow.RewardEscrow__NotSealed):
        escrow.release(eid, forged, forged_root, sender=stranger)
    assert snapshot(eid) == s

    # the registry seals the real run: the forgery is refused on the root, the real receipt pays
    real, real_root = make_receipt(task_id=task, rounds=3, salt="real")
    assert seal(real) == real_root != forged_root
    assert not escrow.canRelease(eid, forged, forged_root)
    with ape.reverts(escrow.RewardEscrow__RunRootMismatch):
        escrow.release(eid, forged, forged_root, sender=stranger)
    assert snapshot(eid) == s
    before = tnzo.balanceOf(beneficiary)
    escrow.release(eid, real, real_root, sender=stranger)
    assert tnzo.balanceOf(beneficiary) == before + 4 * E18


def test_deposit_without_registry_reverts(chain, escrow, tnzo, payer, beneficiary, run_sponsor, snapshot):
    tnzo.approve(escrow, 10 * E18, sender=payer)
    s = snapshot(0)
    with ape.reverts(escrow.RewardEscrow__RegistryRequired):
        escrow.deposit(tnzo, beneficiary, 10 * E18, terms(TASK, ape.utils.ZERO_ADDRESS, run_sponsor.address),
                       chain.pending_timestamp + 100, sender=payer)
    assert snapshot(0) == s  # escrowCount and all balances unchanged
    tnzo.approve(escrow, 0, sender=payer)


def test_deposit_reverts_leave_state_unchanged(chain, escrow, mock_registry, tnzo, payer, beneficiary, run_sponsor,
                                               snapshot):
    tnzo.approve(escrow, 10 * E18, sender=payer)
    s = snapshot(0)
    now = chain.pending_timestamp
    zero = ape.utils.ZERO_ADDRESS
    reg = mock_registry.address
    ok = terms(TASK, reg, run_sponsor.address)
    cases = [
        (escrow.RewardEscrow__ZeroAddress, (zero, beneficiary, E18, ok, now + 10)),
        (escrow.RewardEscrow__ZeroAddress, (tnzo, zero, E18, ok, now + 10)),
        (escrow.RewardEscrow__ZeroAddress, (tnzo, beneficiary, E18, terms(TASK, reg, zero), now + 10)),
        (escrow.RewardEscrow__RegistryRequired, (tnzo, beneficiary, E18, terms(TASK, zero, run_sponsor.address),
                                                 now + 10)),
        (escrow.RewardEscrow__ZeroAmount, (tnzo, beneficiary, 0, ok, now + 10)),
        (escrow.RewardEscrow__ZeroTaskId, (tnzo, beneficiary, E18, terms(bytes(32), reg, run_sponsor.address),
                                           now + 10)),
        (escrow.RewardEscrow__ZeroSpecHash, (tnzo, beneficiary, E18,
                                             terms(TASK, reg, run_sponsor.address, spec_hash=bytes(32)), now + 10)),
        (escrow.RewardEscrow__ExpiryNotInFuture, (tnzo, beneficiary, E18, ok, now - 1)),
    ]
    for err, args in cases:
        with ape.reverts(err):
            escrow.deposit(*args, sender=payer)
        assert snapshot(0) == s
    # not enough allowance: the token's own error, nothing recorded
    tnzo.approve(escrow, 0, sender=payer)
    with ape.reverts():
        escrow.deposit(tnzo, beneficiary, E18, ok, now + 10, sender=payer)
    assert snapshot(0) == s


# ---------------------------------------------------------------- binding to the run (v2)


def test_release_only_for_the_run_the_escrow_names(escrow, mock_registry, tnzo, beneficiary, stranger, run_sponsor,
                                                  deposit, snapshot, make_receipt, seal):
    """One sealed receipt (sponsor run_sponsor, spec SPEC, CREDITS credits); escrows for the
    same task that name another sponsor, another spec or more work are refused with the
    mismatch; the escrow that names this run is paid."""
    data, root = make_receipt()
    seal(data)
    assert tuple(mock_registry.runBinding(TASK)) == (root, run_sponsor.address, SPEC, CREDITS)
    refused = [
        (dict(sponsor=stranger), escrow.RewardEscrow__SponsorMismatch,
         dict(expected=stranger.address, runSponsor=run_sponsor.address)),
        (dict(spec_hash=h("another spec")), escrow.RewardEscrow__SpecMismatch,
         dict(expected=h("another spec"), runSpecHash=SPEC)),
        (dict(min_credits=CREDITS + 1), escrow.RewardEscrow__NotEnoughWork,
         dict(minCredits=CREDITS + 1, runCredits=CREDITS)),
    ]
    for over, err, args in refused:
        eid = deposit(amount=2 * E18, **over)
        s = snapshot(eid)
        assert not escrow.canRelease(eid, data, root), over
        with ape.reverts(err, **args):
            escrow.release(eid, data, root, sender=stranger)
        assert snapshot(eid) == s, over
    eid = deposit(amount=2 * E18, min_credits=CREDITS)  # exactly enough work
    assert escrow.canRelease(eid, data, root)
    before = tnzo.balanceOf(beneficiary)
    escrow.release(eid, data, root, sender=stranger)
    assert tnzo.balanceOf(beneficiary) == before + 2 * E18
    assert escrow.getEscrow(eid).status == 2


def test_junk_run_under_the_same_task_id_pays_nothing(escrow, stranger, payer, deposit, snapshot, make_receipt, seal):
    """Attack 7 (THREATS.md): someone else posts the escrow's task id first, with the same spec
    hash, and seals a run; the escrow names the real sponsor and is refused."""
    eid = deposit(amount=E18)
    data, root = make_receipt(salt="junk")
    seal(data, sponsor=payer)  # the attacker (here: the payer's address) posted and sealed it
    s = snapshot(eid)
    with ape.reverts(escrow.RewardEscrow__SponsorMismatch):
        escrow.release(eid, data, root, sender=stranger)
    assert snapshot(eid) == s and not escrow.canRelease(eid, data, root)


def test_constructor_rejects_zero_verifier(project, owner):
    with ape.reverts(project.RewardEscrow.RewardEscrow__ZeroAddress):
        owner.deploy(project.RewardEscrow, ape.utils.ZERO_ADDRESS)


# ---------------------------------------------------------------- re-entrancy

REENTRANT_SRC = """// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;
interface IEscrow {
    function release(uint256 id, bytes calldata receipt, bytes32 root) external;
    function refund(uint256 id) external;
}
/// Minimal ERC-20 that re-enters the escrow from transfer() and records whether it got in.
contract ReentrantToken {
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    IEscrow public target; uint256 public id; bytes public receipt; bytes32 public root;
    bool public armed; bool public reentered;
    constructor(address to, uint256 amount) { balanceOf[to] = amount; }
    function arm(IEscrow t, uint256 i, bytes calldata r, bytes32 rr) external {
        (target, id, receipt, root, armed) = (t, i, r, rr, true);
    }
    function approve(address s, uint256 a) external returns (bool) { allowance[msg.sender][s] = a; return true; }
    function transferFrom(address f, address t, uint256 a) external returns (bool) {
        allowance[f][msg.sender] -= a; balanceOf[f] -= a; balanceOf[t] += a; return true;
    }
    function transfer(address t, uint256 a) external returns (bool) {
        if (armed) {
            armed = false;
            try target.release(id, receipt, root) { reentered = true; } catch {}
            try target.refund(id) { reentered = true; } catch {}
        }
        balanceOf[msg.sender] -= a; balanceOf[t] += a; return true;
    }
}
"""


@pytest.fixture(scope="module")
def reentrant_token(owner, payer):
    out = solcx.compile_standard(
        {"language": "Solidity", "sources": {"R.sol": {"content": REENTRANT_SRC}},
         "settings": {"evmVersion": "cancun",
                      "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]}}}},
        solc_binary=str(SOLC))
    art = out["contracts"]["R.sol"]["ReentrantToken"]
    ct = ContractType(contractName="ReentrantToken", abi=art["abi"],
                      deploymentBytecode={"bytecode": "0x" + art["evm"]["bytecode"]["object"]},
                      runtimeBytecode={"bytecode": "0x" + art["evm"]["deployedBytecode"]["object"]})
    return owner.deploy(ape.contracts.ContractContainer(ct), payer, 1000)


def test_reentrant_token_cannot_reenter(escrow, reentrant_token, beneficiary, payer, deposit, make_receipt, seal):
    eid = deposit(amount=1000, token=reentrant_token)
    data, root = make_receipt()
    seal(data)
    reentrant_token.arm(escrow, eid, data, root, sender=payer)
    escrow.release(eid, data, root, sender=payer)
    assert not reentrant_token.reentered()
    assert reentrant_token.balanceOf(beneficiary) == 1000
    assert reentrant_token.balanceOf(escrow) == 0


# ---------------------------------------------------------------- against a real sealed run


@pytest.fixture(scope="module")
def sealed_run(project, chain, owner, accounts, tnzo):
    """A one-round run (M=K=F=1) sealed on the TrainingRegistry; the round is finalized after
    its deadline with no accepted submission, which the registry allows."""
    sponsor, syncer, trainer = accounts[4], accounts[5], accounts[6]
    # minSyncerStake 1 TNZO, timeout 60 s, min syncer fee 0.001 TNZO per round
    reg = deploy_registry(project, owner, tnzo, E18, 60, 10**15)
    for a in (sponsor, syncer, trainer):
        tnzo.transfer(a, 100 * E18, sender=owner)
        tnzo.approve(reg, 100 * E18, sender=a)
    reg.registerSyncer(2 * E18, sender=syncer)
    task = rc.task_id_bytes("escrow-sealed-run")
    frag = h("fragment-0 safetensors")
    # TaskParams: M = K = F = 1, H = 24, R = 1, tau 5 s, Mean, Open, minStake 1 TNZO,
    # pool 10 TNZO, one fragment of 1000, enrollment 1 h, syncer fee 1 %, syncer bond 1 TNZO, norm
    # screen x10 (100.0 squared), availability challenges answered within 60 s
    params = (task, h("spec json"), "bafyspec", h("initial weights"), 1, 1, 1, 24, 1, 5_000, 0, 0,
              E18, 10 * E18, [1000], 3600, 100, E18, 0x42C80000, 60)
    reg.postTask(params, sender=sponsor)
    reg.useRootFlow(task, h("initial fragments"), OUTER, sender=sponsor)
    return reg, task, frag, sponsor, syncer, trainer


def test_registry_receipt_matches_python_and_releases(chain, escrow, tnzo, payer, beneficiary, stranger,
                                                       sealed_run, deposit, snapshot, make_receipt):
    reg, task, frag, sponsor, syncer, trainer = sealed_run
    eid = deposit(amount=3 * E18, task_id=task, registry=reg.address, life=10 * DAY, sponsor=sponsor,
                  spec_hash=h("spec json"))
    # escrows for the same task id that name another sponsor, or ask for accepted work this
    # run (committed with no accepted submission: 0 credits) did not do
    other_sponsor = deposit(amount=E18, task_id=task, registry=reg.address, life=10 * DAY, sponsor=payer,
                            spec_hash=h("spec json"))
    more_work = deposit(amount=E18, task_id=task, registry=reg.address, life=10 * DAY, sponsor=sponsor,
                        spec_hash=h("spec json"), min_credits=1)
    # Not sealed yet: a self-consistent receipt for this task and registry passes the verifier
    # but the anchor refuses it.
    forged, forged_root = make_receipt(task_id=task, registry=reg.address, rounds=1)
    s = snapshot(eid)
    with ape.reverts(escrow.RewardEscrow__NotSealed):
        escrow.release(eid, forged, forged_root, sender=stranger)
    assert snapshot(eid) == s

    reg.enrollTrainer(task, 2 * E18, "did:key:z6Mk-trainer", sender=trainer)  # M = 1: round 0 opens
    reg.requestSyncerElection(task, sender=stranger)
    reg.electSyncer(task, sender=stranger)  # the next block
    chain.mine(deltatime=10)
    th = h("transcript round 0")
    reg.commitRound((task, 0, h("fragments root"), [0], [0], [frag], th, "bafytranscript", []), sender=syncer)
    chain.mine(deltatime=61)  # the round's challenge window (60 s)
    reg.sealRootRun(task, sender=stranger)
    stored, serialized = reg.getReceipt(task)
    serialized = bytes(serialized)
    # TrainingReceipt fields in ITrainingRegistry order (ape may hand the struct back as a tuple)
    sealed_root, sealed_troot = bytes(stored[3]), bytes(stored[4])

    # The registry's receipt is exactly what the Python reference builds from the same facts.
    wr = rc.weights_root([frag])
    expected = rc.encode_receipt(chain_id=chain.chain_id, registry=reg.address, task_id=task, spec_hash=h("spec json"),
                                 final_model_hash=wr, transcript_root=rc.transcript_root([th]), trainer_count=1,
                                 round_digests=[rc.round_digest(0, wr, th, 0)])
    assert serialized == expected
    assert sealed_root == rc.run_root(serialized)
    assert sealed_troot == rc.transcript_root([th])

    # the registry's binding of the run, as the escrow reads it
    assert tuple(reg.runBinding(task)) == (sealed_root, sponsor.address, h("spec json"), 0)

    # Sealed: the forged receipt is still refused (another root), the real one releases.
    with ape.reverts(escrow.RewardEscrow__RunRootMismatch):
        escrow.release(eid, forged, forged_root, sender=stranger)
    assert snapshot(eid) == s
    for other, err, args in [
        (other_sponsor, escrow.RewardEscrow__SponsorMismatch, dict(expected=payer.address, runSponsor=sponsor.address)),
        (more_work, escrow.RewardEscrow__NotEnoughWork, dict(minCredits=1, runCredits=0)),
    ]:
        so = snapshot(other)
        assert not escrow.canRelease(other, serialized, sealed_root)
        with ape.reverts(err, **args):
            escrow.release(other, serialized, sealed_root, sender=stranger)
        assert snapshot(other) == so
    before = tnzo.balanceOf(beneficiary)
    assert escrow.canRelease(eid, serialized, sealed_root)
    tx = escrow.release(eid, serialized, sealed_root, sender=stranger)
    assert tnzo.balanceOf(beneficiary) == before + 3 * E18
    print("release gas (R=1, anchored to the registry):", tx.gas_used,
          "; sealedRunRoot alone, as a transaction:", reg.sealedRunRoot.estimate_gas_cost(task, sender=stranger))
