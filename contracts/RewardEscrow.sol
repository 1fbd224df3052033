// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";

import {ITrainingRegistry} from "./interfaces/ITrainingRegistry.sol";
import {RunRoot} from "./lib/RunRoot.sol";
import {TrainingVerify} from "./ReceiptVerifier.sol";

/// @title RewardEscrow: pay a beneficiary once a named training run is proven
/// @notice Example dApp on top of the TRAINING_VERIFY precompile (0x...1008). A payer
/// deposits ERC-20 tokens for a beneficiary against a task id. Anyone may then call
/// `release` with the run's serialized receipt and run root: the tokens go to the
/// beneficiary only if the receipt names the escrow's task, this chain and the escrow's
/// registry, the verifier answers 0x01 for (receipt, runRoot), and that registry sealed
/// the task with that very run root. After `expiry` the escrow can no longer be released
/// and anyone may `refund` it to the payer.
///
/// Trust: the verifier proves only that `runRoot` commits to `receipt`; it cannot tell
/// whether any registry sealed it. The TRAINING_VERIFY mimic (ReceiptVerifier) recomputes
/// the root and nothing else, so anyone can build a self-consistent receipt for any task id
/// that it accepts. Every escrow is therefore anchored to a registry, named at deposit and
/// never address(0): `release` also requires `registry.sealedRunRoot(taskId) == runRoot`,
/// i.e. that very registry sealed that very receipt. The escrow trusts the registry the
/// payer named (a registry that lies about its sealed receipts can have the escrow paid out).
///
/// Binding (protocol v2, attack 7 of THREATS.md): a task id is chosen by whoever posts it
/// first, so an escrow also names the run's sponsor and spec hash, and the least accepted
/// work (the registry's totalCredits: fragment-size-weighted accepted submissions) it pays
/// for. A junk run posted under the same task id by someone else, with another spec, or
/// sealed with less accepted work never releases the escrow.
/// Encoding and verifier ABI: contracts/RECEIPT.md.
contract RewardEscrow is ReentrancyGuard {
    using SafeERC20 for IERC20;

    // ------------------------------------------------------------------ types

    /// @notice Escrow life cycle: Open -> Released (receipt accepted) or Refunded (after expiry).
    enum Status {
        None,
        Open,
        Released,
        Refunded
    }

    /// @notice The run an escrow pays for: the registry must have sealed `taskId`, posted by
    /// `sponsor` with spec hash `specHash`, with at least `minCredits` total credits.
    struct RunTerms {
        bytes32 taskId;
        address registry; // the TrainingRegistry that must have sealed the run (never address(0))
        address sponsor; // the run's sponsor (never address(0))
        bytes32 specHash; // sha256 of the run's canonical spec JSON (never zero)
        uint256 minCredits; // least totalCredits of the sealed run (0 = any amount of work)
    }

    /// @notice One escrow. `amount` is what this contract actually received, token atto-units.
    struct Escrow {
        address payer;
        address beneficiary;
        IERC20 token;
        address registry; // the TrainingRegistry that must have sealed the run (never address(0))
        uint64 expiry; // unix seconds: release strictly before, refund at or after
        Status status;
        bytes32 taskId;
        uint256 amount;
        address sponsor;
        bytes32 specHash;
        uint256 minCredits;
    }

    // ------------------------------------------------------------------ errors

    /// @notice An address argument that must be set was address(0).
    error RewardEscrow__ZeroAddress();
    /// @notice deposit without a registry (address(0)): the verifier alone cannot tell a
    /// sealed receipt from a forged one, so every escrow must name the registry it trusts.
    error RewardEscrow__RegistryRequired();
    /// @notice A deposit of zero tokens, or a token that delivered nothing.
    error RewardEscrow__ZeroAmount();
    /// @notice The task id was zero.
    error RewardEscrow__ZeroTaskId();
    /// @notice `expiry` (seconds) is not after the current block time `nowSeconds`.
    error RewardEscrow__ExpiryNotInFuture(uint64 expiry, uint256 nowSeconds);
    /// @notice No escrow has this id.
    error RewardEscrow__UnknownEscrow(uint256 escrowId);
    /// @notice The escrow was already released or refunded.
    error RewardEscrow__NotOpen(uint256 escrowId, Status status);
    /// @notice release after the escrow's expiry (seconds).
    error RewardEscrow__Expired(uint256 escrowId, uint64 expiry);
    /// @notice refund before the escrow's expiry (seconds).
    error RewardEscrow__NotExpired(uint256 escrowId, uint64 expiry);
    /// @notice The receipt bytes are not a well-formed v1 receipt (length in bytes).
    error RewardEscrow__MalformedReceipt(uint256 length);
    /// @notice The receipt is for another task.
    error RewardEscrow__TaskMismatch(bytes32 expected, bytes32 receiptTaskId);
    /// @notice The receipt was sealed on another chain.
    error RewardEscrow__ChainMismatch(uint256 expected, uint256 receiptChainId);
    /// @notice The receipt was sealed by another registry than the escrow names.
    error RewardEscrow__RegistryMismatch(address expected, address receiptRegistry);
    /// @notice The verifier did not answer 0x01 for (receipt, runRoot).
    error RewardEscrow__ReceiptRejected(address verifier, bytes32 runRoot);
    /// @notice The escrow's registry has no sealed receipt for the task (sealedRunRoot reverted,
    /// the registry has no code, or it answered a zero run root).
    error RewardEscrow__NotSealed(address registry, bytes32 taskId);
    /// @notice The escrow's registry sealed the task with another run root.
    error RewardEscrow__RunRootMismatch(bytes32 sealedRunRoot, bytes32 givenRunRoot);
    /// @notice The sealed run was posted by another sponsor than the escrow names.
    error RewardEscrow__SponsorMismatch(address expected, address runSponsor);
    /// @notice The sealed run has another spec hash than the escrow names.
    error RewardEscrow__SpecMismatch(bytes32 expected, bytes32 runSpecHash);
    /// @notice The sealed run's accepted work (total credits) is below the escrow's minimum.
    error RewardEscrow__NotEnoughWork(uint256 minCredits, uint256 runCredits);
    /// @notice deposit without a spec hash: the escrow would not be bound to a run.
    error RewardEscrow__ZeroSpecHash();

    // ------------------------------------------------------------------ events

    /// @notice Tokens were deposited; `amount` is what arrived (atto-units), `expiry` in seconds.
    event Deposited(
        uint256 indexed escrowId,
        address indexed payer,
        address indexed beneficiary,
        address token,
        uint256 amount,
        bytes32 taskId,
        address registry,
        uint64 expiry
    );
    /// @notice Escrow `escrowId` pays only for a run of `sponsor` with `specHash` and at least
    /// `minCredits` total credits (emitted with Deposited).
    event Bound(uint256 indexed escrowId, address indexed sponsor, bytes32 specHash, uint256 minCredits);
    /// @notice The escrow was paid to its beneficiary on a receipt with run root `runRoot`.
    event Released(
        uint256 indexed escrowId, address indexed beneficiary, bytes32 indexed taskId, uint256 amount, bytes32 runRoot
    );
    /// @notice The escrow expired and was paid back to its payer.
    event Refunded(uint256 indexed escrowId, address indexed payer, uint256 amount);

    // ------------------------------------------------------------------ storage

    /// @notice The TRAINING_VERIFY verifier asked by `release` (0x...1008 on Tenzro and devnets).
    address public immutable verifier;

    uint256 private _nextId;
    mapping(uint256 escrowId => Escrow) private _escrows;

    // ------------------------------------------------------------------ constructor

    /// @param verifier_ address of the verifier: 0x0000000000000000000000000000000000001008
    /// where the precompile (or the mimic placed with anvil_setCode) lives, else a normally
    /// deployed ReceiptVerifier.
    constructor(address verifier_) {
        if (verifier_ == address(0)) revert RewardEscrow__ZeroAddress();
        verifier = verifier_;
    }

    // ------------------------------------------------------------------ external

    /// @notice Escrow `amount` token atto-units of `token` (pulled from the caller; approve
    /// first) for `beneficiary`, releasable on a receipt of the run `run` names until `expiry`.
    /// @param token any ERC-20; with fee-on-transfer tokens the escrow holds what arrived.
    /// @param beneficiary who is paid on release.
    /// @param amount token atto-units to pull (> 0).
    /// @param run the run paid for: task id (keccak256 of the spec's task_id string), the
    /// registry that must seal it (required: RewardEscrow__RegistryRequired when address(0)),
    /// its sponsor, its spec hash and the least total credits (see the contract notice).
    /// @param expiry unix seconds, after the current block time.
    /// @return escrowId id of the new escrow (0, 1, 2, ...).
    function deposit(IERC20 token, address beneficiary, uint256 amount, RunTerms calldata run, uint64 expiry)
        external
        nonReentrant
        returns (uint256 escrowId)
    {
        if (address(token) == address(0) || beneficiary == address(0) || run.sponsor == address(0)) {
            revert RewardEscrow__ZeroAddress();
        }
        if (run.registry == address(0)) revert RewardEscrow__RegistryRequired();
        if (amount == 0) revert RewardEscrow__ZeroAmount();
        if (run.taskId == bytes32(0)) revert RewardEscrow__ZeroTaskId();
        if (run.specHash == bytes32(0)) revert RewardEscrow__ZeroSpecHash();
        if (expiry <= block.timestamp) revert RewardEscrow__ExpiryNotInFuture(expiry, block.timestamp);

        // Interaction before effects on purpose: the escrowed amount is what actually arrived
        // (fee-on-transfer tokens). nonReentrant blocks re-entry from a hostile token.
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        // slither: incorrect-equality is a false positive: a token that delivered nothing
        // is refused, the exact-zero test is the intent (no balance is assumed to be exact).
        // slither-disable-next-line incorrect-equality
        if (received == 0) revert RewardEscrow__ZeroAmount();

        escrowId = _nextId++;
        _escrows[escrowId] = Escrow({
            payer: msg.sender,
            beneficiary: beneficiary,
            token: token,
            registry: run.registry,
            expiry: expiry,
            status: Status.Open,
            taskId: run.taskId,
            amount: received,
            sponsor: run.sponsor,
            specHash: run.specHash,
            minCredits: run.minCredits
        });
        emit Deposited(escrowId, msg.sender, beneficiary, address(token), received, run.taskId, run.registry, expiry);
        emit Bound(escrowId, run.sponsor, run.specHash, run.minCredits);
    }

    /// @notice Pay escrow `escrowId` to its beneficiary (anyone may call; the caller gets nothing).
    /// Requires, before the expiry: a well-formed v1 receipt of the escrow's task, this chain
    /// and the escrow's registry; the verifier answering 0x01 for `receipt || runRoot`; and the
    /// escrow's registry having sealed the task with `runRoot` (the anchor: without it a forged,
    /// self-consistent receipt would pass the verifier), posted by the escrow's sponsor with its
    /// spec hash, with at least its minimum of total credits.
    /// @param receipt serialized v1 receipt (189 + 32 R bytes), e.g. from registry.getReceipt.
    /// @param runRoot the claimed run root.
    function release(uint256 escrowId, bytes calldata receipt, bytes32 runRoot) external nonReentrant {
        Escrow storage e = _open(escrowId);
        if (block.timestamp >= e.expiry) revert RewardEscrow__Expired(escrowId, e.expiry);

        // Checks on the receipt's header (cheap) before the verifier call (linear in R).
        bytes memory data = receipt; // one copy to memory, shared by the checks below
        if (!RunRoot.isWellFormed(data)) revert RewardEscrow__MalformedReceipt(data.length);
        RunRoot.Header memory h = RunRoot.header(data);
        if (h.taskId != e.taskId) revert RewardEscrow__TaskMismatch(e.taskId, h.taskId);
        if (h.chainId != block.chainid) revert RewardEscrow__ChainMismatch(block.chainid, h.chainId);
        address registry = e.registry;
        if (h.registry != registry) revert RewardEscrow__RegistryMismatch(registry, h.registry);
        if (!TrainingVerify.verifyAt(verifier, data, runRoot)) {
            revert RewardEscrow__ReceiptRejected(verifier, runRoot);
        }
        _requireBound(e, runRoot);

        // Effects, then the transfer.
        e.status = Status.Released;
        uint256 amount = e.amount;
        emit Released(escrowId, e.beneficiary, e.taskId, amount, runRoot);
        e.token.safeTransfer(e.beneficiary, amount);
    }

    /// @notice Pay an expired escrow back to its payer (anyone may call, at or after expiry seconds).
    function refund(uint256 escrowId) external nonReentrant {
        Escrow storage e = _open(escrowId);
        if (block.timestamp < e.expiry) revert RewardEscrow__NotExpired(escrowId, e.expiry);
        e.status = Status.Refunded;
        uint256 amount = e.amount;
        emit Refunded(escrowId, e.payer, amount);
        e.token.safeTransfer(e.payer, amount);
    }

    // ------------------------------------------------------------------ views

    /// @notice The escrow `escrowId` (all fields zero / Status.None when unknown).
    function getEscrow(uint256 escrowId) external view returns (Escrow memory) {
        return _escrows[escrowId];
    }

    /// @notice Number of escrows created; ids are 0 .. escrowCount()-1.
    function escrowCount() external view returns (uint256) {
        return _nextId;
    }

    /// @notice What `release(escrowId, receipt, runRoot)` would decide now, without reverting:
    /// true when it would pay the beneficiary (the same checks, registry anchor included;
    /// the token transfer itself is not tried).
    function canRelease(uint256 escrowId, bytes calldata receipt, bytes32 runRoot) external view returns (bool) {
        Escrow storage e = _escrows[escrowId];
        if (e.status != Status.Open || block.timestamp >= e.expiry) return false;
        if (!RunRoot.isWellFormed(receipt)) return false;
        RunRoot.Header memory h = RunRoot.header(receipt);
        if (h.taskId != e.taskId || h.chainId != block.chainid || h.registry != e.registry) return false;
        if (!TrainingVerify.verifyAt(verifier, receipt, runRoot)) return false;
        (bytes32 sealedRoot, address sponsor, bytes32 specHash, uint256 credits) = _binding(e.registry, e.taskId);
        return sealedRoot != bytes32(0) && sealedRoot == runRoot && sponsor == e.sponsor && specHash == e.specHash
            && credits >= e.minCredits;
    }

    // ------------------------------------------------------------------ internal

    function _open(uint256 escrowId) private view returns (Escrow storage e) {
        e = _escrows[escrowId];
        if (e.status == Status.None) revert RewardEscrow__UnknownEscrow(escrowId);
        if (e.status != Status.Open) revert RewardEscrow__NotOpen(escrowId, e.status);
    }

    /// @dev Reverts unless the escrow's registry sealed its task with `runRoot`, for its sponsor
    /// and spec hash, with at least its minimum of total credits.
    function _requireBound(Escrow storage e, bytes32 runRoot) private view {
        (bytes32 sealedRoot, address sponsor, bytes32 specHash, uint256 credits) = _binding(e.registry, e.taskId);
        if (sealedRoot == bytes32(0)) revert RewardEscrow__NotSealed(e.registry, e.taskId);
        if (sealedRoot != runRoot) revert RewardEscrow__RunRootMismatch(sealedRoot, runRoot);
        if (sponsor != e.sponsor) revert RewardEscrow__SponsorMismatch(e.sponsor, sponsor);
        if (specHash != e.specHash) revert RewardEscrow__SpecMismatch(e.specHash, specHash);
        if (credits < e.minCredits) revert RewardEscrow__NotEnoughWork(e.minCredits, credits);
    }

    /// @dev What `registry` says of `taskId` (ITrainingRegistryTypes.runBinding): sealed run root,
    /// sponsor, spec hash, total credits; all zero when it is not sealed, the call reverts, or
    /// `registry` has no code (a high-level call to a codeless address would fail in this
    /// contract, outside the try). A registry whose answer does not decode still reverts the
    /// caller: nothing is paid either way.
    function _binding(address registry, bytes32 taskId)
        private
        view
        returns (bytes32 root, address sponsor, bytes32 specHash, uint256 credits)
    {
        if (registry.code.length == 0) return (bytes32(0), address(0), bytes32(0), 0);
        try ITrainingRegistry(registry).runBinding(taskId) returns (bytes32 r, address sp, bytes32 h, uint256 c) {
            return (r, sp, h, c);
        } catch {
            return (bytes32(0), address(0), bytes32(0), 0);
        }
    }
}
