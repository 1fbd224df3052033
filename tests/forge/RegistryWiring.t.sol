// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {TrainingRegistry} from "../../contracts/TrainingRegistry.sol";
import {RegistryEvidence} from "../../contracts/RegistryEvidence.sol";
import {RegistryRounds} from "../../contracts/RegistryRounds.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";
import {TestBase} from "./lib/Cheats.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";

/// @notice The registry's modules are deployed before it (EIP-3860: its init code cannot hold
/// their code) and run on its storage by delegatecall, with their own immutables: a module
/// deployed with another token, fee, stake or timeout than the registry's must not be wired in
/// (bonds pulled in another token, another stake rule for cancelStalledRun, ...).
contract RegistryWiringTest is TestBase {
    uint256 internal constant STAKE = 100e18;
    uint32 internal constant TIMEOUT = 60;
    uint256 internal constant FEE = 1e15;

    MockERC20 internal token;
    MockERC20 internal other;
    address internal rounds;

    function setUp() public {
        token = new MockERC20();
        other = new MockERC20();
        rounds = address(new RegistryRounds(token, FEE));
    }

    function _mismatch(address module) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ModuleMismatch.selector, module);
    }

    /// RegistryRounds pulls challengeSlot bonds in its own token: before the check, a rounds
    /// module of another token was taken and a slot challenge's bond left the registry's books.
    function test_roundsOfOtherToken_refused() public {
        address wrong = address(new RegistryRounds(other, FEE));
        vm.expectRevert(_mismatch(wrong));
        new RegistryEvidence(token, FEE, wrong, STAKE, TIMEOUT);
    }

    function test_roundsOfOtherFee_refused() public {
        address wrong = address(new RegistryRounds(token, FEE + 1));
        vm.expectRevert(_mismatch(wrong));
        new RegistryEvidence(token, FEE, wrong, STAKE, TIMEOUT);
    }

    function test_roundsWithoutCode_refused() public {
        vm.expectRevert(ITrainingRegistryTypes.Registry__ZeroAddress.selector);
        new RegistryEvidence(token, FEE, address(0xdead), STAKE, TIMEOUT);
    }

    /// Any one of the four parameters differing between the registry and its RegistryEvidence
    /// refuses the registry.
    function testFuzz_evidenceOfOtherParameters_refused(uint8 which, uint256 delta) public {
        delta = 1 + (delta % 1e18);
        which = which % 4;
        IERC20 t = which == 0 ? IERC20(address(other)) : IERC20(address(token));
        address r = which == 0 ? address(new RegistryRounds(other, FEE)) : rounds;
        uint256 fee = which == 1 ? FEE + delta : FEE;
        if (which == 1) r = address(new RegistryRounds(token, fee));
        uint256 stake = which == 2 ? STAKE + delta : STAKE;
        uint32 timeout = which == 3 ? TIMEOUT + uint32(delta % 1000) + 1 : TIMEOUT;
        address evidence = address(new RegistryEvidence(t, fee, r, stake, timeout));
        vm.expectRevert(_mismatch(evidence));
        new TrainingRegistry(token, STAKE, TIMEOUT, FEE, evidence);
    }

    function test_evidenceWithoutCode_refused() public {
        vm.expectRevert(ITrainingRegistryTypes.Registry__ZeroAddress.selector);
        new TrainingRegistry(token, STAKE, TIMEOUT, FEE, address(0xdead));
    }

    /// A contract that is not a RegistryEvidence (here the rounds module, whose fallback-less
    /// code reverts on the unknown selector) is refused by name, not by a bare revert.
    function test_notAnEvidenceModule_refused() public {
        vm.expectRevert(_mismatch(rounds));
        new TrainingRegistry(token, STAKE, TIMEOUT, FEE, rounds);
        vm.expectRevert(_mismatch(address(token)));
        new TrainingRegistry(token, STAKE, TIMEOUT, FEE, address(token));
    }

    /// Wired as deployRegistry (and scripts/deploy.py) does, each module answers its parameters at
    /// the registry's address, through the fallbacks.
    function test_wired_modulesAnswerTheRegistrysParameters() public {
        ITrainingRegistryFull reg = deployRegistry(token, STAKE, TIMEOUT, FEE);
        (address t, uint256 fee, uint256 stake, uint32 timeout) =
            ITrainingRegistryEvidence(address(reg)).evidenceModuleConfig();
        assertTrue(t == address(token) && fee == FEE && stake == STAKE && timeout == TIMEOUT, "evidence config");
        (t, fee) = ITrainingRegistryRounds(address(reg)).roundsModuleConfig();
        assertTrue(t == address(token) && fee == FEE, "rounds config");
        assertTrue(reg.minSyncerStake() == STAKE, "registry stake");
    }
}
