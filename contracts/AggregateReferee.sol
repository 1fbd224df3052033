// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {RoundProofs} from "./lib/RoundProofs.sol";

/// @title AggregateReferee
/// @notice The aggregate proof's recomputation (`RoundProofs.aggregateMismatch`, contracts/PROTOCOL.md
/// §1 and §6: the round's rule and outer Nesterov step at one coordinate, in binary32) behind an
/// external call. Stateless; RegistryRounds deploys one in its constructor and calls it, which
/// keeps RegistryRounds under the 24,576-byte EIP-170 limit (like ReceiptBuilder and
/// EvidenceVerifier). The call costs the prover the ABI copy of the opening (about 43k gas at M = 3,
/// n = 24; contracts/GAS.md).
contract AggregateReferee {
    /// @notice `RoundProofs.aggregateMismatch(o, ctx)`: whether the commitment is wrong at
    /// o.coordinate of o.fragment. Reverts with RoundProofs' and Referee's errors.
    function aggregateMismatch(RoundProofs.AggregateOpening calldata o, RoundProofs.AggregateContext calldata ctx)
        external
        pure
        returns (bool)
    {
        return RoundProofs.aggregateMismatch(o, ctx);
    }
}
