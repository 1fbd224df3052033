"""`ape run deploy`: deploy tenzro-train's contracts and write deployments/<network>.json.

On a devnet (anvil, chain id 31337) the account defaults to anvil's first
test account, and the ReceiptVerifier's runtime code is also placed at the
TRAINING_VERIFY precompile address 0x…1008 with `anvil_setCode`, so dApps
call it where the real precompile will be. On any other network pass
`--account ALIAS`; the script shows what it will deploy and asks before
broadcasting (`--yes` skips the question), and RewardEscrow points at the
normally deployed verifier.

The deployment record holds the chain id, the RPC URL, block 0's hash (what
tells two devnets with the same chain id and addresses apart), the deploy
block, every address with its ABI and the ABI's sha256, so the operator needs
no ape at run time.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, InvalidOperation
import json
import os
from pathlib import Path

import click
from ape import accounts, chain, project
from ape.cli import ConnectedProviderCommand, account_option

from tenzro_operator.chain import merged_abi

PRECOMPILE = "0x0000000000000000000000000000000000001008"
DEVNET_CHAIN_IDS = {31337, 1337}
REPO_ROOT = Path(__file__).resolve().parents[1]
# TNZO atto-units minted to the deployer on a devnet, to fund the demo's
# sponsor, syncer and trainers (the deployer owns the token and can mint more).
DEVNET_MINT = 10**9 * 10**18


def _abi(container) -> list:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in container.contract_type.abi]


def _record(container, instance, *extra) -> dict:
    """The deployment record of one contract; ``extra`` containers add their functions, events and
    errors to its ABI (the registry's evidence and root-flow functions live in RegistryEvidence and
    RegistryRounds, reached through the registry's fallback)."""
    abi = merged_abi(_abi(container), *(_abi(c) for c in extra))
    canonical = json.dumps(abi, sort_keys=True, separators=(",", ":")).encode()
    return {"address": instance.address, "abi": abi, "abi_sha256": hashlib.sha256(canonical).hexdigest()}


def _write_atomically(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)


@click.command(cls=ConnectedProviderCommand)
@account_option(prompt=False)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the deployment record (default deployments/<network>.json).")
@click.option("--min-syncer-stake", default=100, show_default=True, type=int,
              help="Minimum syncer-candidate stake, in whole TNZO (token units, not atto-units).")
@click.option("--syncer-timeout", default=60, show_default=True, type=int,
              help="Seconds after the later of a round deadline and the syncer's election before a "
                   "silent syncer may be replaced.")
@click.option("--min-syncer-fee-per-round", default="0.001", show_default=True, type=str,
              help="Smallest syncer pay per round a task may offer, in TNZO (decimal token units).")
@click.option("--yes", is_flag=True, help="Do not ask before broadcasting on a non-devnet network.")
def cli(network, provider, account, out: Path | None, min_syncer_stake: int, syncer_timeout: int,
        min_syncer_fee_per_round: str, yes: bool):
    """Deploy TenzroToken, TrainingRegistry (RegistryRounds and RegistryEvidence before it), ReceiptVerifier
    and RewardEscrow."""
    chain_id = provider.chain_id
    devnet = chain_id in DEVNET_CHAIN_IDS
    if account is None:
        if not devnet:
            raise click.UsageError(f"chain id {chain_id} is not a devnet: pass --account ALIAS")
        account = accounts.test_accounts[0]
    out = out or REPO_ROOT / "deployments" / f"{network.name}.json"
    if not devnet and not yes:
        click.confirm(f"Deploy 6 contracts to {network.name} (chain id {chain_id}) from {account.address}?", abort=True)

    deploy_block = chain.blocks.head.number + 1
    token = account.deploy(project.TenzroToken, DEVNET_MINT if devnet else 0)
    try:
        min_fee_atto = int(Decimal(min_syncer_fee_per_round) * 10**18)
    except InvalidOperation:
        raise click.BadParameter(f"not a decimal TNZO amount: {min_syncer_fee_per_round!r}",
                                 param_hint="--min-syncer-fee-per-round") from None
    # The registry's modules first, with its parameters (EIP-3860: the registry's init code cannot
    # hold their code); each constructor checks its module's parameters (Registry__ModuleMismatch).
    min_stake_atto = min_syncer_stake * 10**18
    rounds = account.deploy(project.RegistryRounds, token.address, min_fee_atto)  # root-flow code
    evidence = account.deploy(project.RegistryEvidence, token.address, min_fee_atto, rounds.address,
                              min_stake_atto, syncer_timeout)  # evidence and permit code
    registry = account.deploy(project.TrainingRegistry, token.address, min_stake_atto, syncer_timeout,
                              min_fee_atto, evidence.address)
    verifier = account.deploy(project.ReceiptVerifier)
    verifier_at = verifier.address
    if devnet:
        # The precompile mimic: same runtime code at 0x…1008 (no constructor, no storage).
        provider.set_code(PRECOMPILE, provider.get_code(verifier.address))
        verifier_at = PRECOMPILE
    escrow = account.deploy(project.RewardEscrow, verifier_at)

    record = {
        "network": network.name,
        "chain_id": chain_id,
        "rpc_url": getattr(provider, "uri", None),
        # the devnet's IPFS node (`make deploy` passes it), so the CLI finds it on other ports too
        "ipfs_url": os.environ.get("TENZRO_IPFS_API"),
        "deploy_block": deploy_block,
        # block 0 tells this chain from any other with the same chain id and addresses (every
        # fresh anvil): the operator refuses a chain whose block 0 differs (ChainClient.check_deployment)
        "genesis_hash": "0x" + bytes(chain.blocks[0].hash).hex(),
        "deployer": account.address,
        "verifier_precompile": PRECOMPILE if devnet else None,
        "contracts": {
            "TenzroToken": _record(project.TenzroToken, token),
            "TrainingRegistry": _record(project.TrainingRegistry, registry, project.RegistryEvidence,
                                          project.RegistryRounds),
            "ReceiptVerifier": _record(project.ReceiptVerifier, verifier),
            "RewardEscrow": _record(project.RewardEscrow, escrow),
        },
    }
    _write_atomically(out, record)
    click.echo(f"deployed to {network.name} (chain {chain_id}) at block {deploy_block}; record: {out}")
    for name, c in record["contracts"].items():
        click.echo(f"  {name:<17} {c['address']}")
    if devnet:
        click.echo(f"  {'TRAINING_VERIFY':<17} {PRECOMPILE} (ReceiptVerifier runtime code)")
