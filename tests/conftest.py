"""Every suite: the `tenzro` CLI invoked in-process (click's CliRunner) configures the root logger
for a process (`tenzro_operator.logs.configure_logging`: level ERROR by default, its own handler).
Restore the root logger after each test, so one test's CLI call cannot silence the log records a
later test reads through ``caplog``."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _root_logger_restored():
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
