"""Metrics served per role from separate registries; log lines carry role, task and round."""

from __future__ import annotations

import io
import logging

import httpx

from tenzro_operator.logs import configure_logging, get_logger, log_context, log_kv, set_log_context
from tenzro_operator.metrics import SyncerMetrics, TrainerMetrics, start_metrics_server


def test_two_daemons_in_one_process_do_not_collide():
    t, s = TrainerMetrics(), SyncerMetrics()
    t2 = TrainerMetrics()  # same names, separate registry: no "Duplicated timeseries" error
    t.submitted.inc(3)
    t.inner_step_seconds.observe(0.02)
    s.rejections.labels(reason="NonFinite").inc()
    t.tx_sent("submitOuterGradient")
    pt, ps = start_metrics_server(0, t), start_metrics_server(0, s)
    body_t = httpx.get(f"http://127.0.0.1:{pt}/metrics").text
    body_s = httpx.get(f"http://127.0.0.1:{ps}/metrics").text
    assert "tenzro_trainer_submitted_total 3.0" in body_t
    assert 'tenzro_chain_tx_total{method="submitOuterGradient"} 1.0' in body_t
    assert "tenzro_trainer_inner_step_seconds_count 1.0" in body_t
    assert 'tenzro_syncer_rejections_total{reason="NonFinite"} 1.0' in body_s
    assert "tenzro_trainer_submitted" not in body_s
    assert t2.submitted._value.get() == 0


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
