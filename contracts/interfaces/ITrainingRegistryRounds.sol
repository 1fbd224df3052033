// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";
import {RoundProofs} from "../lib/RoundProofs.sol";

/// @title ITrainingRegistryRounds
/// @notice Rounds committed by root (contracts/PROTOCOL.md §5), served at the registry's address
/// (the registry delegatecalls them to RegistryRounds). A run opts in before its first enrollment;
/// then each round is one `commitRound` transaction whatever M and F (trainers deliver signed
/// submissions to the syncer off-chain), rewards are claimed one trainer at a time against the
/// final cumulative credits root, and the unclaimed rest goes back to the sponsor after
/// CLAIM_SECONDS.
/// @dev Units: token atto-units, unix seconds. Trees are §6's positional trees (keccak256 of
/// left ‖ right, empty positions bytes32(0), width nextPow2(max(1, n))).
interface ITrainingRegistryRounds is ITrainingRegistryTypes {
    /// @notice Input of commitRound. The registry computes the credits and the counts itself from
    /// the accepted bitmaps, so the credits root behind every claim is never the syncer's word.
    struct RootCommit {
        bytes32 taskId;
        uint32 round; // must be the open round
        bytes32 fragmentsRoot; // §6: positional tree over nextPow2(F) fragment leaves
        uint256[] acceptedBitmaps; // one per enrolled trainer index: bit f set = accepted on fragment f
        uint256[] previousCredits; // one per enrolled trainer index: its cumulative credits before this round
        bytes32[] fragmentHashes; // F entries: sha256 of the new global safetensors of each fragment
        bytes32 transcriptHash; // sha256 of the round's canonical transcript JSON bytes
        string transcriptCid; // IPFS CID of the transcript JSON (lists the fragments' CIDs; event only)
        // none, or one per enrolled trainer index, each within its accepted bitmap: bit f set = accepted
        // on fragment f without the syncer's endorsement (a forced payload it found no work in,
        // PROTOCOL.md §5 "Endorsed credit"): credited apart, paid only up to the trainer's endorsed credits
        uint256[] unendorsedBitmaps;
    }

    /// @notice The outer step and rule parameters an aggregate proof recomputes with (PROTOCOL.md §1):
    /// float32 lr and momentum as binary32 bit patterns, Nesterov or heavy-ball, TrimmedMean's trim
    /// fraction in basis points (< 5000; ignored by the other rules).
    struct OuterRule {
        uint32 lr;
        uint32 mu;
        bool nesterov;
        uint16 alphaBps;
    }

    /// @notice The preimage of a round's commitment word (RoundCommitted carries it):
    /// keccak256(fragmentsRoot ‖ creditsRoot ‖ uint256 totalCredits ‖ bitmapsHash), bitmapsHash =
    /// keccak256(abi.encodePacked(uint256[] acceptedBitmaps)).
    struct RoundRoots {
        bytes32 fragmentsRoot;
        bytes32 creditsRoot;
        uint256 totalCredits;
        bytes32 bitmapsHash;
    }

    /// @notice Which round a proof is about, with the roots it opens: `current` of round `round`,
    /// `previous` of round - 1 (ignored for round 0: the initial state), and the weights root after
    /// round - 1 (checked against that round's stored digest; ignored for round 0), which the run
    /// goes back to if the proof holds.
    struct RoundClaim {
        bytes32 taskId;
        uint32 round;
        RoundRoots current;
        RoundRoots previous;
        bytes32 previousWeightsRoot;
    }

    /// @notice A bitmap proof's opening: the round's committed `bitmaps` (one per enrolled
    /// trainer), fragment `fragment`'s `leaf` with its `leafPath` in the round's fragments root,
    /// and the accepted-set position of trainer `index`: `slot` (bytes32(0) if empty) with its
    /// `slotPath` in leaf.acceptedRoot.
    struct BitmapOpening {
        uint256[] bitmaps;
        uint16 fragment;
        uint16 index;
        RoundProofs.FragmentLeaf leaf;
        bytes32[] leafPath;
        bytes32 slot;
        bytes32[] slotPath;
    }

    /// @notice The answer to a slot-preimage challenge: the fragment's leaf (with its path in the
    /// round's fragments root), the submission's struct-hash fields, its trainer's EIP-712
    /// signature and the slot's path in the leaf's accepted set.
    struct SlotAnswer {
        RoundProofs.FragmentLeaf leaf;
        bytes32[] leafPath;
        bytes32 baseRoot;
        bytes32 payloadRoot;
        uint32 payloadSumsq;
        bytes32 cidHash;
        bytes32 payloadHash;
        bytes signature;
        bytes32[] slotPath;
    }

    /// @notice The sponsor switched the run to the root flow, with the §6 initial fragments root
    /// and the outer rule its rounds are recomputed with.
    event RootFlowEnabled(bytes32 indexed taskId, bytes32 initialFragmentsRoot, OuterRule outer);
    /// @notice Round `round`'s commitment was proven wrong (`kind` 1: the aggregate at fragment
    /// `fragment`, coordinate `position`; 2: the bitmaps against fragment `fragment`'s accepted set
    /// at trainer index `position`; 3: trainer `position`'s live forced submission of `fragment`
    /// left out; 4: the preimage of trainer `position`'s slot of `fragment` not shown in time; 5: a
    /// chunk of fragment `fragment`'s new weights (`position` = chunk index) or momentum
    /// (`position` = 2^32 | chunk index) not opened in time after challengeWeights):
    /// `syncer` (its committer) lost `slashed` atto-units of bond, `bounty` of it to `prover`.
    event RoundProvenWrong(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint8 kind,
        uint16 fragment,
        uint256 position,
        address indexed prover,
        address syncer,
        uint256 slashed,
        uint256 bounty
    );
    /// @notice `challenger` asked for the signed preimage of trainer `index`'s slot of `fragment` in
    /// round `round`, by `deadline` (seconds), posting `bond` atto-units.
    event SlotChallenged(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint16 fragment,
        uint16 index,
        address indexed challenger,
        uint64 deadline,
        uint256 bond
    );
    /// @notice The slot's preimage was shown (the struct hash its trainer signed); the bond went to
    /// `answerer`.
    event SlotAnswered(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint16 fragment,
        uint16 index,
        bytes32 structHash,
        address indexed answerer
    );
    /// @notice A slot challenge became void (its round was discarded by a rewind): bond back.
    event SlotChallengeVoided(bytes32 indexed taskId, uint32 indexed round, uint16 fragment, uint16 index);
    /// @notice Rounds fromRound .. toRound - 1 were discarded; the run trains round fromRound again
    /// from round fromRound - 1's state, under a syncer elected anew.
    event RoundsDiscarded(bytes32 indexed taskId, uint32 fromRound, uint32 toRound);
    /// @notice The syncer committed a round by root. `weightsRoot` is the receipt's (RunRoot over
    /// the fragments' sha256, which the transcript lists with their CIDs; getRound leaves it 0 for a
    /// root-flow round, its roundDigest binds it); `creditsRoot` and `totalCredits` are the
    /// cumulative credits the registry computed from `acceptedBitmaps` and `unendorsedBitmaps` (a
    /// trainer's credits word is the sum over rounds of its bitmaps' fragment sizes, the unendorsed
    /// ones in its high 128 bits; `totalCredits` sums both halves). The round's commitment word is
    /// keccak256(fragmentsRoot ‖ creditsRoot ‖ totalCredits ‖ keccak256(abi.encodePacked(acceptedBitmaps))).
    event RoundCommitted(
        bytes32 indexed taskId,
        uint32 indexed round,
        bytes32 fragmentsRoot,
        bytes32 weightsRoot,
        bytes32 creditsRoot,
        uint256 totalCredits,
        uint256[] acceptedBitmaps,
        uint256[] unendorsedBitmaps,
        bytes32 transcriptHash,
        string transcriptCid
    );
    /// @notice A root-flow run was sealed: stakes refunded, `claimable` atto-units open to claims
    /// until `claimDeadline` (seconds).
    event RootRunSealed(bytes32 indexed taskId, uint256 claimable, uint64 claimDeadline);
    /// @notice Trainer `index` claimed `reward` atto-units for `credits` cumulative credits.
    event RewardClaimed(bytes32 indexed taskId, address indexed trainer, uint16 index, uint256 credits, uint256 reward);
    /// @notice The unclaimed pool (and the rounding dust) went back to the sponsor.
    event PoolSwept(bytes32 indexed taskId, address indexed sponsor, uint256 amount);

    /// @notice useRootFlow on a run that already has trainers or is already in the root flow.
    error Registry__RootFlowLocked(bytes32 taskId);
    /// @notice acceptedBitmaps and previousCredits need one entry per enrolled trainer, fragmentHashes F.
    error Registry__CommitLength(uint256 bitmaps, uint256 credits, uint256 hashes, uint16 enrolled, uint16 f);
    /// @notice unendorsedBitmaps needs no entry or one per enrolled trainer.
    error Registry__UnendorsedLength(uint256 given, uint16 enrolled);
    /// @notice Trainer `index`'s bitmap has bits at or beyond F, or its unendorsed bitmap bits
    /// outside its accepted bitmap.
    error Registry__BadBitmap(uint16 index, uint256 bitmap);
    /// @notice previousCredits is not the vector behind the last committed credits root.
    error Registry__WrongPreviousCredits(bytes32 given, bytes32 committed);
    /// @notice The last round's challenge window ends at `until` (seconds).
    error Registry__ChallengeWindowOpen(bytes32 taskId, uint64 until);
    /// @notice The credit proof does not open the final credits root at `index`.
    error Registry__BadCreditProof(uint16 index);
    /// @notice Trainer `index` already claimed.
    error Registry__AlreadyClaimed(bytes32 taskId, uint16 index);
    /// @notice A claim larger than what is left of the run's pool: refused (cannot happen while
    /// the credits are the registry's own sums; kept so that no run's claims reach another's pool).
    error Registry__ClaimExceedsPool(uint256 reward, uint256 left);
    /// @notice sweep before the claim deadline (seconds).
    error Registry__ClaimPeriodOpen(bytes32 taskId, uint64 deadline);
    /// @notice useRootFlow with Krum (no coordinate proof) or a trim fraction of 5000 bps or more.
    error Registry__OuterRuleNotProvable(uint8 rule, uint16 alphaBps);
    /// @notice The round is not committed (or was discarded by a rewind).
    error Registry__RoundNotCommitted(bytes32 taskId, uint32 round);
    /// @notice The round's challenge window closed at `until` (seconds).
    error Registry__ChallengeWindowClosed(bytes32 taskId, uint32 round, uint64 until);
    /// @notice The roots (or weights root) given for round `round` are not the ones committed.
    error Registry__WrongRoots(uint32 round);
    /// @notice `given` signatures for `entries` accepted entries.
    error Registry__SignatureCount(uint256 given, uint256 entries);
    /// @notice The commitment is right there (fragment, coordinate or trainer index): nothing proven.
    error Registry__NoMismatch(uint16 fragment, uint256 position);
    /// @notice A fragment leaf or an accepted-set slot does not verify against its root.
    error Registry__BadLeaf(uint16 fragment, uint16 index);

    /// @notice Switches a posted run to the root flow. Only its sponsor, while it is Enrolling and
    /// nobody has enrolled (trainers enroll knowing the flow). `initialFragmentsRoot` is §6's
    /// initial state (weights commitments, zero momentum), the base of round 0's fraud proofs;
    /// `outer` the spec's outer step, which proofs recompute with. Reverts Registry__NotSponsor,
    /// Registry__WrongStatus, Registry__RootFlowLocked, Registry__OuterRuleNotProvable.
    function useRootFlow(bytes32 taskId, bytes32 initialFragmentsRoot, OuterRule calldata outer) external;

    /// @notice Anyone proves a committed round wrong at one coordinate of one fragment while the
    /// round's challenge window is open (challengeSeconds after its commit): `o` opens both rounds'
    /// fragment leaves, every accepted submission (with `signatures[i]`, entry i's trainer's
    /// EIP-712 signature of its struct hash) and the previous and new weights and momentum at the
    /// coordinate; the registry recomputes §1 (RoundProofs.aggregateMismatch) with the run's rule
    /// and outer step. On a mismatch the round and every round after it are discarded (the run's
    /// roots, weights and total credits go back to round - 1's), the committer's fees for its
    /// discarded rounds go back to the pool, and if the committer is still the run's syncer its
    /// bond is slashed (BOUNTY_BPS to the caller when it committed to this proof, `commitProof`,
    /// in an earlier block; else all of it burned) and a new syncer must be elected. No bond: a
    /// proof that fails reverts. Reverts Registry__RoundNotCommitted,
    /// Registry__ChallengeWindowClosed, Registry__WrongRoots, Registry__SignatureCount,
    /// Registry__NotSignedBy, Registry__NoMismatch and RoundProofs' errors.
    function proveAggregate(RoundClaim calldata a, RoundProofs.AggregateOpening calldata o, bytes[] calldata signatures)
        external;

    /// @notice A prover's claim to the bounty of a proof it is about to send (PROTOCOL.md §5
    /// "Bounties"): `commitment` = keccak256(abi.encode(keccak256(calldata), prover)), the
    /// calldata being the proof transaction's exactly (selector and arguments: proveAggregate,
    /// proveBitmap, proveOmission, proveInvalid, proveNormOutlier). A proof pays its bounty to
    /// its sender only when that sender's commitment was recorded in an earlier block, so a copy
    /// of the proof taken from the mempool (same calldata, another sender) still convicts but
    /// pays its copier nothing (the bounty is burned), and the commitment shows nothing of the
    /// proof. The first block a commitment is sent in is kept; anyone may commit; never reverts.
    function commitProof(bytes32 commitment) external;

    /// @notice Anyone proves a committed round's bitmaps inconsistent with fragment b.fragment's
    /// accepted set, within the round's window (BitmapOpening). Proven when the slot is filled
    /// (non-zero) and trainer b.index's bit b.fragment is not set or the reverse, when the leaf's
    /// acceptedCount is not the number of bitmaps with bit b.fragment, or when the leaf names
    /// another fragment. Then, as for proveAggregate: the committer's fees for its discarded rounds
    /// back to the pool, its bond slashed if it is still the syncer, the run rewound to the round
    /// before. So every accepted set an aggregate proof opens is exactly the set of trainers the
    /// registry credited. Reverts as proveAggregate, and Registry__WrongRoots (bitmaps),
    /// Registry__BadLeaf (a leaf or slot not in its root), Registry__NoMismatch.
    function proveBitmap(RoundClaim calldata a, BitmapOpening calldata b) external;

    /// @notice Anyone proves that a committed round left out a live forced submission: trainer
    /// `index` submitted fragment `fragment` of round a.round on-chain (`submitOuterGradient`, the
    /// forced-inclusion path), the submission is live (not proven invalid, not expired after an
    /// availability challenge; commitRound waits for every challenge to be settled, so this is its
    /// state at the commit), and bit `fragment` of the trainer's committed bitmap is clear
    /// (`bitmaps`: the round's committed bitmaps). The syncer must accept a live forced submission
    /// or prove it invalid first (§4). The conviction is proveAggregate's. Reverts as
    /// proveAggregate, and Registry__WrongRoots (bitmaps), Registry__BadFragment,
    /// Registry__NoMismatch (no such live submission, or it was accepted).
    function proveOmission(RoundClaim calldata a, uint256[] calldata bitmaps, uint16 fragment, uint16 index) external;

    /// @notice Anyone, within round a.round's window, challenges a credited slot (bit `fragment` of
    /// trainer `index`'s committed bitmap set) to show its signed preimage; pulls
    /// challengeBond(taskId) atto-units (approve first). Anyone answers by the deadline
    /// (challengeSeconds later) with answerSlot, or the round is proven wrong (expireSlot). The
    /// seal waits for every slot challenge. Reverts as proveAggregate, and Registry__WrongRoots
    /// (bitmaps), Registry__NoSuchSubmission (bit clear), Registry__ChallengePending.
    function challengeSlot(RoundClaim calldata a, uint256[] calldata bitmaps, uint16 fragment, uint16 index) external;

    /// @notice Anyone (the syncer, the trainer, a watcher) answers a pending slot challenge before
    /// its deadline: `roots` are the round's (its commitment word), `ans` opens the slot with the
    /// struct its trainer signed. The bond goes to the caller (withdrawable); SlotAnswered logs the
    /// struct hash; the round's challengeStatus becomes 1 (a challenge lost), which the sealed
    /// receipt folds into its digest (RECEIPT.md). A challenge whose round was discarded is voided
    /// instead (bond back). Reverts
    /// Registry__NoChallenge, Registry__ChallengeDeadline, Registry__WrongRoots, Registry__BadLeaf,
    /// Registry__NotSignedBy.
    function answerSlot(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        uint16 index,
        RoundRoots calldata roots,
        SlotAnswer calldata ans
    ) external;

    /// @notice After an unanswered slot challenge's deadline (anyone): the round is proven wrong
    /// (kind 4): the challenger gets its bond back and the bounty, the conviction is
    /// proveAggregate's. `a` gives the round's roots as for a proof (its window may have closed
    /// since the challenge). A challenge whose round was discarded is voided (bond back). Reverts
    /// Registry__NoChallenge, Registry__ChallengeDeadline, Registry__WrongRoots.
    function expireSlot(RoundClaim calldata a, uint16 fragment, uint16 index) external;

    /// @notice Anyone, within committed root-flow round `round`'s challenge window
    /// (challengeSeconds after its commit), demands chunk `chunkIndex` of fragment `fragment`'s new
    /// weights (`momentum` false) or momentum buffer (true) as the round's fragment leaf commits
    /// them (PROTOCOL.md §5 "Weights availability", issue #23 attack 2); pulls
    /// challengeBond(taskId) atto-units (approve first). Anyone answers by the deadline
    /// (challengeSeconds later) with answerWeights, or anyone convicts the round's committer with
    /// expireWeights. Emits ITrainingRegistryEvidence.WeightsChallenged. One pending per (round, fragment, momentum, chunk); the seal waits for every
    /// one. Reverts Registry__WrongStatus, Registry__RoundNotCommitted,
    /// Registry__ChallengeWindowClosed, Registry__BadFragment, Registry__BadOpening (chunk >=
    /// ceil(n / 16)), Registry__ChallengePending.
    function challengeWeights(bytes32 taskId, uint32 round, uint16 fragment, bool momentum, uint32 chunkIndex) external;

    /// @notice After an unanswered weights challenge's deadline (challengeWeights, anyone): chunk
    /// `chunkIndex` of fragment `fragment`'s new weights (`momentum` false) or momentum (true) in
    /// round a.round was not opened, so the round's weights are not available: the round is proven
    /// wrong (kind 5; issue #23 attack 2, unopenable weights): the challenger gets its bond back and
    /// the bounty, the conviction is proveAggregate's. A challenge whose round was discarded is
    /// voided (bond back). Reverts Registry__NoChallenge, Registry__ChallengeDeadline,
    /// Registry__WrongRoots.
    function expireWeights(RoundClaim calldata a, uint16 fragment, bool momentum, uint32 chunkIndex) external;

    /// @notice The parameters this RegistryRounds was deployed with, which must be the registry's
    /// (RegistryEvidence's constructor checks them): the ERC-20 and the minimum syncer pay per
    /// round, atto-units.
    function roundsModuleConfig() external view returns (address token, uint256 minSyncerFeePerRound);

    /// @notice The run's outer rule (useRootFlow) and the current committer with the first round
    /// it committed.
    function outerRule(bytes32 taskId)
        external
        view
        returns (OuterRule memory outer, address committer, uint32 committerFrom);

    /// @notice The elected syncer commits the open round by root: O(1) storage whatever M and F
    /// (PROTOCOL.md §5), calldata O(M + F). The registry checks `previousCredits` against the last
    /// credits root, adds to trainer i fragmentSizes[f] for each bit f of its bitmap (to the low
    /// 128 bits of its credits word, endorsed; to the high 128 bits when bit f of its unendorsed
    /// bitmap is set too), and stores the new credits root and the total of both halves;
    /// counts[f] (the trainers with bit f) must reach the quorum K
    /// for every fragment before the deadline, any counts go after it. Accrues one syncer fee;
    /// opens the next round or completes the run. Every availability challenge must be settled
    /// first. Before the deadline the round commits only after its commit phase and once every
    /// forced commitment is revealed (commitSubmission). Reverts Registry__NotRootFlow,
    /// Registry__NotSyncer, Registry__WrongRound, Registry__CommitPhaseOpen,
    /// Registry__RevealsPending, Registry__ChallengesPending, Registry__CommitLength,
    /// Registry__UnendorsedLength, Registry__BadBitmap,
    /// Registry__WrongPreviousCredits, Registry__QuorumNotMet.
    function commitRound(RootCommit calldata c) external;

    /// @notice Seals a Completed root-flow run once the last round's challenge window
    /// (challengeSeconds after its commit) has passed and no challenge is pending: stores the
    /// receipt (RECEIPT.md), refunds every trainer's stake minus its slashes (withdrawable), opens
    /// claims until now + CLAIM_SECONDS. With no credits at all the pool goes back to the sponsor.
    /// Anyone may call it. Reverts Registry__ChallengeWindowOpen, Registry__ChallengesPending.
    function sealRootRun(bytes32 taskId) external;

    /// @notice Credits trainer `index` with floor(claimable * paid / totalCredits) atto-units
    /// (withdrawable), once, where paid = e + min(u, e) for the endorsed credits e (low 128 bits of
    /// `credits`) and the unendorsed u (high 128 bits): credit the syncer did not endorse is paid only
    /// up to the endorsed, and what it leaves unpaid is the sponsor's at the sweep (PROTOCOL.md §5
    /// "Endorsed credit"). `credits` and `proof` open the final creditsRoot at `index`, leaf
    /// keccak256(0x04 ‖ uint16 index ‖ uint256 credits). Anyone may call it
    /// for any trainer; the reward always goes to the trainer. Reverts Registry__BadCreditProof,
    /// Registry__AlreadyClaimed, Registry__ClaimExceedsPool, Registry__WrongStatus.
    function claim(bytes32 taskId, uint16 index, uint256 credits, bytes32[] calldata proof) external;

    /// @notice After the claim deadline, credits what is left of the pool to the sponsor
    /// (withdrawable); anyone may call it. Reverts Registry__ClaimPeriodOpen.
    function sweep(bytes32 taskId) external;

    /// @notice Root-flow state: whether the run is in it, the initial fragments root, the latest
    /// cumulative credits root and the claim deadline (seconds; 0 before the seal). The latest
    /// fragments root is in the last RoundCommitted (and its commitment word).
    function rootState(bytes32 taskId)
        external
        view
        returns (bool enabled, bytes32 initialFragmentsRoot, bytes32 creditsRoot, uint64 claimDeadline);

    /// @notice The word stored for root-flow round `round` (bytes32(0) if not committed).
    function roundCommitment(bytes32 taskId, uint32 round) external view returns (bytes32);

    /// @notice Whether trainer `index` has claimed.
    function claimed(bytes32 taskId, uint16 index) external view returns (bool);

    /// @notice The open round's commit phase: forced commitments until `closes` (seconds,
    /// inclusive), reveals and an early commitRound after it; `unrevealed` commitments of the
    /// round are not revealed yet. Reverts Registry__WrongStatus (not Training),
    /// Registry__NotRootFlow.
    function commitPhase(bytes32 taskId) external view returns (uint64 closes, uint16 unrevealed);
}
