"""Metrics served per role from separate registries, every per-run series labelled with the task;
log lines carry role, task and round, as text, key=value or JSON."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest

from tenzro_operator.logs import configure_logging, get_logger, log_context, log_kv, set_log_context
from tenzro_operator.metrics import RoleMetrics, SyncerMetrics, TrainerMetrics, start_metrics_server, task_label

TASK = b"\x1a" * 32
T = "0x" + "1a" * 32


def test_two_daemons_in_one_process_do_not_collide():
    t, s = TrainerMetrics(), SyncerMetrics()
    t2 = TrainerMetrics()  # same names, separate registry: no "Duplicated timeseries" error
    t.submitted.labels(task=T).inc(3)
    t.inner_step_seconds.labels(task=T).observe(0.02)
    s.rejections.labels(task=T, reason="NonFinite").inc()
    t.tx_sent("submitOuterGradient")
    pt, ps = start_metrics_server(0, t), start_metrics_server(0, s)
    body_t = httpx.get(f"http://127.0.0.1:{pt}/metrics").text
    body_s = httpx.get(f"http://127.0.0.1:{ps}/metrics").text
    assert f'tenzro_trainer_submitted_total{{task="{T}"}} 3.0' in body_t
    assert 'tenzro_chain_tx_total{method="submitOuterGradient"} 1.0' in body_t
    assert f'tenzro_trainer_inner_step_seconds_count{{task="{T}"}} 1.0' in body_t
    assert f'tenzro_syncer_rejections_total{{reason="NonFinite",task="{T}"}} 1.0' in body_s
    assert "tenzro_trainer_submitted" not in body_s
    assert t2.submitted.labels(task=T)._value.get() == 0


def test_every_per_run_series_is_labelled_with_the_task():
    """Every trainer_* / syncer_* series has the label ``task``; the role-wide ones (chain, IPFS,
    handler errors) are the only series without it."""
    role_wide = {n for n in RoleMetrics().registry._names_to_collectors}
    for m in (TrainerMetrics(), SyncerMetrics()):
        collectors = set(m.registry._names_to_collectors.values())
        per_run = [c for c in collectors if not any(n in role_wide for n in m.registry._get_names(c))]
        assert len(per_run) >= 6
        for c in per_run:
            assert "task" in c._labelnames, c._name
            with pytest.raises(ValueError):  # an unlabelled use is refused, not silently merged
                c.labels(**{k: "x" for k in c._labelnames if k != "task"})


def test_task_label_is_the_full_id():
    assert task_label(TASK) == T == task_label(T) == task_label(T[2:].upper())
    with pytest.raises(ValueError, match="32 bytes"):
        task_label(b"\x01" * 31)
    with pytest.raises(ValueError, match="not hex"):
        task_label("0xzz")


def test_port_taken_is_a_clear_error():
    import pytest

    from tenzro_operator.errors import TenzroError

    m = TrainerMetrics()
    port = start_metrics_server(0, m)
    with pytest.raises(TenzroError, match=f"metrics port 127.0.0.1:{port} is not available"):
        start_metrics_server(port, TrainerMetrics())


def test_log_lines_carry_context_and_kv():
    buf = io.StringIO()
    configure_logging("INFO", fmt="kv", role="trainer", stream=buf)
    try:
        log = get_logger("test")
        with log_context(task=b"\xab" * 32, round=4):
            log_kv(log, logging.INFO, "submitted fragment", fragment=2, cid="bafk")
        log.info("outside")
        logging.getLogger("web3.providers").info("noisy")
        lines = buf.getvalue().splitlines()
        assert "role=trainer task=0xabababab round=4" in lines[0]
        assert 'msg="submitted fragment" fragment=2 cid=bafk' in lines[0]
        assert "round=-" in lines[1]
        assert len(lines) == 2  # web3 quieted to WARNING
        buf2 = io.StringIO()
        configure_logging("INFO", fmt="text", stream=buf2)
        set_log_context(role="syncer", round=1)
        log.warning("late")
        assert " syncer task=- round=1 tenzro.test: late" in buf2.getvalue()
    finally:
        set_log_context(role="-")
        configure_logging("WARNING")


def test_log_context_restores_what_was_set_inside_it():
    buf = io.StringIO()
    configure_logging("INFO", fmt="kv", stream=buf)
    try:
        log = get_logger("test")
        log.info("before")
        with log_context(role="trainer"):
            set_log_context(task=b"\xcd" * 32, round=3)  # as a daemon's run does while it serves
            log.info("inside")
        log.info("after")
        before, inside, after = (ln.split(" logger=")[0].split(" ", 2)[2] for ln in buf.getvalue().splitlines())
        assert inside == "role=trainer task=0xcdcdcdcd round=3"
        assert after == before != inside
    finally:
        configure_logging("WARNING")


def test_json_log_lines():
    buf = io.StringIO()
    configure_logging("INFO", fmt="json", role="syncer", stream=buf)
    try:
        log = get_logger("test")
        with log_context(task=TASK, round=7):
            log.info("finalized", extra={"kv": dict(accepted=4, root=b"\x01\x02", loss=0.5, bad=float("nan"),
                                                    msg="field named like a base key", tags=("a", 1))})
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                log.exception("handler failed")
        log.warning("outside \"quoted\" ü")
        a, b, c = (json.loads(line) for line in buf.getvalue().splitlines())
        assert {k: a[k] for k in ("level", "role", "task", "round", "logger", "msg")} == {
            "level": "INFO", "role": "syncer", "task": T, "round": 7, "logger": "tenzro.test", "msg": "finalized"}
        assert a["ts"].endswith("Z") and "T" in a["ts"]
        assert (a["accepted"], a["root"], a["loss"], a["bad"], a["kv_msg"], a["tags"]) == \
            (4, "0x0102", 0.5, "nan", "field named like a base key", ["a", 1])
        assert b["level"] == "ERROR" and "RuntimeError: boom" in b["exc"] and b["round"] == 7
        assert (c["level"], c["msg"]) == ("WARNING", 'outside "quoted" ü')  # context: whatever was set before
    finally:
        set_log_context(role="-")
        configure_logging("WARNING")


def test_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        configure_logging("INFO", fmt="xml")
