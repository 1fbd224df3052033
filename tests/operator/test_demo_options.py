"""The demo refuses, before it touches the devnet, a shape the registry cannot run."""

import pytest
from click.testing import CliRunner

from tenzro_operator.demo import DemoError, DemoSettings, check_settings, main


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
