// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @title TenzroToken (TNZO) for devnets
/// @notice A plain TNZO-style ERC-20 with 18 decimals: 1 TNZO = 10**18 atto-units, with ERC-2612
/// permits (OpenZeppelin ERC20Permit: EIP-712 domain name "Tenzro", version "1", readable through
/// ERC-5267 `eip712Domain()`), so the registry's postTaskWithPermit / enrollTrainerWithPermit
/// authorize and pull in one transaction. The deployer receives `initialSupply` atto-units and
/// becomes the owner, who alone may mint more (devnet faucet). The TrainingRegistry works with
/// any ERC-20; this token only exists so that devnets have one.
contract TenzroToken is ERC20, ERC20Permit, Ownable {
    /// @notice Deploys the token and mints `initialSupply` atto-units to the deployer.
    /// @param initialSupply token atto-units (18 decimals) minted to msg.sender
    constructor(uint256 initialSupply) ERC20("Tenzro", "TNZO") ERC20Permit("Tenzro") Ownable(msg.sender) {
        _mint(msg.sender, initialSupply);
    }

    /// @notice Mints `amount` atto-units to `to` (owner only; devnet faucet).
    /// @param to recipient
    /// @param amount token atto-units (18 decimals)
    function mint(address to, uint256 amount) external onlyOwner {
        _mint(to, amount);
    }
}
