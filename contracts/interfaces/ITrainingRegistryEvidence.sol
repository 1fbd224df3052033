// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "./ITrainingRegistryRounds.sol";
import {RoundProofs} from "../lib/RoundProofs.sol";

/// @title ITrainingRegistryEvidence
/// @notice The evidence functions of the training registry (contracts/PROTOCOL.md §4) and the
/// root flow's forced-submission commitments (§5, commit–reveal), served at the registry's
/// address (TrainingRegistry delegatecalls them to RegistryEvidence). Call them on the registry;
/// `ITrainingRegistryFull` is the registry's whole ABI.
/// @dev Units: token atto-units, unix seconds, binary32 bit patterns as uint32.
interface ITrainingRegistryEvidence is ITrainingRegistryTypes {
    /// @notice The answer to a weights challenge: fragment f's `leaf` of the round with its
    /// `leafPath` in the round's fragments root, the round's F `fragmentHashes` (the receipt's
    /// weights: RunRoot.weightsRoot of them is in the round's digest; in the root flow
    /// fragmentHashes[f] is the §2 root hash of f's new weights, so it must equal
    /// leaf.weightsRoot) and the `opening` of the challenged chunk of the leaf's weights (or
    /// momentum) commitment.
    struct WeightsOpening {
        RoundProofs.FragmentLeaf leaf;
        bytes32[] leafPath;
        bytes32[] fragmentHashes;
        ChunkOpening opening;
    }

    /// @notice What the registry knows of a round and fragment when it checks a WeightsOpening:
    /// its fragments root, F, the fragment f and its size n, whether the momentum is asked for, and
    /// the round's number, transcript hash, accepted count and stored digest.
    struct WeightsContext {
        bytes32 fragmentsRoot;
        uint256 fragmentCount;
        uint16 fragment;
        uint256 n;
        bool momentum;
        uint32 round;
        bytes32 transcriptHash;
        uint32 acceptedCount;
        bytes32 roundDigest;
    }

    /// @notice One accepted submission of the previous round's fragment, as a norm reference opens
    /// it: its trainer's enrollment index, the OuterGradient struct's fields (taskId, the previous
    /// round and the fragment come from the registry), the slot's path in the leaf's accepted set
    /// and the trainer's EIP-712 signature of the struct.
    struct ReferenceEntry {
        uint16 trainerIndex;
        bytes32 baseRoot;
        bytes32 payloadRoot;
        uint32 payloadSumsq;
        bytes32 cidHash;
        bytes32 payloadHash;
        bytes32[] slotPath;
        bytes signature;
    }

    /// @notice The norm screen's reference in the root flow (issue #23 attack 6): the previous
    /// committed round's roots (its commitment word), the fragment's leaf in its fragments root
    /// with `leafPath`, and every accepted entry of that leaf, in ascending trainer index.
    struct NormReference {
        ITrainingRegistryRounds.RoundRoots previous;
        RoundProofs.FragmentLeaf leaf;
        bytes32[] leafPath;
        ReferenceEntry[] entries;
    }

    /// @notice What the registry knows when it checks a NormReference: the task, the previous
    /// round and its fragments root, the fragment, F, the accepted-set width P, the target's signed
    /// sum of squares and the task's normScreenSq (binary32 bit patterns).
    struct NormContext {
        bytes32 taskId;
        uint32 previousRound;
        bytes32 fragmentsRoot;
        uint16 fragment;
        uint256 fragmentCount;
        uint256 slotWidth;
        uint32 target;
        uint32 screenSq;
    }

    /// @notice No norm reference for (round, fragment): round 0 (no committed round before it) or
    /// a previous round that accepted nobody on the fragment.
    error Registry__NoNormReference(bytes32 taskId, uint32 round, uint16 fragment);

    /// @notice A weights answer whose fragmentHashes are not the round's (its digest) or whose
    /// fragmentHashes[fragment] is not the leaf's weights root: the receipt would name another
    /// model than the one proofs open (issue #23 attack 3).
    error Registry__WrongModelHash(uint32 round, uint16 fragment);

    /// @notice A trainer committed to a forced submission of (round, fragment) without showing it:
    /// `commitment` = keccak256(abi.encode(structHash, trainer)) of the OuterGradient struct it
    /// will reveal after the commit phase (submitOuterGradient).
    event SubmissionCommitted(
        bytes32 indexed taskId, uint32 indexed round, uint16 fragment, address indexed trainer, bytes32 commitment
    );

    /// @notice `challenger` asked for chunk `chunkIndex` of fragment `fragment`'s new weights
    /// (`momentum` false) or momentum (true) committed in round `round`, by `deadline` (seconds),
    /// posting `bond` atto-units.
    event WeightsChallenged(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint16 fragment,
        bool momentum,
        uint32 chunkIndex,
        address indexed challenger,
        uint64 deadline,
        uint256 bond
    );
    /// @notice The challenged weights (or momentum) chunk was opened: `chunk` (64 bytes) is public;
    /// the bond went to `answerer`.
    event WeightsAnswered(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint16 fragment,
        bool momentum,
        uint32 chunkIndex,
        bytes chunk,
        address indexed answerer
    );

    /// @notice Anyone (the syncer, a watcher) answers a pending weights challenge before its
    /// deadline: `roots` are round `round`'s (its commitment word) and `w` (WeightsOpening) opens
    /// fragment `fragment`'s leaf in roots.fragmentsRoot, the round's fragment hashes against its
    /// digest with fragmentHashes[fragment] = leaf.weightsRoot (the receipt names the weights proofs
    /// open), and chunk w.opening.chunkIndex of the leaf's weights (or momentum) commitment (§2, n =
    /// fragmentSizes[fragment]). The bond goes to the caller (withdrawable), WeightsAnswered logs
    /// the chunk, the round's challengeStatus becomes 1 (the receipt shows it). A challenge whose
    /// round was discarded is voided instead (bond back to its challenger). Reverts
    /// Registry__NoChallenge, Registry__ChallengeDeadline, Registry__WrongRoots, Registry__BadLeaf,
    /// Registry__WrongModelHash, Registry__BadOpening.
    function answerWeights(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bool momentum,
        ITrainingRegistryRounds.RoundRoots calldata roots,
        WeightsOpening calldata w
    ) external;

    /// @notice A trainer (the sender) commits to a forced submission of the open round's fragment
    /// `fragment` during the commit phase (until roundDeadline - min(challengeSeconds,
    /// graceWindowSeconds / 2), seconds, inclusive); it reveals it after the phase with
    /// `submitOuterGradient` (PROTOCOL.md §5, copy protection). `commitment` =
    /// keccak256(abi.encode(structHash, trainer)), structHash the OuterGradient struct hash it will
    /// reveal; the commitment hides the payload root, CID and hash, so nobody can copy a payload
    /// before the phase closes, and binds the trainer, so a copied commitment cannot be revealed
    /// by another. A later call replaces the commitment. While any commitment of the round is not
    /// revealed, the syncer can commit the round only after its deadline. Reverts
    /// Registry__NotRootFlow, Registry__WrongStatus, Registry__WrongRound,
    /// Registry__DeadlinePassed, Registry__BadFragment, Registry__CommitPhaseOver,
    /// Registry__NotCommitted (a zero commitment), Registry__NotEnrolled.
    function commitSubmission(bytes32 taskId, uint32 round, uint16 fragment, bytes32 commitment) external;

    /// @notice The forced path's reveal (PROTOCOL.md §5): the submission of (round, fragment) a
    /// trainer committed to with commitSubmission, sent by anyone (a relayer, or the trainer when
    /// the syncer left its off-chain delivery out) after the commit phase and until roundDeadline
    /// (seconds, inclusive). The trainer is recovered from its EIP-712 signature over
    /// OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,
    /// uint32 payloadSumsq,string cid,bytes32 payloadHash) (domain "TenzroTrainingRegistry", version
    /// "2"), baseRoot the run's weightsRoot while the round is open, and
    /// keccak256(abi.encode(structHash, trainer)) must be its commitment of this round's opening.
    /// Once per (trainer, round opening, fragment). The committer must then accept it, or prove it
    /// invalid, or have it dropped by an unanswered whole-payload availability challenge
    /// (proveOmission convicts it otherwise). Reverts Registry__NotRootFlow, Registry__WrongStatus,
    /// Registry__WrongRound, Registry__DeadlinePassed, Registry__BadFragment,
    /// Registry__CommitPhaseOpen, Registry__InvalidSignature, Registry__NotEnrolled,
    /// Registry__DuplicateSubmission, Registry__NotCommitted.
    /// @param s the signed submission (payloadRoot, payloadSumsq, cid, payloadHash, signature)
    function submitOuterGradient(bytes32 taskId, uint32 round, uint16 fragment, SignedPayload calldata s) external;

    /// @notice Anyone slashes a forced commitment that was never revealed (PROTOCOL.md §5,
    /// "Commit never reveal"): `trainer`'s commitSubmission of (round, fragment) in the opening
    /// the round was committed in (getRound's openedAt), whose reveal phase therefore ran whole
    /// (an early commit waits for every reveal; a later one comes after the deadline). A
    /// commitment of an opening a rewind cut is never this one. Within the committed round's
    /// challenge window (finalizedAt + challengeSeconds, seconds) and before the seal; once per
    /// commitment. The trainer loses INVALID_SLASH_BPS of its remaining stake (reason
    /// Unrevealed), all of it burned: the caller gets nothing, so nobody profits from it.
    /// Reverts Registry__WrongStatus (not Training or Completed), Registry__RoundNotCommitted,
    /// Registry__ChallengeWindowClosed, Registry__NotCommitted (no lapsed commitment: revealed,
    /// never made, or slashed already).
    function slashUnrevealed(bytes32 taskId, uint32 round, uint16 fragment, address trainer) external;

    /// @notice Cancel a task still Enrolling: the sponsor at any time, anyone once the
    /// enrollment deadline has passed with fewer than K enrolled. The reward pool and all
    /// stakes are credited back (withdraw to collect).
    function cancelTask(bytes32 taskId) external;

    /// @notice Anyone cancels a Training run that cannot go on (PROTOCOL.md §4 "A run that cannot
    /// go on"): its syncer (if any) is replaceable now, no other candidate has stake >=
    /// minSyncerStake with unlocked stake >= the run's bond, no challenge is pending and the last
    /// committed round's challenge window is over. The silent syncer's bond is burned; every
    /// trainer gets stake - slashed; of the pool left after c committed rounds of N, the trainers'
    /// pot is floor((rewardPool - N * feePerRound) * c / N), claimable against the last credits
    /// root until now + CLAIM_SECONDS (0 when nobody was credited), and the rest goes back to the
    /// sponsor at once; syncer fees of committed rounds stay claimable. Reverts Registry__WrongStatus,
    /// Registry__SyncerStillActive, Registry__RunCanGoOn, Registry__ChallengesPending,
    /// Registry__ChallengeWindowOpen.
    function cancelStalledRun(bytes32 taskId) external;

    /// @notice The parameters this RegistryEvidence was deployed with, which must be the registry's
    /// (TrainingRegistry's constructor checks them): the ERC-20, the minimum syncer pay per round
    /// (atto-units), the minimum syncer pool stake (atto-units) and the syncer timeout (seconds).
    function evidenceModuleConfig()
        external
        view
        returns (address token, uint256 minSyncerFeePerRound, uint256 minSyncerStake, uint32 syncerTimeout);

    /// @notice Root flow (PROTOCOL.md §4 "NormOutlier, root flow"; issue #23 attack 6): anyone
    /// proves the open round's live forced submission of `trainer` for `fragment` a norm outlier
    /// against a reference the round's submitters do not control: the median (CoordinateMedian,
    /// binary32) m of the signed sums of squares of every submission the previous committed round
    /// accepted on the fragment (`ref`, each signed by its trainer). Proven when s.payloadSumsq >
    /// fl(normScreenSq * m) in totalOrder. The submission becomes rejected and the trainer is
    /// slashed as by proveInvalid (reason NormOutlier). Reverts Registry__NotRootFlow,
    /// Registry__NoNormScreen, Registry__NoNormReference (round 0, or nobody accepted), Registry__WrongRoots,
    /// Registry__BadLeaf, Registry__IncompleteSubmissionSet (not the leaf's accepted set),
    /// Registry__NotSignedBy, Registry__NoSuchSubmission, Registry__NotProven.
    function proveNormOutlier(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        SignedPayload calldata s,
        NormReference calldata ref
    ) external;

    /// @notice Anyone proves the open round's submission of `trainer` for `fragment` invalid with
    /// evidence the contract checks (PROTOCOL.md §4); `s` is the trainer's signed submission.
    /// - NonFinite (3): `o` opens a chunk of s.payloadRoot holding a NaN or infinity at a coordinate < n.
    /// - Malformed (2): `o` opens the last chunk with a non-zero value past n (bad padding).
    /// - Any other reason reverts Registry__UnknownReason: a norm outlier is proven with
    ///   proveNormOutlier, against the previous round's accepted sums (the median over this round's
    ///   submissions would be the forcing sybils' to set, issue #23 attack 6).
    /// The submission becomes rejected and the trainer loses INVALID_SLASH_BPS of its remaining
    /// stake: BOUNTY_BPS of that to the caller (withdrawable) when it committed to this proof
    /// (`commitProof`) in an earlier block, the rest (else all of it) burned.
    /// Reverts Registry__NotProven, Registry__BadOpening, Registry__NotSignedBy,
    /// Registry__NoSuchSubmission (not a live submission), Registry__UnknownReason.
    function proveInvalid(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        uint8 reason,
        SignedPayload calldata s,
        ChunkOpening calldata o
    ) external;

    /// @notice Anyone (typically the syncer, which could not fetch or decode the payload at the CID)
    /// challenges a live submission of the open round to open chunk `chunkIndex` of its signed
    /// commitment within the task's challengeSeconds. Pulls challengeBond(taskId) atto-units from
    /// the caller (approve first). While it is pending the syncer may leave the submission out.
    /// Only until max(roundDeadline, the syncer's election) + challengeSeconds
    /// (Registry__DeadlinePassed): the last one is settled one challengeSeconds later, and the
    /// syncer's replacement clock waits for it. `chunkIndex` 2^32 - 1 demands the whole payload (PROTOCOL.md §4 "Whole payload"):
    /// once per submission, apart from the MAX_AVAILABILITY_CHALLENGES chunk challenges, and in
    /// place of a pending chunk challenge (whose bond goes back to its challenger).
    /// Reverts Registry__DeadlinePassed, Registry__ChallengePending (a chunk challenge while one is
    /// pending; a whole-payload one while a whole-payload one is), Registry__ChallengeLimit (limit 3
    /// chunk challenges, 1 whole), Registry__BadOpening (no such chunk), Registry__NoSuchSubmission.
    function challengeAvailability(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        SignedPayload calldata s,
        uint32 chunkIndex
    ) external;

    /// @notice Anyone answers a pending availability challenge with the opening of the challenged
    /// chunk, until its deadline: the challenger's bond goes to the trainer (withdrawable) and the
    /// submission is live again (a round still open must then accept it).
    function answerAvailability(bytes32 taskId, uint32 round, uint16 fragment, address trainer, ChunkOpening calldata o)
        external;

    /// @notice After the deadline of an unanswered challenge (anyone): the submission is rejected
    /// and the trainer loses INVALID_SLASH_BPS of its remaining stake (reason Unavailable):
    /// BOUNTY_BPS of it plus the bond back to the challenger, the rest burned.
    function expireAvailability(bytes32 taskId, uint32 round, uint16 fragment, address trainer) external;

    /// @notice Bond of an availability challenge of this run: syncerBond * CHALLENGE_BOND_BPS / 10000, atto-units.
    function challengeBond(bytes32 taskId) external view returns (uint256);
    /// @notice Bonds of pending availability challenges held by the registry, atto-units.
    function challengeBondsHeld() external view returns (uint256);
    /// @notice The availability challenge pending against (round, fragment, trainer), if any.
    function availabilityChallenge(bytes32 taskId, uint32 round, uint16 fragment, address trainer)
        external
        view
        returns (AvailabilityChallenge memory);
}
