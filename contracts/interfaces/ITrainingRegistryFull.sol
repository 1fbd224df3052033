// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistry} from "./ITrainingRegistry.sol";
import {ITrainingRegistryEvidence} from "./ITrainingRegistryEvidence.sol";

/// @title ITrainingRegistryFull
/// @notice Everything a client can call at the registry's address: ITrainingRegistry (run
/// lifecycle, rounds, views) and ITrainingRegistryEvidence (proofs and availability challenges).
interface ITrainingRegistryFull is ITrainingRegistry, ITrainingRegistryEvidence {}
