"""The demo refuses, before it touches the devnet, a shape the registry cannot run; its spec has
the robust defaults of a new spec, and it runs the one (root) flow."""

import pytest
from click.testing import CliRunner

from tenzro_operator.demo import DemoError, DemoSettings, check_settings, main, spec_draft
from tenzro_trainer.config import ROBUST_DEFAULTS


@pytest.mark.parametrize("kw, words", [
    (dict(trainers=257, quorum=6), "the registry takes 1 to 256"),
    (dict(trainers=8, quorum=9), "between 1 and --trainers (8)"),
    (dict(trainers=200, quorum=150, fragments=12), "M x F = 200 x 12 = 2400"),
    (dict(fragments=129), "1 to 128"),
])
def test_bad_shape_is_refused_up_front(kw, words):
    with pytest.raises(DemoError, match="bad demo options") as exc:
        check_settings(DemoSettings(**kw))
    assert words in str(exc.value)


def test_reference_shape_and_the_largest_are_accepted():
    check_settings(DemoSettings(trainers=8, quorum=6, fragments=12))
    check_settings(DemoSettings(trainers=256, quorum=192, fragments=8))  # M x F = 2048, the registry's cap


def test_the_cli_says_why_and_exits_1_without_a_devnet():
    res = CliRunner().invoke(main, ["--trainers", "8", "--quorum", "9", "--rpc", "http://127.0.0.1:9"])
    assert res.exit_code == 1
    assert "bad demo options" in res.output and "--quorum (K) is 9" in res.output


SPONSOR = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def test_the_default_spec_has_the_robust_defaults():
    d = spec_draft(DemoSettings(), "demo-x", SPONSOR)
    assert d.aggregation == {ROBUST_DEFAULTS["rule"]: ROBUST_DEFAULTS["rule_params"]}
    assert d.norm_multiple == ROBUST_DEFAULTS["norm_multiple"]
    assert d.score_min == (0.0 if ROBUST_DEFAULTS["scoring"] else None)
    # a round's commit phase (grace - min(challenge window, grace / 2)) leaves the trainers time to train
    s = DemoSettings()
    assert s.grace_window_ms - min(s.challenge_window_ms, s.grace_window_ms // 2) >= 15_000


def test_scoring_off_keeps_the_rule_and_screen():
    d = spec_draft(DemoSettings(scoring=False), "demo-x", SPONSOR)
    assert d.score_min is None and d.norm_multiple == ROBUST_DEFAULTS["norm_multiple"]
    assert d.aggregation == {ROBUST_DEFAULTS["rule"]: ROBUST_DEFAULTS["rule_params"]}


def test_the_cli_has_no_flow_option_any_more():
    res = CliRunner().invoke(main, ["--flow", "v1"])
    assert res.exit_code == 2 and "No such option: --flow" in res.output


def test_waiting_for_the_seal_prints_a_line_per_round(capsys, monkeypatch):
    """Issue #27 item 5: `make demo` printed nothing while it trained (a spinner shows nothing in a
    log or a pipe). The chain here is a stand-in that walks a run through its states."""
    from types import SimpleNamespace

    from tenzro_operator import demo
    from tenzro_operator.chain import RunStatus

    states = [(RunStatus.ENROLLING, 0, 1), (RunStatus.TRAINING, 0, 3), (RunStatus.TRAINING, 0, 3),
              (RunStatus.TRAINING, 1, 3), (RunStatus.TRAINING, 2, 3), (RunStatus.COMPLETED, 3, 3),
              (RunStatus.SEALED, 3, 3)]
    runs = iter(SimpleNamespace(status=st, current_round=r, max_rounds=3, enrolled_count=n, trainer_count=3)
                for st, r, n in states)
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)
    demo.wait_sealed(SimpleNamespace(get_run=lambda tid: next(runs)), b"\0" * 32, [], DemoSettings())
    lines = [ln.split("s  ", 1)[1] for ln in capsys.readouterr().out.splitlines() if "s  run " in ln]
    assert lines == ["run ENROLLING: round 1/3, 1/3 trainers enrolled", "run TRAINING: round 1/3, 3/3 trainers enrolled",
                     "run TRAINING: round 2/3, 3/3 trainers enrolled", "run TRAINING: round 3/3, 3/3 trainers enrolled",
                     "run COMPLETED: round 3/3, 3/3 trainers enrolled"]


def test_waiting_for_the_seal_waits_out_an_rpc_that_stops_answering(capsys, monkeypatch):
    """The CI of stop 52: the harness gave up on the whole run after one getRun found anvil silent
    for ~55 s (5 retries), while the daemons, which wait an outage out, went on. The stand-in chain
    here fails twice, then answers; a chain that never answers fails with the RPC's error once the
    demo's timeout has passed."""
    from types import SimpleNamespace

    from tenzro_operator import demo
    from tenzro_operator.chain import RunStatus
    from tenzro_operator.errors import RpcUnavailable

    calls = iter([RpcUnavailable("http://10.77.0.1:8545", 5, "ReadTimeout"), RpcUnavailable("http://10.77.0.1:8545"),
                  SimpleNamespace(status=RunStatus.SEALED, current_round=1, max_rounds=1, enrolled_count=1,
                                  trainer_count=1)])

    def get_run(tid):
        got = next(calls)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(demo.time, "sleep", lambda s: None)
    demo.wait_sealed(SimpleNamespace(get_run=get_run), b"\0" * 32, [], DemoSettings())
    out = capsys.readouterr().out
    assert out.count("the RPC is not answering") == 1 and "ReadTimeout" in out and "the RPC answers again" in out

    def never(tid):
        raise RpcUnavailable("http://10.77.0.1:8545", 5, "ReadTimeout")

    with pytest.raises(DemoError, match="not sealed within 0 s.*ReadTimeout"):
        demo.wait_sealed(SimpleNamespace(get_run=never), b"\0" * 32, [], DemoSettings(timeout_s=0))
