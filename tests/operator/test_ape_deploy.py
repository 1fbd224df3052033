"""The deployment record written by the project's own `ape run deploy` works with the chain client
(the other tests deploy through web3 for speed; this one checks the real script's output)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from op_stack import REPO, Anvil, make_spec
from stack import fund
from tenzro_operator.chain import ChainClient, RunStatus
from tenzro_operator.errors import ChainRevert
from tenzro_operator.keys import anvil_account


@pytest.mark.slow
def test_ape_run_deploy_record_drives_the_client(tmp_path):
    anvil = Anvil(tmp_path).start()
    try:
        out = tmp_path / "deployments.json"
        env = dict(os.environ, APE_FOUNDRY_HOST=anvil.url, TENZRO_IPFS_API="http://127.0.0.1:5002",
                   PATH=f"{REPO / 'node_modules/.bin'}:{os.environ.get('PATH', '')}")
        proc = subprocess.run([str(REPO / ".venv/bin/ape"), "run", "deploy", "--network", "ethereum:local:foundry",
                               "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        record = json.loads(out.read_text())
        assert set(record["contracts"]) >= {"TenzroToken", "TrainingRegistry", "ReceiptVerifier", "RewardEscrow"}
        assert record["chain_id"] == 31337 and record["verifier_precompile"].endswith("1008")
        assert record["ipfs_url"] == "http://127.0.0.1:5002"  # the CLI's default IPFS node for this devnet
        # block 0's hash, which tells this anvil from any other (ChainClient refuses a chain whose differs)
        assert record["genesis_hash"].startswith("0x") and len(record["genesis_hash"]) == 66

        base = ChainClient(anvil.url, out)  # start-up checks: chain id, code at every address and at 0x…1008
        # the script's defaults: 100 TNZO minimum syncer stake, 0.001 TNZO minimum syncer pay per round
        assert (base.min_syncer_stake(), base.min_syncer_fee_per_round()) == (100 * 10**18, 10**15)
        fund(anvil.url, out, [1], 10**24)
        sponsor = base.with_account(anvil_account(1))
        spec = make_spec()
        res = sponsor.post_task(spec, "bafyspec")
        assert res.event("TaskPosted")["params"]["fragmentSizes"] == [600, 400]
        assert base.get_run(spec.task_id_bytes).status == RunStatus.ENROLLING
        with pytest.raises(ChainRevert) as ei:
            sponsor.post_task(spec, "bafyspec", approve=False)
        assert ei.value.error_name == "Registry__TaskExists"
        got = base.get_logs(record["deploy_block"], base.block_number(), ["TaskPosted"], task_id=spec.task_id_bytes)
        assert len(got) == 1
    finally:
        anvil.stop()
