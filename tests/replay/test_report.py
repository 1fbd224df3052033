"""The replay report and the outer-optimizer settings of a task (no devnet needed)."""

from __future__ import annotations

import json
from pathlib import Path

from tenzro_operator.replay import Mismatch, ReplayReport, RoundReport
from tenzro_operator.spec import parse_spec
from tenzro_operator.task_runtime import outer_config

EXAMPLE = Path(__file__).resolve().parents[2] / "operator/examples/task_spec.json"


def test_first_mismatch_is_the_earliest_round_then_the_receipt():
    rep = ReplayReport(b"\x01" * 32, rounds=[RoundReport(0), RoundReport(1), RoundReport(2)])
    assert rep.ok and rep.first_mismatch is None and "receipt verified by replay" in str(rep)
    rep.receipt_checks.append(Mismatch("run root (recomputed by replay vs receipt)", "0xaa", "0xbb"))
    rep.rounds[2].mismatches.append(Mismatch("round 2 fragment 0 state (recomputed vs committed)", "0x01", "0x02", 2))
    rep.rounds[1].mismatches.append(Mismatch("round 1 transcript hash (getRound vs event)", "0x03", "0x04", 1))
    assert not rep.ok
    assert [m.round for m in rep.mismatches] == [1, 2, None]
    assert rep.first_mismatch.what == "round 1 transcript hash (getRound vs event)"
    out = json.loads(json.dumps(rep.to_json()))
    assert out["ok"] is False and out["first_mismatch"]["what"] == "round 1 transcript hash (getRound vs event)"
    assert [r["ok"] for r in out["rounds"]] == [True, False, False]
    text = str(rep)
    assert "first mismatch: round 1 transcript hash (getRound vs event): expected 0x03, got 0x04" in text


def test_outer_config_defaults_and_spec_override():
    raw = json.loads(EXAMPLE.read_text())
    cfg = outer_config(parse_spec(raw))
    assert (cfg.lr, cfg.momentum, cfg.nesterov) == (0.7, 0.9, True)  # DiLoCo's outer Nesterov defaults
    raw["metadata"]["outer"] = {"lr": 0.5, "momentum": 0.8}
    cfg = outer_config(parse_spec(raw))
    assert (cfg.lr, cfg.momentum, cfg.nesterov) == (0.5, 0.8, True)
    raw["metadata"]["outer"] = {"lr": 1.0, "momentum": 0, "nesterov": False}  # plain SGD
    cfg = outer_config(parse_spec(raw))
    assert (cfg.lr, cfg.momentum, cfg.nesterov) == (1.0, 0.0, False)
    # unknown keys are refused when the spec is parsed (tests/operator/test_spec.py has the rest)
