// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title FalseReturnToken: an ERC-20 that returns false instead of reverting when a
/// transfer cannot be made, and can be switched to refuse every transfer (hostile-token
/// mock for tests).
contract FalseReturnToken {
    mapping(address account => uint256) public balanceOf;
    mapping(address owner => mapping(address spender => uint256)) public allowance;
    uint256 public totalSupply;
    /// @notice When true every transfer returns false and moves nothing.
    bool public refuseAll;

    /// @notice Mints `amount` to `to` (anyone; tests only).
    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
        totalSupply += amount;
    }

    /// @notice Switches the refuse-everything mode.
    function setRefuseAll(bool refuse) external {
        refuseAll = refuse;
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        allowance[msg.sender][spender] = amount;
        return true;
    }

    /// @notice Returns false (moving nothing) on insufficient balance or in refuse mode.
    function transfer(address to, uint256 amount) external returns (bool) {
        return _move(msg.sender, to, amount);
    }

    /// @notice Returns false (moving nothing) on insufficient balance / allowance or in refuse mode.
    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        uint256 a = allowance[from][msg.sender];
        if (a < amount) return false;
        if (!_move(from, to, amount)) return false;
        allowance[from][msg.sender] = a - amount;
        return true;
    }

    function _move(address from, address to, uint256 amount) private returns (bool) {
        if (refuseAll || balanceOf[from] < amount) return false;
        balanceOf[from] -= amount;
        balanceOf[to] += amount;
        return true;
    }
}
