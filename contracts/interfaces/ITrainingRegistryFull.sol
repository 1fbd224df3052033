// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistry} from "./ITrainingRegistry.sol";
import {ITrainingRegistryEvidence} from "./ITrainingRegistryEvidence.sol";
import {ITrainingRegistryPermit} from "./ITrainingRegistryPermit.sol";
import {ITrainingRegistryRounds} from "./ITrainingRegistryRounds.sol";
import {ITrainingRegistryViews} from "./ITrainingRegistryViews.sol";

/// @title ITrainingRegistryFull
/// @notice Everything a client can call at the registry's address: ITrainingRegistry (run
/// lifecycle, rounds, views), ITrainingRegistryEvidence (proofs and availability challenges),
/// ITrainingRegistryPermit (post and enroll with an ERC-2612 permit) and ITrainingRegistryRounds
/// (rounds committed by root, claims) and ITrainingRegistryViews (run and trainer views).
interface ITrainingRegistryFull is
    ITrainingRegistry,
    ITrainingRegistryEvidence,
    ITrainingRegistryPermit,
    ITrainingRegistryRounds,
    ITrainingRegistryViews
{}
