"""Every contract the deploy script sends fits a post-Shanghai chain under the deploy settings
(ape-config.yaml: via-IR, optimizer on): runtime code within EIP-170's 24,576 bytes, init code
within EIP-3860's 49,152. Before protocol v3 landed, TrainingRegistry's init code (51,205 bytes,
its constructor deploying RegistryEvidence) broke the second: anvil refused the deploy."""

from __future__ import annotations

import pytest

EIP170_RUNTIME = 24_576  # bytes
EIP3860_INITCODE = 49_152  # bytes
DEPLOYED = ["TenzroToken", "RegistryRounds", "RegistryEvidence", "TrainingRegistry", "ReceiptVerifier", "RewardEscrow",
            "AggregateReferee"]  # the last: deployed by RegistryRounds' constructor


def _size(bytecode) -> int:
    """Bytes of an ethpm-types bytecode (its 0x-hex ``bytecode`` field)."""
    return (len(bytecode.bytecode) - 2) // 2


@pytest.mark.parametrize("name", DEPLOYED)
def test_deployed_contracts_fit_eip170_and_eip3860(project, name):
    ct = getattr(project, name).contract_type
    runtime, init = _size(ct.runtime_bytecode), _size(ct.deployment_bytecode)
    assert 0 < runtime <= EIP170_RUNTIME, f"{name} runtime code {runtime} bytes > EIP-170's {EIP170_RUNTIME}"
    assert 0 < init <= EIP3860_INITCODE, f"{name} init code {init} bytes > EIP-3860's {EIP3860_INITCODE}"
