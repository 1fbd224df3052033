// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {RegistryBase} from "./RegistryBase.sol";

/// @notice Enrollment policy (issue #26): a sponsor may post a tier 1 (Allowlist) run that only
/// the addresses it allows can enroll in, so sybils cannot take every slot of its run and bank
/// no-work payloads for its pool. Open runs (tier 0) are unchanged.
contract EnrollmentPolicyTest is RegistryBase {
    bytes32 internal constant ID = keccak256("allowlist");
    uint256 internal constant POOL = 1_000e18;

    function setUp() public {
        _deploy();
    }

    function _postAllowlist(uint16 m, uint16 k) internal {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, m, k, 2, 3, POOL);
        p.tier = 1;
        _post(p);
    }

    function _allow(uint256 from, uint256 n) internal {
        address[] memory a = new address[](n);
        for (uint256 i = 0; i < n; ++i) {
            a[i] = trainers[from + i];
        }
        vm.prank(sponsor);
        reg.allowTrainers(ID, a);
    }

    function _expectNotAllowed(uint256 i) internal {
        _fund(trainers[i], MIN_STAKE);
        vm.prank(trainers[i]);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotAllowed.selector, ID, trainers[i]));
        reg.enrollTrainer(ID, MIN_STAKE, "did:tenzro:sybil");
    }

    /// Before: sybils enrolled in every slot of an Open run the moment it was posted (and then
    /// forced all-zero payloads the syncer had to accept, taking the pool). In an Allowlist run
    /// nobody enrolls before the sponsor allows, the sybils are refused, the allowed trainers take
    /// the slots and round 0 opens with them alone.
    function test_sybilFill_failsUnderAnAllowlist() public {
        _postAllowlist(4, 3);
        for (uint256 i = 8; i < 12; ++i) {
            _expectNotAllowed(i); // the sybils race the sponsor's allowTrainers, and lose
        }
        _allow(0, 4);
        for (uint256 i = 8; i < 12; ++i) {
            _expectNotAllowed(i); // still refused after the list is in place
        }
        for (uint256 i = 0; i < 4; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        ITrainingRegistryTypes.RunView memory v = reg.getRun(ID);
        assertTrue(v.status == ITrainingRegistryTypes.RunStatus.Training, "round 0 open with the allowed four");
        address[] memory enrolled = reg.trainersOf(ID);
        for (uint256 i = 0; i < 4; ++i) {
            assertEq(enrolled[i], trainers[i], "only allowed trainers hold slots");
        }
        assertEq(token.balanceOf(trainers[8]), 2 * MIN_STAKE, "a refused sybil keeps its tokens (funded twice)");
    }

    function test_allowTrainers_onlyTheSponsor_onlyAllowlistRuns_onlyWhileEnrolling() public {
        _postAllowlist(2, 2);
        address[] memory a = new address[](1);
        a[0] = trainers[9];
        vm.prank(trainers[9]);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotSponsor.selector, ID, trainers[9]));
        reg.allowTrainers(ID, a); // a sybil cannot put itself on the list
        _allow(0, 2);
        _enroll(ID, 0, MIN_STAKE);
        _enroll(ID, 1, MIN_STAKE); // the M-th: Training
        vm.prank(sponsor);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__WrongStatus.selector, ID, ITrainingRegistryTypes.RunStatus.Training
            )
        );
        reg.allowTrainers(ID, a);

        bytes32 open = keccak256("open");
        _post(_params(open, 2, 2, 2, 3, POOL));
        vm.prank(sponsor);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__UnsupportedTier.selector, uint8(0)));
        reg.allowTrainers(open, a); // an Open run has no list: anyone may enroll
        _enroll(open, 9, MIN_STAKE);
    }

    function test_unknownTierIsRefused() public {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 2, 2, 2, 3, POOL);
        p.tier = 2;
        _fund(sponsor, POOL);
        vm.prank(sponsor);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__UnsupportedTier.selector, uint8(2)));
        reg.postTask(p);
    }
}
