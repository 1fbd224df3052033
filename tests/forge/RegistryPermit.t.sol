// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryPermit} from "../../contracts/interfaces/ITrainingRegistryPermit.sol";
import {TenzroToken} from "../../contracts/TenzroToken.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {RegistryBase} from "./RegistryBase.sol";

/// @notice postTaskWithPermit / enrollTrainerWithPermit (ITrainingRegistryPermit) on a registry
/// whose token is TenzroToken (ERC20Permit): one transaction, no allowance left; a front-run
/// permit does not block the call; an expired, foreign or missing permit is refused by the
/// allowance check; a failed run check undoes the permit. The base's MockERC20 registry (no
/// permit) shows the fallback to a plain allowance.
contract RegistryPermitTest is RegistryBase {
    bytes32 internal constant ID = keccak256("permit-task");
    bytes32 internal constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");
    uint256 internal constant SPONSOR_KEY = 0x5905;
    uint256 internal constant POOL = 1_000e18;

    TenzroToken internal tnzo;
    ITrainingRegistryFull internal preg;
    ITrainingRegistryPermit internal pp;
    address internal payer;

    function setUp() public {
        _deploy(); // the MockERC20 registry `reg` (no permit) and the trainer keys
        tnzo = new TenzroToken(0);
        preg = deployRegistry(tnzo, MIN_SYNCER_STAKE, SYNCER_TIMEOUT, 0);
        pp = ITrainingRegistryPermit(address(preg));
        payer = vm.addr(SPONSOR_KEY);
        tnzo.mint(payer, POOL);
        for (uint256 i = 0; i < 4; ++i) {
            tnzo.mint(trainers[i], MIN_STAKE);
        }
    }

    // ------------------------------------------------------------ helpers

    /// @dev `key`'s permit for `spender` to pull `value` until `deadline`, at its current nonce.
    function _sign(uint256 key, address spender, uint256 value, uint256 deadline)
        internal
        view
        returns (uint8 v, bytes32 r, bytes32 s)
    {
        address owner = vm.addr(key);
        bytes32 structHash =
            keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, tnzo.nonces(owner), deadline));
        return vm.sign(key, keccak256(abi.encodePacked("\x19\x01", tnzo.DOMAIN_SEPARATOR(), structHash)));
    }

    function _postWithPermit(ITrainingRegistryTypes.TaskParams memory p, uint256 deadline) internal {
        (uint8 v, bytes32 r, bytes32 s) = _sign(SPONSOR_KEY, address(preg), p.rewardPool, deadline);
        vm.prank(payer);
        pp.postTaskWithPermit(p, deadline, v, r, s);
        vm.prank(payer); // the sponsor commits the run's round state before anyone may enroll
        preg.useRootFlow(p.taskId, F0, _outer());
    }

    function _enrollWithPermit(uint256 i, uint256 stake) internal {
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(keys[i], address(preg), stake, deadline);
        vm.prank(trainers[i]);
        pp.enrollTrainerWithPermit(ID, stake, "did:tenzro:trainer", deadline, v, r, s);
    }

    // ------------------------------------------------------------ post

    function test_postTaskWithPermit_escrowsPoolAndLeavesNoAllowance() public {
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        ITrainingRegistryTypes.RunView memory v = preg.getRun(ID);
        assertTrue(v.status == ITrainingRegistryTypes.RunStatus.Enrolling, "enrolling");
        assertEq(v.sponsor, payer, "sponsor is the permit's signer");
        assertEq(v.rewardPool, POOL, "pool");
        assertEq(tnzo.balanceOf(address(preg)), POOL, "pool escrowed");
        assertEq(tnzo.allowance(payer, address(preg)), 0, "no allowance left");
        assertEq(tnzo.nonces(payer), 1, "permit used");
    }

    function test_postTaskWithPermit_frontRunPermitDoesNotBlock() public {
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(SPONSOR_KEY, address(preg), POOL, deadline);
        // someone copies the permit from the mempool and submits it first
        vm.prank(relayer);
        tnzo.permit(payer, address(preg), POOL, deadline, v, r, s);
        vm.prank(payer);
        pp.postTaskWithPermit(_params(ID, 3, 2, 2, 2, POOL), deadline, v, r, s);
        assertEq(tnzo.balanceOf(address(preg)), POOL, "posted anyway");
        assertEq(tnzo.allowance(payer, address(preg)), 0, "no allowance left");
    }

    function test_postTaskWithPermit_expiredPermitReverts() public {
        uint256 deadline = block.timestamp + 60;
        (uint8 v, bytes32 r, bytes32 s) = _sign(SPONSOR_KEY, address(preg), POOL, deadline);
        vm.warp(deadline + 1);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__AllowanceTooLow.selector, payer, 0, POOL)
        );
        vm.prank(payer);
        pp.postTaskWithPermit(_params(ID, 3, 2, 2, 2, POOL), deadline, v, r, s);
    }

    function test_postTaskWithPermit_expiredPermitButApprovedGoesOn() public {
        uint256 deadline = block.timestamp + 60;
        (uint8 v, bytes32 r, bytes32 s) = _sign(SPONSOR_KEY, address(preg), POOL, deadline);
        vm.warp(deadline + 1);
        vm.prank(payer);
        tnzo.approve(address(preg), POOL);
        vm.prank(payer);
        pp.postTaskWithPermit(_params(ID, 3, 2, 2, 2, POOL), deadline, v, r, s);
        assertEq(tnzo.allowance(payer, address(preg)), 0, "approval spent whole");
    }

    function test_postTaskWithPermit_foreignSignatureReverts() public {
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(keys[0], address(preg), POOL, deadline); // not the sponsor's
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__AllowanceTooLow.selector, payer, 0, POOL)
        );
        vm.prank(payer);
        pp.postTaskWithPermit(_params(ID, 3, 2, 2, 2, POOL), deadline, v, r, s);
    }

    function test_postTaskWithPermit_refusedTaskUndoesPermit() public {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 3, 4, 2, 2, POOL); // quorum > M
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(SPONSOR_KEY, address(preg), POOL, deadline);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__QuorumExceedsTrainers.selector, 4, 3)
        );
        vm.prank(payer);
        pp.postTaskWithPermit(p, deadline, v, r, s);
        assertEq(tnzo.allowance(payer, address(preg)), 0, "no allowance");
        assertEq(tnzo.nonces(payer), 0, "permit not consumed");
    }

    // ------------------------------------------------------------ enroll

    function test_enrollTrainerWithPermit_enrollsOpensRoundAndLeavesNoAllowance() public {
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        for (uint256 i = 0; i < 3; ++i) {
            _enrollWithPermit(i, MIN_STAKE);
            assertEq(tnzo.allowance(trainers[i], address(preg)), 0, "no allowance left");
            assertEq(preg.trainerMetrics(ID, trainers[i]).stake, MIN_STAKE, "stake");
        }
        ITrainingRegistryTypes.RunView memory v = preg.getRun(ID);
        assertTrue(v.status == ITrainingRegistryTypes.RunStatus.Training, "M-th enrollment opens round 0");
        assertEq(v.stakeHeld, 3 * MIN_STAKE, "stakes held");
        assertEq(tnzo.balanceOf(address(preg)), POOL + 3 * MIN_STAKE, "pool + stakes");
    }

    function testFuzz_enrollTrainerWithPermit_pullsExactStake(uint256 stake) public {
        stake = bound(stake, MIN_STAKE, 1e30);
        tnzo.mint(trainers[0], stake);
        uint256 before = tnzo.balanceOf(trainers[0]);
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        _enrollWithPermit(0, stake);
        assertEq(before - tnzo.balanceOf(trainers[0]), stake, "pulled exactly the stake");
        assertEq(tnzo.allowance(trainers[0], address(preg)), 0, "no allowance left");
    }

    function test_enrollTrainerWithPermit_frontRunPermitDoesNotBlock() public {
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(keys[1], address(preg), MIN_STAKE, deadline);
        vm.prank(relayer);
        tnzo.permit(trainers[1], address(preg), MIN_STAKE, deadline, v, r, s);
        vm.prank(trainers[1]);
        pp.enrollTrainerWithPermit(ID, MIN_STAKE, "did:tenzro:trainer", deadline, v, r, s);
        assertTrue(preg.trainerMetrics(ID, trainers[1]).enrolled, "enrolled");
        assertEq(tnzo.allowance(trainers[1], address(preg)), 0, "no allowance left");
    }

    function test_enrollTrainerWithPermit_expiredPermitReverts() public {
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        uint256 deadline = block.timestamp + 60;
        (uint8 v, bytes32 r, bytes32 s) = _sign(keys[0], address(preg), MIN_STAKE, deadline);
        vm.warp(deadline + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__AllowanceTooLow.selector, trainers[0], 0, MIN_STAKE
            )
        );
        vm.prank(trainers[0]);
        pp.enrollTrainerWithPermit(ID, MIN_STAKE, "did:tenzro:trainer", deadline, v, r, s);
    }

    function test_enrollTrainerWithPermit_refusedEnrollmentUndoesPermit() public {
        _postWithPermit(_params(ID, 3, 2, 2, 2, POOL), block.timestamp + 600);
        uint256 deadline = block.timestamp + 600;
        (uint8 v, bytes32 r, bytes32 s) = _sign(keys[0], address(preg), MIN_STAKE, deadline);
        vm.expectRevert(ITrainingRegistryTypes.Registry__EmptyDid.selector);
        vm.prank(trainers[0]);
        pp.enrollTrainerWithPermit(ID, MIN_STAKE, "", deadline, v, r, s);
        assertEq(tnzo.allowance(trainers[0], address(preg)), 0, "no allowance");
        assertEq(tnzo.nonces(trainers[0]), 0, "permit not consumed");
    }

    // ------------------------------------------------------------ a token without permit

    function test_withPermit_onTokenWithoutPermit_usesAllowance() public {
        ITrainingRegistryPermit plain = ITrainingRegistryPermit(address(reg));
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 3, 2, 2, 2, POOL);
        token.mint(sponsor, POOL);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__AllowanceTooLow.selector, sponsor, 0, POOL)
        );
        vm.prank(sponsor);
        plain.postTaskWithPermit(p, block.timestamp + 600, 27, bytes32(0), bytes32(0));
        vm.prank(sponsor);
        token.approve(address(reg), POOL);
        vm.prank(sponsor);
        plain.postTaskWithPermit(p, block.timestamp + 600, 27, bytes32(0), bytes32(0));
        assertEq(token.balanceOf(address(reg)), POOL, "posted on the allowance");
        assertEq(token.allowance(sponsor, address(reg)), 0, "allowance spent");
    }
}
