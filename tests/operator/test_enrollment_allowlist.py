"""A sponsor's enrollment allowlist (issue #26; the registry's tier 1) through the operator on a
real anvil with the deployed contracts: `ChainClient.post_task` with ``enrollment_allowlist`` posts tier 1 and
allows the listed addresses; an address not on the list is refused by name and keeps its tokens;
an Open spec is unchanged (tier 0, anyone enrolls)."""

from __future__ import annotations

import pytest

from op_stack import make_spec, post_root_run
from stack import TOKEN
from tenzro_operator.errors import ChainRevert, SpecError


def _allowlist_spec(addresses, **overrides):
    return make_spec(enrollment_allowlist=addresses, **overrides)


def test_only_listed_trainers_enroll_in_an_allowlist_run(roles):
    sponsor, (t0, t1, sybil) = roles["sponsor"], roles["trainers"]
    spec = _allowlist_spec([t0.address, t1.address])
    assert spec.registry_tier == 1
    tid = post_root_run(sponsor, spec)
    assert sponsor.get_run(tid).tier == 1
    before = sybil.token_balance()
    with pytest.raises(ChainRevert) as ei:
        sybil.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{sybil.address}")
    assert ei.value.error_name == "Registry__NotAllowed" and sybil.token_balance() == before
    for t in (t0, t1):
        t.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{t.address}")
    assert sponsor.get_run(tid).enrolled_count == 2
    with pytest.raises(ChainRevert) as ei:  # enrollment is over: the list is closed
        sponsor.allow_trainers(tid, [sybil.address])
    assert ei.value.error_name == "Registry__WrongStatus"


def test_an_open_spec_posts_tier_0_and_has_no_list(roles):
    sponsor = roles["sponsor"]
    spec = make_spec()
    assert spec.enrollment_allowlist is None and spec.registry_tier == 0
    sponsor.post_task(spec, "bafyspec")
    with pytest.raises(ChainRevert) as ei:
        sponsor.allow_trainers(spec.task_id_bytes, [roles["trainers"][2].address])
    assert ei.value.error_name == "Registry__UnsupportedTier"


@pytest.mark.parametrize("bad, why", [(["0x12"], "40 hex"), (["0x" + "ab" * 20, "0x" + "AB" * 20], "twice"),
                                      ([], "at least 1")])
def test_a_bad_allowlist_is_refused_with_what_is_wrong(bad, why):
    with pytest.raises((SpecError, ValueError), match=why):
        _allowlist_spec(bad)


def test_a_trainer_daemon_skips_an_allowlist_run_that_does_not_name_it(stack, ipfs_url, roles, tmp_path):
    """Discovery reads the run's spec: a trainer not on its list leaves the run alone (no refused
    transaction, no stake at risk); a listed one picks it. (Sponsor: anvil 9, which no other test
    posts from, so the sponsor filter isolates this run.)"""
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.keys import anvil_account
    from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig

    sponsor = roles["base"].with_account(anvil_account(9))
    listed, other = roles["trainers"][0], roles["trainers"][2]
    spec = _allowlist_spec([listed.address], sponsor_address=sponsor.address)
    from tenzro_operator.spec import canonical_json

    with IpfsClient(ipfs_url) as ipfs:  # the daemons read the spec: pinned where they look
        tid = post_root_run(sponsor, spec, ipfs.add(canonical_json(spec)))

    def daemon(client, name):
        cfg = TrainerDaemonConfig(node_rpc=stack.rpc_url, ipfs_api=ipfs_url, deployments=stack.deployments,
                                  data_dir=tmp_path / name, metrics_port=None, allow_sponsors=[sponsor.address])
        return TrainerDaemon(cfg, client.account, client, IpfsClient(ipfs_url))

    outsider = daemon(other, "other")
    assert outsider._discover() is None and tid in outsider.bad_runs
    assert daemon(listed, "listed")._discover() == tid


def test_new_spec_allow_and_post_task_make_an_allowlist_run(real_spec, run_cli, keystores, roles):
    """The CLI path: ``tenzro train new-spec --allow A --allow B`` writes the list into the spec,
    ``post-task`` posts tier 1 and allows them; a bad address is a one-line error."""
    t0, t1 = roles["trainers"][0], roles["trainers"][1]
    spec, path = real_spec(allow=t0.address)
    assert spec.enrollment_allowlist == [t0.address]
    res = run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"])
    assert res.exit_code == 0, res.output
    assert roles["base"].get_run(spec.task_id_bytes).tier == 1
    with pytest.raises(ChainRevert, match="Registry__NotAllowed"):
        t1.enroll_trainer(spec.task_id_bytes, 100 * TOKEN, f"did:tenzro:machine:{t1.address}")
    t0.enroll_trainer(spec.task_id_bytes, 100 * TOKEN, f"did:tenzro:machine:{t0.address}")
