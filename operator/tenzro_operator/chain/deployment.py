"""The deployment record ``deployments/<network>.json``: contract names, addresses and ABIs,
the chain id and genesis hash it was written on, the verifier precompile."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_utils import to_checksum_address

from tenzro_operator.errors import DeploymentError

REGISTRY = "TrainingRegistry"
TOKEN = "TenzroToken"
VERIFIER = "ReceiptVerifier"
ESCROW = "RewardEscrow"


# ----------------------------------------------------------------------------- deployments


def merged_abi(first: list, *more: list) -> list:
    """One address's ABI from several contracts': every item of ``first``, then the functions,
    events and errors of ``more`` that ``first`` lacks (the registry's own ABI plus RegistryEvidence's,
    whose functions its fallback serves)."""
    def key(item: dict) -> tuple:
        return item.get("type"), item.get("name"), json.dumps(item.get("inputs", []), sort_keys=True)

    out, seen = list(first), {key(i) for i in first}
    for abi in more:
        for item in abi:
            if item.get("type") in ("function", "event", "error") and key(item) not in seen:
                seen.add(key(item))
                out.append(item)
    return out


@dataclass(frozen=True)
class ContractRecord:
    name: str
    address: str
    abi: list[dict[str, Any]]


@dataclass(frozen=True)
class Deployment:
    """``deployments/<network>.json``."""

    path: Path
    network: str
    chain_id: int
    deploy_block: int
    contracts: dict[str, ContractRecord]
    rpc_url: str | None = None
    deployer: str | None = None
    verifier_precompile: str | None = None
    genesis_hash: str | None = None  # 0x-hex of block 0 of the chain deployed on (a fresh anvil's differs)
    ipfs_url: str | None = None  # Kubo RPC API of the devnet's IPFS node (`make deploy` records it)

    def contract(self, name: str) -> ContractRecord:
        try:
            return self.contracts[name]
        except KeyError:
            raise DeploymentError(f"{self.path} has no contract {name!r} (has: {', '.join(self.contracts)})") from None

    @property
    def verifier_address(self) -> str | None:
        """Where to call the receipt verifier: the precompile address on devnets, else the deployed one."""
        if self.verifier_precompile:
            return to_checksum_address(self.verifier_precompile)
        rec = self.contracts.get(VERIFIER)
        return rec.address if rec else None


def load_deployment(path: str | Path) -> Deployment:
    """Read a deployment record.

    Raises:
        DeploymentError: missing file, bad JSON, or missing fields (names the file and field).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise DeploymentError(f"deployment record {p} not found; deploy first "
                              "(`make deploy`, or `ape run deploy --network ethereum:local:foundry`)") from None
    except json.JSONDecodeError as exc:
        raise DeploymentError(f"deployment record {p} is not valid JSON: {exc}") from None
    try:
        contracts = {}
        for name, c in doc["contracts"].items():
            if not isinstance(c.get("abi"), list):
                raise DeploymentError(f"deployment record {p}: contracts.{name}.abi is missing or not a list")
            contracts[name] = ContractRecord(name, to_checksum_address(c["address"]), c["abi"])
        return Deployment(path=p, network=str(doc.get("network", "?")), chain_id=int(doc["chain_id"]),
                          deploy_block=int(doc.get("deploy_block", 0)), contracts=contracts,
                          rpc_url=doc.get("rpc_url"), deployer=doc.get("deployer"),
                          verifier_precompile=doc.get("verifier_precompile"),
                          genesis_hash=doc.get("genesis_hash"), ipfs_url=doc.get("ipfs_url"))
    except KeyError as exc:
        raise DeploymentError(f"deployment record {p} lacks field {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise DeploymentError(f"deployment record {p} is malformed: {exc}") from None
