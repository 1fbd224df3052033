// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {TestBase} from "./lib/Cheats.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";

/// @notice Shared fixtures of the registry's forge tests: a token, a registry, a sponsor,
/// a syncer candidate and trainers with known keys (they sign EIP-712 with vm.sign).
abstract contract RegistryBase is TestBase {
    uint256 internal constant MIN_SYNCER_STAKE = 100e18;
    uint32 internal constant SYNCER_TIMEOUT = 60;
    uint256 internal constant MIN_STAKE = 10e18;
    uint64 internal constant GRACE_MS = 30_000;
    uint32 internal constant ENROLL_SECONDS = 1 days;
    uint256 internal constant SYNCER_BOND = 50e18;
    uint32 internal constant CHALLENGE_SECONDS = 20;
    uint256 internal constant ELECTION_WINDOW = 256; // ELECTION_WINDOW_BLOCKS

    MockERC20 internal token;
    /// @dev The registry with its whole ABI (its own functions and those its modules serve).
    ITrainingRegistryFull internal reg;
    /// @dev The registry's evidence functions (served by its fallback).
    ITrainingRegistryEvidence internal ev;
    address internal sponsor = address(0x5905);
    address internal syncer = address(0x5c);
    address internal relayer = address(0x4e1a);
    uint256[] internal keys;
    address[] internal trainers;

    function _deploy() internal {
        vm.warp(1_700_000_000);
        token = new MockERC20();
        // no minimum syncer fee here, so fixtures may post pools of 0; the attack tests
        // deploy registries with one (ProtocolV2Attacks.t.sol)
        reg = deployRegistry(token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT, 0);
        ev = ITrainingRegistryEvidence(address(reg));
        for (uint256 i = 0; i < 16; ++i) {
            uint256 key = 0xA11CE + i;
            keys.push(key);
            trainers.push(vm.addr(key));
        }
    }

    function _fund(address who, uint256 amount) internal {
        token.mint(who, amount);
        vm.prank(who);
        token.approve(address(reg), type(uint256).max);
    }

    function _registerSyncer(address who, uint256 amount) internal {
        _fund(who, amount);
        vm.prank(who);
        reg.registerSyncer(amount);
        vm.roll(block.number + 1); // stake counts in elections requested from the next block on
    }

    /// @dev Takes `who` out of the syncer pool: its exit (SyncerLeaving), then, once the election
    /// window of that change has passed, its stake (each step waits out the previous change's window).
    function _leavePool(address who) internal {
        vm.roll(block.number + ELECTION_WINDOW + 1);
        vm.prank(who);
        reg.unregisterSyncer();
        vm.roll(block.number + ELECTION_WINDOW + 1);
        vm.prank(who);
        reg.unregisterSyncer();
    }

    function _params(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool)
        internal
        pure
        returns (ITrainingRegistryTypes.TaskParams memory p)
    {
        p.taskId = id;
        p.specHash = keccak256(abi.encode("spec", id));
        p.specCid = "bafkreispec";
        p.initialWeightsRoot = keccak256(abi.encode("w0", id));
        p.trainerCount = m;
        p.quorum = k;
        p.fragmentCount = f;
        p.innerSteps = 24;
        p.maxRounds = rounds;
        p.graceWindowMs = GRACE_MS;
        p.aggregation = 1;
        p.tier = 0;
        p.maxMisses = 1;
        p.minStake = MIN_STAKE;
        p.rewardPool = pool;
        p.fragmentSizes = new uint64[](f);
        for (uint256 i = 0; i < f; ++i) {
            p.fragmentSizes[i] = uint64(1000 * (i + 1));
        }
        p.enrollmentSeconds = ENROLL_SECONDS;
        p.syncerFeeBps = 0;
        p.syncerBond = SYNCER_BOND;
        p.normScreenSq = 0x42C80000; // 100.0: a norm screen of x10
        p.challengeSeconds = CHALLENGE_SECONDS;
    }

    function _post(ITrainingRegistryTypes.TaskParams memory p) internal {
        _fund(sponsor, p.rewardPool);
        vm.prank(sponsor);
        reg.postTask(p);
    }

    function _enroll(bytes32 id, uint256 i, uint256 stake) internal {
        _fund(trainers[i], stake);
        vm.prank(trainers[i]);
        reg.enrollTrainer(id, stake, "did:tenzro:trainer");
    }

    /// @dev Trainer i's signed submission of (round, frag) over the commitment (root, sumsq),
    /// started from the open round's weights root.
    function _signed(uint256 i, bytes32 id, uint32 round, uint16 frag, bytes32 root, uint32 sumsq)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory)
    {
        return _signedOn(i, id, round, frag, root, sumsq, reg.getRun(id).weightsRoot);
    }

    function _signedOn(uint256 i, bytes32 id, uint32 round, uint16 frag, bytes32 root, uint32 sumsq, bytes32 base)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory sp)
    {
        sp.payloadRoot = root;
        sp.payloadSumsq = sumsq;
        sp.cid = "bafkreigradient";
        sp.payloadHash = keccak256(abi.encode(id, i, round, frag));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(keys[i], reg.outerGradientDigest(id, round, frag, base, sp));
        sp.signature = abi.encodePacked(r, s, v);
    }

    function _submitSigned(bytes32 id, uint32 round, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp)
        internal
    {
        vm.prank(relayer);
        reg.submitOuterGradient(id, round, frag, sp);
    }

    /// @dev Trainer i submits a stand-in commitment (sum of squares 1.0) of (round, frag).
    function _submit(bytes32 id, uint256 i, uint32 round, uint16 frag) internal {
        _submitOn(id, i, round, frag, reg.getRun(id).weightsRoot);
    }

    function _submitOn(bytes32 id, uint256 i, uint32 round, uint16 frag, bytes32 base) internal {
        bytes32 root = keccak256(abi.encode("payload", id, i, round, frag));
        _submitSigned(id, round, frag, _signedOn(i, id, round, frag, root, 0x3F800000, base));
    }

    function _commit(bytes32 id, uint32 round, uint16 f, uint256[] memory accepted)
        internal
        pure
        returns (ITrainingRegistryTypes.RoundCommit memory c)
    {
        c.taskId = id;
        c.round = round;
        c.fragmentHashes = new bytes32[](f);
        c.fragmentCids = new string[](f);
        for (uint256 j = 0; j < f; ++j) {
            c.fragmentHashes[j] = keccak256(abi.encode(id, round, j));
            c.fragmentCids[j] = "bafkreiweights";
        }
        c.acceptedBitmaps = accepted;
        c.transcriptHash = keccak256(abi.encode("transcript", id, round));
        c.transcriptCid = "bafkreitranscript";
    }

    /// @dev Every trainer in [0, m) submits every fragment; all accepted; syncer finalizes.
    function _fullRound(bytes32 id, uint32 round, uint16 m, uint16 f) internal {
        uint256[] memory acc = new uint256[](m);
        for (uint256 i = 0; i < m; ++i) {
            for (uint16 j = 0; j < f; ++j) {
                _submit(id, i, round, j);
            }
            acc[i] = (uint256(1) << f) - 1;
        }
        vm.prank(reg.getRun(id).syncer);
        reg.finalizeRound(_commit(id, round, f, acc));
    }

    /// @dev Both steps of an election: request in this block, resolve in the next.
    function _elect(bytes32 id) internal returns (address) {
        reg.requestSyncerElection(id);
        vm.roll(block.number + 1);
        return reg.electSyncer(id);
    }

    /// @dev Posts, enrolls m trainers (opens round 0), elects a syncer.
    function _startRun(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool) internal {
        _post(_params(id, m, k, f, rounds, pool));
        for (uint256 i = 0; i < m; ++i) {
            _enroll(id, i, MIN_STAKE);
        }
        _elect(id);
    }
}
