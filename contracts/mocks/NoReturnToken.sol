// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title NoReturnToken: a USDT-style ERC-20 whose transfer / transferFrom / approve
/// return nothing (hostile-token mock for tests; SafeERC20 must cope). The missing return
/// values are the point of this mock (slither: erc20-interface, intended).
// slither-disable-next-line erc20-interface
contract NoReturnToken {
    mapping(address account => uint256) public balanceOf;
    mapping(address owner => mapping(address spender => uint256)) public allowance;
    uint256 public totalSupply;

    /// @notice Mints `amount` to `to` (anyone; tests only).
    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
        totalSupply += amount;
    }

    /// @notice Approves without a return value.
    function approve(address spender, uint256 amount) external {
        allowance[msg.sender][spender] = amount;
    }

    /// @notice Transfers without a return value; reverts on insufficient balance.
    function transfer(address to, uint256 amount) external {
        _move(msg.sender, to, amount);
    }

    /// @notice Transfers without a return value; reverts on insufficient balance or allowance.
    function transferFrom(address from, address to, uint256 amount) external {
        uint256 a = allowance[from][msg.sender];
        require(a >= amount, "allowance");
        allowance[from][msg.sender] = a - amount;
        _move(from, to, amount);
    }

    function _move(address from, address to, uint256 amount) private {
        require(balanceOf[from] >= amount, "balance");
        balanceOf[from] -= amount;
        balanceOf[to] += amount;
    }
}
