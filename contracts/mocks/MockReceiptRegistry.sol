// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistry} from "../interfaces/ITrainingRegistry.sol";
import {RunRoot} from "../lib/RunRoot.sol";

/// @title MockReceiptRegistry: answers `getReceipt` and `sealedRunRoot` like a TrainingRegistry, with receipts the test chooses
/// @notice Test double for contracts that anchor to sealed receipts (RewardEscrow): it stands in
/// for a TrainingRegistry whose run was sealed, without running a whole training run. Anyone may
/// set or clear a task's receipt (tests only; never deploy it anywhere that matters).
/// `getReceipt(taskId)` returns the stored (struct, serialized bytes) for a "sealed" task and
/// reverts with `MockReceiptRegistry__NotSealed(taskId)` otherwise, like the real registry
/// (which reverts with Registry__WrongStatus / Registry__UnknownTask).
contract MockReceiptRegistry {
    // ------------------------------------------------------------------ errors

    /// @notice getReceipt of a task with no receipt set.
    error MockReceiptRegistry__NotSealed(bytes32 taskId);

    // ------------------------------------------------------------------ events

    /// @notice A receipt was set for `taskId` with stored run root `runRoot`.
    event ReceiptSet(bytes32 indexed taskId, bytes32 runRoot);
    /// @notice The receipt of `taskId` was removed (getReceipt reverts again).
    event ReceiptCleared(bytes32 indexed taskId);

    // ------------------------------------------------------------------ storage

    mapping(bytes32 taskId => bool) private _sealed;
    mapping(bytes32 taskId => ITrainingRegistryTypes.TrainingReceipt) private _receipts;
    mapping(bytes32 taskId => bytes) private _serialized;
    mapping(bytes32 taskId => address) private _sponsors;
    mapping(bytes32 taskId => uint256) private _credits;

    // ------------------------------------------------------------------ external

    /// @notice Store a well-formed v1 receipt (contracts/RECEIPT.md) as sealed, the way the real
    /// registry would: every struct field is decoded from `serialized` and `runRoot` is
    /// RunRoot.runRoot(serialized). The receipt's own header decides the task id, chain and
    /// registry fields (they need not name this contract).
    /// @dev Reverts with RunRoot.RunRootMalformedReceipt(length) on a malformed receipt.
    /// @return taskId the receipt's task id; runRoot its run root.
    function seal(bytes calldata serialized) external returns (bytes32 taskId, bytes32 runRoot) {
        bytes memory data = serialized;
        RunRoot.Header memory h = RunRoot.header(data);
        runRoot = RunRoot.runRoot(data);
        taskId = h.taskId;
        ITrainingRegistryTypes.TrainingReceipt memory r = ITrainingRegistryTypes.TrainingReceipt({
            taskId: h.taskId,
            specHash: h.specHash,
            finalModelHash: h.finalModelHash,
            runRoot: runRoot,
            transcriptRoot: h.transcriptRoot,
            rounds: h.rounds,
            trainerCount: h.trainerCount,
            chainId: h.chainId,
            registry: h.registry,
            sealedAt: uint64(block.timestamp)
        });
        _store(taskId, r, data);
    }

    /// @notice Store an arbitrary (struct, bytes) pair for `r.taskId`, even one that disagrees
    /// with itself (e.g. a run root that is not the bytes' run root), to test what a consumer
    /// does with a registry that answers nonsense.
    function setReceipt(ITrainingRegistryTypes.TrainingReceipt calldata r, bytes calldata serialized) external {
        _store(r.taskId, r, serialized);
    }

    /// @notice Set what runBinding answers for `taskId` besides the run root and spec hash (which
    /// come from the stored receipt): the sponsor and the total credits.
    function setBinding(bytes32 taskId, address sponsor, uint256 totalCredits) external {
        _sponsors[taskId] = sponsor;
        _credits[taskId] = totalCredits;
    }

    /// @notice Forget the receipt of `taskId`: getReceipt reverts again.
    function clear(bytes32 taskId) external {
        delete _sealed[taskId];
        delete _receipts[taskId];
        delete _serialized[taskId];
        emit ReceiptCleared(taskId);
    }

    // ------------------------------------------------------------------ views

    /// @notice Same signature as ITrainingRegistryTypes.getReceipt: the stored receipt and its bytes.
    /// @dev Reverts with MockReceiptRegistry__NotSealed(taskId) when none is set.
    function getReceipt(bytes32 taskId)
        external
        view
        returns (ITrainingRegistryTypes.TrainingReceipt memory receipt, bytes memory serialized)
    {
        if (!_sealed[taskId]) revert MockReceiptRegistry__NotSealed(taskId);
        return (_receipts[taskId], _serialized[taskId]);
    }

    /// @notice Same signature as ITrainingRegistryTypes.sealedRunRoot: the stored run root, or 0 when
    /// no receipt is set.
    function sealedRunRoot(bytes32 taskId) external view returns (bytes32) {
        return _sealed[taskId] ? _receipts[taskId].runRoot : bytes32(0);
    }

    /// @notice Same signature as ITrainingRegistryTypes.runBinding: the stored run root and spec hash
    /// (zero when no receipt is set), and the sponsor and credits of setBinding.
    function runBinding(bytes32 taskId)
        external
        view
        returns (bytes32 runRoot, address sponsor, bytes32 specHash, uint256 totalCredits)
    {
        ITrainingRegistryTypes.TrainingReceipt storage r = _receipts[taskId];
        bool sealed_ = _sealed[taskId];
        return (sealed_ ? r.runRoot : bytes32(0), _sponsors[taskId], sealed_ ? r.specHash : bytes32(0), _credits[taskId]);
    }

    // ------------------------------------------------------------------ internal

    function _store(bytes32 taskId, ITrainingRegistryTypes.TrainingReceipt memory r, bytes memory serialized) private {
        _sealed[taskId] = true;
        _receipts[taskId] = r;
        _serialized[taskId] = serialized;
        emit ReceiptSet(taskId, r.runRoot);
    }
}
