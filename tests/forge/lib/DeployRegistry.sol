// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {TrainingRegistry} from "../../../contracts/TrainingRegistry.sol";
import {RegistryEvidence} from "../../../contracts/RegistryEvidence.sol";
import {RegistryRounds} from "../../../contracts/RegistryRounds.sol";
import {ITrainingRegistryFull} from "../../../contracts/interfaces/ITrainingRegistryFull.sol";

/// @notice A TrainingRegistry as scripts/deploy.py deploys it: RegistryRounds, then
/// RegistryEvidence with it, then the registry with the RegistryEvidence (every one with the same
/// token and minimum fee; stake atto-units, timeout seconds), with its whole ABI (the functions its
/// modules serve through its fallback included).
function deployRegistry(IERC20 token, uint256 minSyncerStake, uint32 syncerTimeout, uint256 minSyncerFeePerRound)
    returns (ITrainingRegistryFull)
{
    address rounds = address(new RegistryRounds(token, minSyncerFeePerRound));
    address evidence = address(new RegistryEvidence(token, minSyncerFeePerRound, rounds, minSyncerStake, syncerTimeout));
    return ITrainingRegistryFull(
        address(new TrainingRegistry(token, minSyncerStake, syncerTimeout, minSyncerFeePerRound, evidence))
    );
}
