"""Every suite.

- The `tenzro` CLI invoked in-process (click's CliRunner) configures the root logger for a process
  (`tenzro_operator.logs.configure_logging`: level ERROR by default, its own handler). Restore the
  root logger after each test, so one test's CLI call cannot silence the log records a later test
  reads through ``caplog``.
- Whole-system files (``tests/e2e``, ``tests/hosts``: one devnet run of minutes per test) are
  collected first, then the files with the most slow tests. `make test` runs
  ``-n 3 --dist loadfile --no-loadscope-reorder``: the workers take whole files in collection
  order, so the long files start first and the short ones fill the end (longest first; xdist's own
  reorder, by test count, put the one-test end-to-end files last and left one worker running
  alone at the end).
"""

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


def pytest_collection_modifyitems(config, items):
    slow = {}
    for item in items:
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    whole_system = lambda item: item.path.parent.name in ("e2e", "hosts")  # noqa: E731
    # a stable sort: files and the tests in them keep their order otherwise
    items.sort(key=lambda item: (not whole_system(item), -slow[item.path]))
