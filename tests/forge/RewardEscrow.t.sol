// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {TestBase} from "./lib/Cheats.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {RunRoot} from "../../contracts/lib/RunRoot.sol";
import {MockReceiptRegistry} from "../../contracts/mocks/MockReceiptRegistry.sol";
import {ReceiptVerifier, TrainingVerify} from "../../contracts/ReceiptVerifier.sol";
import {RewardEscrow} from "../../contracts/RewardEscrow.sol";

// ---------------------------------------------------------------------- test tokens

contract PlainToken is ERC20 {
    constructor() ERC20("Test", "TST") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}

/// @dev Keeps 1% of every transfer (fee-on-transfer).
contract FeeToken is ERC20 {
    constructor() ERC20("Fee", "FEE") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from != address(0) && to != address(0)) {
            uint256 fee = value / 100;
            super._update(from, address(0xFEE), fee);
            value -= fee;
        }
        super._update(from, to, value);
    }
}

/// @dev transfer / transferFrom return nothing (USDT style); balances otherwise normal.
contract NoReturnToken {
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
    }

    function approve(address s, uint256 a) external {
        allowance[msg.sender][s] = a;
    }

    function transfer(address to, uint256 a) external {
        balanceOf[msg.sender] -= a;
        balanceOf[to] += a;
    }

    function transferFrom(address f, address to, uint256 a) external {
        allowance[f][msg.sender] -= a;
        balanceOf[f] -= a;
        balanceOf[to] += a;
    }
}

/// @dev transfer returns false without moving anything (transferFrom works, so deposits succeed).
contract FalseOnTransferToken is PlainToken {
    function transfer(address, uint256) public pure override returns (bool) {
        return false;
    }
}

/// @dev Re-enters the escrow from inside transfer and records whether it got in.
contract ReentrantToken is PlainToken {
    RewardEscrow public target;
    bytes public receipt;
    bytes32 public root;
    uint256 public id;
    bool public armed;
    bool public reentered;

    function arm(RewardEscrow t, uint256 escrowId, bytes calldata r, bytes32 rr) external {
        (target, id, receipt, root, armed) = (t, escrowId, r, rr, true);
    }

    function transfer(address to, uint256 a) public override returns (bool) {
        if (armed) {
            armed = false;
            try target.release(id, receipt, root) {
                reentered = true;
            } catch {}
            try target.refund(id) {
                reentered = true;
            } catch {}
        }
        return super.transfer(to, a);
    }
}

/// @dev A broken TRAINING_VERIFY that answers 0x01 to any input.
contract YesVerifier {
    fallback(bytes calldata) external returns (bytes memory) {
        return hex"01";
    }
}

// ---------------------------------------------------------------------- helpers

abstract contract EscrowFixture is TestBase {
    address internal constant PRECOMPILE = 0x0000000000000000000000000000000000001008;
    address internal payer = address(0xA11CE);
    address internal beneficiary = address(0xB0B);
    bytes32 internal constant TASK = keccak256("demo-task");
    address internal constant SPONSOR = address(0x5905);
    bytes32 internal constant SPEC = keccak256("spec"); // the spec hash of every _receipt
    uint256 internal constant CREDITS = 1000; // TASK's total credits at the fixture registry

    RewardEscrow internal escrow;
    PlainToken internal token;
    MockReceiptRegistry internal registry;

    function _deployBase() internal {
        vm.etch(PRECOMPILE, address(new ReceiptVerifier()).code);
        escrow = new RewardEscrow(PRECOMPILE);
        token = new PlainToken();
        registry = new MockReceiptRegistry();
        registry.setBinding(TASK, SPONSOR, CREDITS);
        vm.warp(1_000_000);
    }

    /// The run an escrow of `taskId` at `reg` pays for: SPONSOR's run with spec SPEC, any work.
    function _terms(bytes32 taskId, address reg) internal pure returns (RewardEscrow.RunTerms memory t) {
        t = RewardEscrow.RunTerms({taskId: taskId, registry: reg, sponsor: SPONSOR, specHash: SPEC, minCredits: 0});
    }

    /// A receipt of `taskId` sealed by `reg` on `chainId`, built with RunRoot (whose encoding
    /// is checked against the Python vectors in ReceiptVerifier.t.sol), and its run root.
    function _receipt(bytes32 taskId, address reg, uint256 chainId, uint32 rounds)
        internal
        pure
        returns (bytes memory receipt, bytes32 root)
    {
        return _receipt(taskId, reg, chainId, rounds, "");
    }

    /// The same with a `salt` mixed into the weights and transcripts: another run of the same
    /// task (a forger's receipt, or the registry's real one), with another run root.
    function _receipt(bytes32 taskId, address reg, uint256 chainId, uint32 rounds, bytes memory salt)
        internal
        pure
        returns (bytes memory receipt, bytes32 root)
    {
        bytes32[] memory digests = new bytes32[](rounds);
        bytes32[] memory transcripts = new bytes32[](rounds);
        bytes32 w;
        for (uint32 r = 0; r < rounds; ++r) {
            w = sha256(abi.encodePacked("weights", taskId, r, salt));
            transcripts[r] = sha256(abi.encodePacked("transcript", taskId, r, salt));
            digests[r] = RunRoot.roundDigest(r, w, transcripts[r], 8);
        }
        receipt = RunRoot.encodeReceipt(
            chainId, reg, taskId, keccak256("spec"), w, RunRoot.transcriptRoot(transcripts), rounds, 4, digests
        );
        root = RunRoot.runRoot(receipt);
    }

    /// A receipt of TASK by the fixture's registry, sealed there (the registry's answer from
    /// then on), and its run root.
    function _sealedReceipt(uint32 rounds) internal returns (bytes memory receipt, bytes32 root) {
        (receipt, root) = _receipt(TASK, address(registry), block.chainid, rounds);
        registry.seal(receipt);
    }

    function _deposit(address tok, uint256 amount, bytes32 taskId, address reg, uint64 expiry)
        internal
        returns (uint256 id)
    {
        vm.startPrank(payer);
        IERC20(tok).approve(address(escrow), amount);
        id = escrow.deposit(IERC20(tok), beneficiary, amount, _terms(taskId, reg), expiry);
        vm.stopPrank();
    }
}

// ---------------------------------------------------------------------- unit and fuzz tests

contract RewardEscrowTest is EscrowFixture {
    function setUp() public {
        _deployBase();
        token.mint(payer, 1e30);
    }

    function _state(uint256 id) internal view returns (bytes32) {
        return keccak256(
            abi.encode(
                escrow.getEscrow(id),
                token.balanceOf(address(escrow)),
                token.balanceOf(payer),
                token.balanceOf(beneficiary),
                escrow.escrowCount()
            )
        );
    }

    function testFuzz_releaseWithValidReceipt(uint256 amount, uint8 roundsRaw) public {
        amount = bound(amount, 1, 1e30);
        uint32 rounds = uint32(bound(roundsRaw, 1, 12));
        (bytes memory receipt, bytes32 root) = _sealedReceipt(rounds);
        uint256 id = _deposit(address(token), amount, TASK, address(registry), uint64(block.timestamp + 1 days));
        assertEq(token.balanceOf(address(escrow)), amount, "escrowed");
        assertTrue(escrow.canRelease(id, receipt, root), "canRelease");

        vm.prank(address(0xCAFE)); // anyone may release; the beneficiary is paid
        escrow.release(id, receipt, root);
        assertEq(token.balanceOf(beneficiary), amount, "beneficiary paid");
        assertEq(token.balanceOf(address(escrow)), 0, "escrow empty");
        assertEq(uint256(escrow.getEscrow(id).status), uint256(RewardEscrow.Status.Released), "status");

        bytes32 s = _state(id);
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotOpen.selector, id, RewardEscrow.Status.Released)
        );
        escrow.release(id, receipt, root);
        assertEq(_state(id), s, "second release changed nothing");
    }

    function test_release_refusesAnotherSponsorsRun() public {
        (bytes memory receipt, bytes32 root) = _sealedReceipt(2);
        RewardEscrow.RunTerms memory t = _terms(TASK, address(registry));
        t.sponsor = address(0xA77AC);
        vm.startPrank(payer);
        token.approve(address(escrow), 1e18);
        uint256 id = escrow.deposit(token, beneficiary, 1e18, t, uint64(block.timestamp + 100));
        vm.stopPrank();
        assertTrue(!escrow.canRelease(id, receipt, root), "canRelease says no");
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__SponsorMismatch.selector, address(0xA77AC), SPONSOR)
        );
        escrow.release(id, receipt, root);
    }

    function test_release_refusesAnotherSpec() public {
        (bytes memory receipt, bytes32 root) = _sealedReceipt(2);
        RewardEscrow.RunTerms memory t = _terms(TASK, address(registry));
        t.specHash = keccak256("the spec the payer wanted");
        vm.startPrank(payer);
        token.approve(address(escrow), 1e18);
        uint256 id = escrow.deposit(token, beneficiary, 1e18, t, uint64(block.timestamp + 100));
        vm.stopPrank();
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__SpecMismatch.selector, t.specHash, SPEC));
        escrow.release(id, receipt, root);
    }

    function testFuzz_release_needsMinimumWork(uint256 minCredits) public {
        minCredits = bound(minCredits, 0, 2 * CREDITS);
        (bytes memory receipt, bytes32 root) = _sealedReceipt(2);
        RewardEscrow.RunTerms memory t = _terms(TASK, address(registry));
        t.minCredits = minCredits;
        vm.startPrank(payer);
        token.approve(address(escrow), 1e18);
        uint256 id = escrow.deposit(token, beneficiary, 1e18, t, uint64(block.timestamp + 100));
        vm.stopPrank();
        if (minCredits > CREDITS) {
            vm.expectRevert(
                abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotEnoughWork.selector, minCredits, CREDITS)
            );
            escrow.release(id, receipt, root);
            assertTrue(escrow.getEscrow(id).status == RewardEscrow.Status.Open, "still open");
        } else {
            escrow.release(id, receipt, root);
            assertEq(token.balanceOf(beneficiary), 1e18, "paid");
        }
    }

    function test_depositWithoutRegistry_reverts() public {
        uint256 payerBefore = token.balanceOf(payer);
        vm.startPrank(payer);
        token.approve(address(escrow), 5e18);
        bytes32 s = _state(0);
        vm.expectRevert(RewardEscrow.RewardEscrow__RegistryRequired.selector);
        escrow.deposit(token, beneficiary, 5e18, _terms(TASK, address(0)), uint64(block.timestamp + 10));
        vm.stopPrank();
        assertEq(_state(0), s, "nothing changed");
        assertEq(escrow.escrowCount(), 0, "no escrow");
        assertEq(token.balanceOf(payer), payerBefore, "payer kept the tokens");
        assertEq(token.balanceOf(address(escrow)), 0, "escrow holds nothing");
    }

    /// The attack the anchor stops: anyone builds a self-consistent receipt for the escrow's
    /// task, chain and registry; the verifier accepts it, but the registry never sealed it.
    function testFuzz_forgedReceipt_verifierAccepts_registryNeverSealed(uint8 roundsRaw, bytes32 salt) public {
        uint32 rounds = uint32(bound(roundsRaw, 1, 8));
        (bytes memory forged, bytes32 forgedRoot) =
            _receipt(TASK, address(registry), block.chainid, rounds, abi.encode(salt));
        assertTrue(TrainingVerify.verifyAt(PRECOMPILE, forged, forgedRoot), "the verifier accepts the forgery");
        uint256 id = _deposit(address(token), 9e18, TASK, address(registry), uint64(block.timestamp + 100));
        bytes32 s = _state(id);

        assertTrue(!escrow.canRelease(id, forged, forgedRoot), "canRelease refuses");
        vm.prank(address(0xBAD));
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotSealed.selector, address(registry), TASK)
        );
        escrow.release(id, forged, forgedRoot);
        assertEq(_state(id), s, "forgery changed nothing");

        // Once the registry seals the real run, the forgery is still refused and the real one pays.
        (bytes memory real, bytes32 realRoot) = _sealedReceipt(3);
        vm.assume(realRoot != forgedRoot);
        assertTrue(!escrow.canRelease(id, forged, forgedRoot), "canRelease still refuses");
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__RunRootMismatch.selector, realRoot, forgedRoot)
        );
        escrow.release(id, forged, forgedRoot);
        assertEq(_state(id), s, "forgery after seal changed nothing");
        escrow.release(id, real, realRoot);
        assertEq(token.balanceOf(beneficiary), 9e18, "paid on the sealed receipt");
    }

    /// A registry address without code (a typo, an EOA) can never seal anything: release and
    /// canRelease refuse cleanly, and the payer gets the tokens back after expiry.
    function test_registryWithoutCode_neverReleases() public {
        address eoa = address(0xBEEF);
        (bytes memory receipt, bytes32 root) = _receipt(TASK, eoa, block.chainid, 2);
        uint256 id = _deposit(address(token), 4e18, TASK, eoa, uint64(block.timestamp + 100));
        bytes32 s = _state(id);
        assertTrue(!escrow.canRelease(id, receipt, root), "canRelease");
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotSealed.selector, eoa, TASK));
        escrow.release(id, receipt, root);
        assertEq(_state(id), s, "nothing changed");
        uint256 payerBefore = token.balanceOf(payer);
        vm.warp(block.timestamp + 100);
        escrow.refund(id);
        assertEq(token.balanceOf(payer), payerBefore + 4e18, "refunded");
    }

    /// Even with a verifier that accepts everything, the anchor alone refuses what the registry
    /// did not seal; and a registry answering a zero run root counts as "not sealed", also for
    /// a zero claimed root (canRelease must not read 0 == 0 as a match).
    function test_brokenVerifier_anchorStillRefuses() public {
        RewardEscrow e2 = new RewardEscrow(address(new YesVerifier()));
        (bytes memory receipt, bytes32 root) = _receipt(TASK, address(registry), block.chainid, 1);
        vm.startPrank(payer);
        token.approve(address(e2), 1e18);
        uint256 id = e2.deposit(token, beneficiary, 1e18, _terms(TASK, address(registry)), uint64(block.timestamp + 100));
        vm.stopPrank();

        // not sealed at all
        assertTrue(!e2.canRelease(id, receipt, root), "canRelease, unsealed");
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotSealed.selector, address(registry), TASK)
        );
        e2.release(id, receipt, root);

        // "sealed" with a zero run root, claimed root zero
        ITrainingRegistryTypes.TrainingReceipt memory r;
        r.taskId = TASK;
        registry.setReceipt(r, receipt);
        assertTrue(!e2.canRelease(id, receipt, bytes32(0)), "canRelease on a zero root");
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotSealed.selector, address(registry), TASK)
        );
        e2.release(id, receipt, bytes32(0));

        // sealed with the real root: a claimed root that is not it is refused even though
        // this verifier accepts it
        registry.seal(receipt);
        assertTrue(!e2.canRelease(id, receipt, ~root), "canRelease on another root");
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__RunRootMismatch.selector, root, ~root)
        );
        e2.release(id, receipt, ~root);
        assertEq(token.balanceOf(address(e2)), 1e18, "still held");
        e2.release(id, receipt, root);
        assertEq(token.balanceOf(beneficiary), 1e18, "paid on the sealed root");
    }

    function test_releaseRejections_leaveStateUnchanged() public {
        (bytes memory receipt, bytes32 root) = _receipt(TASK, address(registry), block.chainid, 2);
        uint256 id = _deposit(address(token), 7e18, TASK, address(registry), uint64(block.timestamp + 100));
        bytes32 s = _state(id);

        // wrong root: verifier answers 0x00
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__ReceiptRejected.selector, PRECOMPILE, ~root)
        );
        escrow.release(id, receipt, ~root);
        assertEq(_state(id), s, "wrong root");

        // valid receipt but the registry has not sealed the task
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotSealed.selector, address(registry), TASK)
        );
        escrow.release(id, receipt, root);
        assertEq(_state(id), s, "not sealed");

        // the registry sealed another run of the task (the receipt given is a forgery)
        {
            (bytes memory realReceipt, bytes32 realRoot) =
                _receipt(TASK, address(registry), block.chainid, 2, "real run");
            registry.seal(realReceipt);
            vm.expectRevert(
                abi.encodeWithSelector(RewardEscrow.RewardEscrow__RunRootMismatch.selector, realRoot, root)
            );
            escrow.release(id, receipt, root);
            assertEq(_state(id), s, "root mismatch");
            assertTrue(!escrow.canRelease(id, receipt, root), "canRelease on root mismatch");
        }
        registry.seal(receipt);
        assertTrue(escrow.canRelease(id, receipt, root), "canRelease once sealed");

        // receipt of another task
        bytes32 other = keccak256("other-task");
        (bytes memory r2, bytes32 root2) = _receipt(other, address(registry), block.chainid, 2);
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__TaskMismatch.selector, TASK, other));
        escrow.release(id, r2, root2);
        assertEq(_state(id), s, "other task");

        // receipt of another chain
        (bytes memory r3, bytes32 root3) = _receipt(TASK, address(registry), 1, 2);
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__ChainMismatch.selector, block.chainid, uint256(1))
        );
        escrow.release(id, r3, root3);
        assertEq(_state(id), s, "other chain");

        // receipt of another registry
        (bytes memory r4, bytes32 root4) = _receipt(TASK, address(0xDEAD), block.chainid, 2);
        vm.expectRevert(
            abi.encodeWithSelector(
                RewardEscrow.RewardEscrow__RegistryMismatch.selector, address(registry), address(0xDEAD)
            )
        );
        escrow.release(id, r4, root4);
        assertEq(_state(id), s, "other registry");

        // malformed bytes
        bytes memory cut = new bytes(receipt.length - 1);
        for (uint256 i = 0; i < cut.length; ++i) {
            cut[i] = receipt[i];
        }
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__MalformedReceipt.selector, cut.length));
        escrow.release(id, cut, root);
        assertEq(_state(id), s, "malformed");

        // unknown escrow
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__UnknownEscrow.selector, uint256(99)));
        escrow.release(99, receipt, root);

        // expired
        vm.warp(block.timestamp + 100);
        vm.expectRevert(
            abi.encodeWithSelector(
                RewardEscrow.RewardEscrow__Expired.selector, id, uint64(block.timestamp)
            )
        );
        escrow.release(id, receipt, root);
        assertEq(_state(id), s, "expired");
        assertTrue(!escrow.canRelease(id, receipt, root), "canRelease after expiry");
    }

    function test_verifierMissing_rejects() public {
        // An escrow pointing at an address with no code: empty return data = invalid.
        RewardEscrow e2 = new RewardEscrow(address(0x1009));
        (bytes memory receipt, bytes32 root) = _sealedReceipt(1);
        vm.startPrank(payer);
        token.approve(address(e2), 1e18);
        uint256 id = e2.deposit(token, beneficiary, 1e18, _terms(TASK, address(registry)), uint64(block.timestamp + 10));
        vm.stopPrank();
        vm.expectRevert(
            abi.encodeWithSelector(RewardEscrow.RewardEscrow__ReceiptRejected.selector, address(0x1009), root)
        );
        e2.release(id, receipt, root);
    }

    function testFuzz_refundOnlyAfterExpiry(uint256 amount, uint32 wait) public {
        amount = bound(amount, 1, 1e30);
        uint64 expiry = uint64(block.timestamp + 1 hours);
        uint256 id = _deposit(address(token), amount, TASK, address(registry), expiry);
        uint256 payerBefore = token.balanceOf(payer);
        uint256 t = bound(wait, 0, 2 hours);
        vm.warp(block.timestamp + t);
        if (block.timestamp < expiry) {
            bytes32 s = _state(id);
            vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotExpired.selector, id, expiry));
            escrow.refund(id);
            assertEq(_state(id), s, "early refund changed state");
        } else {
            escrow.refund(id);
            assertEq(token.balanceOf(payer), payerBefore + amount, "payer refunded");
            vm.expectRevert(
                abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotOpen.selector, id, RewardEscrow.Status.Refunded)
            );
            escrow.refund(id);
        }
    }

    function test_depositReverts_leaveStateUnchanged() public {
        uint64 exp = uint64(block.timestamp + 1);
        vm.startPrank(payer);
        token.approve(address(escrow), 10);
        bytes32 s = _state(0);
        address reg = address(registry);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroAddress.selector);
        escrow.deposit(IERC20(address(0)), beneficiary, 1, _terms(TASK, reg), exp);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroAddress.selector);
        escrow.deposit(token, address(0), 1, _terms(TASK, reg), exp);
        vm.expectRevert(RewardEscrow.RewardEscrow__RegistryRequired.selector);
        escrow.deposit(token, beneficiary, 1, _terms(TASK, address(0)), exp);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroAmount.selector);
        escrow.deposit(token, beneficiary, 0, _terms(TASK, reg), exp);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroTaskId.selector);
        escrow.deposit(token, beneficiary, 1, _terms(bytes32(0), reg), exp);
        RewardEscrow.RunTerms memory unbound = _terms(TASK, reg);
        unbound.sponsor = address(0);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroAddress.selector);
        escrow.deposit(token, beneficiary, 1, unbound, exp);
        unbound = _terms(TASK, reg);
        unbound.specHash = bytes32(0);
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroSpecHash.selector);
        escrow.deposit(token, beneficiary, 1, unbound, exp);
        vm.expectRevert(
            abi.encodeWithSelector(
                RewardEscrow.RewardEscrow__ExpiryNotInFuture.selector, uint64(block.timestamp), block.timestamp
            )
        );
        escrow.deposit(token, beneficiary, 1, _terms(TASK, reg), uint64(block.timestamp));
        vm.stopPrank();
        assertEq(_state(0), s, "nothing changed");
        vm.expectRevert(RewardEscrow.RewardEscrow__ZeroAddress.selector);
        new RewardEscrow(address(0));
    }

    function test_feeOnTransferToken_escrowsWhatArrived() public {
        FeeToken fee = new FeeToken();
        fee.mint(payer, 1000);
        uint256 id = _deposit(address(fee), 1000, TASK, address(registry), uint64(block.timestamp + 10));
        assertEq(escrow.getEscrow(id).amount, 990, "recorded amount = received");
        (bytes memory receipt, bytes32 root) = _sealedReceipt(1);
        escrow.release(id, receipt, root);
        assertEq(fee.balanceOf(address(escrow)), 0, "escrow holds nothing after release");
        assertEq(fee.balanceOf(beneficiary), 990 - 9, "beneficiary got 990 minus the fee");
    }

    function test_noReturnToken_works() public {
        NoReturnToken nr = new NoReturnToken();
        nr.mint(payer, 500);
        vm.prank(payer);
        nr.approve(address(escrow), 500);
        vm.prank(payer);
        uint256 id =
            escrow.deposit(IERC20(address(nr)), beneficiary, 500, _terms(TASK, address(registry)), uint64(block.timestamp + 5));
        (bytes memory receipt, bytes32 root) = _sealedReceipt(1);
        escrow.release(id, receipt, root);
        assertEq(nr.balanceOf(beneficiary), 500, "paid");
    }

    function test_falseReturningToken_revertsAndKeepsEscrowOpen() public {
        FalseOnTransferToken ft = new FalseOnTransferToken();
        ft.mint(payer, 500);
        uint256 id = _deposit(address(ft), 500, TASK, address(registry), uint64(block.timestamp + 5));
        (bytes memory receipt, bytes32 root) = _sealedReceipt(1);
        vm.expectRevert();
        escrow.release(id, receipt, root);
        assertEq(uint256(escrow.getEscrow(id).status), uint256(RewardEscrow.Status.Open), "still open");
        assertEq(ft.balanceOf(address(escrow)), 500, "still held");
    }

    function test_reentrantToken_cannotReenter() public {
        ReentrantToken rt = new ReentrantToken();
        rt.mint(payer, 1000);
        uint256 id = _deposit(address(rt), 1000, TASK, address(registry), uint64(block.timestamp + 5));
        (bytes memory receipt, bytes32 root) = _sealedReceipt(1);
        rt.arm(escrow, id, receipt, root);
        escrow.release(id, receipt, root);
        assertTrue(!rt.reentered(), "re-entry blocked");
        assertEq(rt.balanceOf(beneficiary), 1000, "paid once");
        assertEq(rt.balanceOf(address(escrow)), 0, "nothing left");
    }
}

// ---------------------------------------------------------------------- invariant

/// @dev Random deposits (some without a registry, which must revert), releases (on the sealed
/// receipt, another task's, or an unsealed forgery), refunds and time jumps on several escrows.
contract EscrowHandler is EscrowFixture {
    uint256 public paidOut;
    uint256 public deposited;
    uint256 public releases;
    uint256 public refunds;
    bool public forgedPaid;
    bool public unanchoredDeposit;
    mapping(uint256 => uint256) public closedCount;
    bytes internal receipt;
    bytes32 internal root;
    bytes internal otherReceipt;
    bytes32 internal otherRoot;
    bytes internal forgedReceipt;
    bytes32 internal forgedRoot;

    constructor() {
        _deployBase();
        token.mint(payer, type(uint128).max);
        (receipt, root) = _sealedReceipt(3);
        // sealed, but for another task
        (otherReceipt, otherRoot) = _receipt(keccak256("other"), address(registry), block.chainid, 2);
        registry.seal(otherReceipt);
        // this task, this chain, this registry, accepted by the verifier, never sealed
        (forgedReceipt, forgedRoot) = _receipt(TASK, address(registry), block.chainid, 3, "forged");
    }

    function escrowAddr() external view returns (address) {
        return address(escrow);
    }

    function tokenAddr() external view returns (address) {
        return address(token);
    }

    function deposit(uint96 amount, uint16 life, bool named) external {
        uint256 a = bound(amount, 1, 1e27);
        address reg = named ? address(registry) : address(0);
        vm.startPrank(payer);
        token.approve(address(escrow), a);
        try escrow.deposit(token, beneficiary, a, _terms(TASK, reg), uint64(block.timestamp + 1 + life)) {
            deposited += a;
            if (!named) unanchoredDeposit = true;
        } catch {}
        vm.stopPrank();
    }

    /// which: 0 the sealed receipt, 1 a sealed receipt of another task, 2 an unsealed forgery.
    function release(uint256 idRaw, uint8 which) external {
        uint256 n = escrow.escrowCount();
        if (n == 0) return;
        uint256 id = idRaw % n;
        which %= 3;
        (bytes memory r, bytes32 rr) =
            which == 0 ? (receipt, root) : which == 1 ? (otherReceipt, otherRoot) : (forgedReceipt, forgedRoot);
        uint256 before = token.balanceOf(beneficiary);
        try escrow.release(id, r, rr) {
            uint256 got = token.balanceOf(beneficiary) - before;
            paidOut += got;
            releases++;
            closedCount[id]++;
            if (which != 0) forgedPaid = true;
        } catch {}
    }

    function refund(uint256 idRaw) external {
        uint256 n = escrow.escrowCount();
        if (n == 0) return;
        uint256 id = idRaw % n;
        uint256 before = token.balanceOf(payer);
        try escrow.refund(id) {
            paidOut += token.balanceOf(payer) - before;
            refunds++;
            closedCount[id]++;
        } catch {}
    }

    function warp(uint16 dt) external {
        vm.warp(block.timestamp + dt);
    }
}

contract RewardEscrowInvariantTest is TestBase {
    EscrowHandler internal handler;

    function setUp() public {
        handler = new EscrowHandler();
    }

    /// forge reads the fuzzed targets from this function (forge-std's StdInvariant has the same).
    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(handler);
    }

    /// Tokens are conserved: held = deposited - paid out, and held = sum of open escrows.
    function invariant_conservation() public view {
        RewardEscrow e = RewardEscrow(handler.escrowAddr());
        IERC20 tok = IERC20(handler.tokenAddr());
        uint256 held = tok.balanceOf(address(e));
        assertEq(held, handler.deposited() - handler.paidOut(), "held = deposited - paid");
        uint256 open;
        uint256 n = e.escrowCount();
        for (uint256 i = 0; i < n; ++i) {
            RewardEscrow.Escrow memory x = e.getEscrow(i);
            if (x.status == RewardEscrow.Status.Open) open += x.amount;
            assertTrue(handler.closedCount(i) <= 1, "an escrow was paid twice");
        }
        assertEq(held, open, "held = sum of open escrows");
        assertTrue(!handler.forgedPaid(), "paid on another task's or an unsealed receipt");
        assertTrue(!handler.unanchoredDeposit(), "a deposit without a registry was accepted");
    }
}

// ---------------------------------------------------------------------- gas probe

/// @dev Gas of one `release` against MockReceiptRegistry (printed with -vv; measured inside
/// the test transaction, so the escrow, token and registry are already warm: compare runs,
/// not absolute transaction cost).
contract RewardEscrowGasTest is EscrowFixture {
    event log_named_uint(string key, uint256 val);

    function setUp() public {
        _deployBase();
        token.mint(payer, 10e18);
        token.mint(beneficiary, 1); // a non-zero balance: the transfer costs the same each run
    }

    function _releaseGas(uint32 rounds) internal returns (uint256 g) {
        (bytes memory receipt, bytes32 root) = _sealedReceipt(rounds);
        uint256 id = _deposit(address(token), 5e18, TASK, address(registry), uint64(block.timestamp + 10));
        g = gasleft();
        escrow.release(id, receipt, root);
        g -= gasleft();
        assertEq(token.balanceOf(beneficiary), 5e18 + 1, "paid");
    }

    function test_gas_release_R1() public {
        emit log_named_uint("release gas, R = 1", _releaseGas(1));
    }

    function test_gas_release_R16() public {
        emit log_named_uint("release gas, R = 16", _releaseGas(16));
    }
}
