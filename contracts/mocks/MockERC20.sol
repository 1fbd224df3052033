// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title MockERC20: a plain, freely mintable 18-decimal ERC-20 for tests.
contract MockERC20 is ERC20 {
    constructor() ERC20("Mock", "MOCK") {}

    /// @notice Mints `amount` atto-units to `to` (anyone; tests only).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
