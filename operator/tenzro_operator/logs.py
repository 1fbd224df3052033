"""Logging, configured once per process: every line carries the role, task and round.

The context lives in :mod:`contextvars` (`log_context`, `set_log_context`), so a daemon sets
it once per round and every library call below it logs with the same prefix::

    2026-04-25T10:00:00Z INFO  trainer task=0x1a2b3c4d round=3 tenzro.trainer: submitted fragment=2 cid=bafk...

With ``fmt="kv"`` each line is key=value pairs only (``ts=... level=INFO role=trainer ...
msg="submitted" fragment=2``), easy to grep. With ``fmt="json"`` each line is one JSON object
(JSON Lines) for log shippers::

    {"ts": "2026-04-25T10:00:00.123Z", "level": "INFO", "role": "trainer", "task": "0x1a2b…(64 hex)",
     "round": 3, "logger": "tenzro.trainer", "msg": "submitted", "fragment": 2, "cid": "bafk..."}

``task`` is the full 0x-hex id there (the ``task`` label of the metrics), ``round`` a number,
and absent context is ``null``; an exception adds ``exc`` (the traceback text). Extra fields go
through ``log.info("submitted", extra={"kv": {"fragment": 2}})`` or `log_kv`; one named like a
base key is written with a ``kv_`` prefix.
Noisy libraries (web3, urllib3, httpx, httpcore, asyncio) are raised to WARNING.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from typing import Any, Iterator

__all__ = ["LOG_FORMATS", "configure_logging", "get_logger", "log_context", "log_kv", "set_log_context"]

#: The line formats of `configure_logging`.
LOG_FORMATS = ("text", "kv", "json")

_role: contextvars.ContextVar[str] = contextvars.ContextVar("tenzro_role", default="-")
_task: contextvars.ContextVar[str] = contextvars.ContextVar("tenzro_task", default="-")  # as given (full)
_round: contextvars.ContextVar[str] = contextvars.ContextVar("tenzro_round", default="-")
NOISY = ("web3", "urllib3", "httpx", "httpcore", "asyncio", "eth_account", "matplotlib", "PIL")
_HANDLER_NAME = "tenzro"


def _task_text(task: Any) -> str:
    if task is None:
        return "-"
    if isinstance(task, (bytes, bytearray)):
        task = "0x" + bytes(task).hex()
    return str(task)


def _short_task(s: str) -> str:
    return s[:10] if s.startswith("0x") and len(s) == 66 else s


def set_log_context(role: str | None = None, task: Any = None, round: int | None = None) -> None:
    """Set the role / task / round of every following log line in this context (thread or task).
    Arguments left None keep their value."""
    if role is not None:
        _role.set(role)
    if task is not None:
        _task.set(_task_text(task))
    if round is not None:
        _round.set(str(round))


@contextlib.contextmanager
def log_context(role: str | None = None, task: Any = None, round: int | None = None) -> Iterator[None]:
    """`set_log_context` for the duration of a ``with`` block. On exit role, task and round are
    all restored, also those that `set_log_context` changed inside the block (a daemon's run
    sets its task and round as it goes)."""
    saved = [(var, var.get()) for var in (_role, _task, _round)]
    set_log_context(role, task, round)
    try:
        yield
    finally:
        for var, value in saved:
            var.set(value)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.role, record.task_full, record.round = _role.get(), _task.get(), _round.get()
        record.task = _short_task(record.task_full)
        kv = getattr(record, "kv", None)
        record.kvtext = "".join(f" {k}={_kv_value(v)}" for k, v in kv.items()) if kv else ""
        return True


def _kv_value(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        v = "0x" + bytes(v).hex()
    s = str(v)
    return f'"{s}"' if (" " in s or "=" in s or not s) else s


class _KvFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = (f"ts={ts} level={record.levelname} role={record.role} task={record.task} round={record.round} "
                f"logger={record.name} msg={_kv_value(record.getMessage())}{record.kvtext}")
        if record.exc_info:
            line += " exc=" + _kv_value(self.formatException(record.exc_info).replace("\n", " | "))
        return line


class _JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    BASE = ("ts", "level", "role", "task", "round", "logger", "msg", "exc")

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        rnd = record.round
        out: dict[str, Any] = {
            "ts": ts, "level": record.levelname, "role": None if record.role == "-" else record.role,
            "task": None if record.task_full == "-" else record.task_full,
            "round": int(rnd) if rnd.isdigit() else (None if rnd == "-" else rnd),
            "logger": record.name, "msg": record.getMessage(),
        }
        for k, v in (getattr(record, "kv", None) or {}).items():
            out[f"kv_{k}" if k in self.BASE else str(k)] = _json_value(v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _json_value(v: Any) -> Any:
    """``v`` as JSON can hold it: bytes as 0x-hex, containers recursively, anything else not a
    JSON scalar as its ``str``."""
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else str(v)
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


class _TextFormatter(logging.Formatter):
    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-5s %(role)s task=%(task)s round=%(round)s %(name)s: "
                         "%(message)s%(kvtext)s", datefmt="%Y-%m-%dT%H:%M:%SZ")


def configure_logging(level: str | int = "INFO", fmt: str = "text", role: str | None = None,
                      stream=None) -> None:
    """Install the tenzro handler on the root logger (once; later calls replace it, so the level
    and format can change) and quiet the noisy libraries.

    Args:
        level: ``"DEBUG"`` .. ``"ERROR"``.
        fmt: ``"text"`` (human), ``"kv"`` (key=value, one line per record) or ``"json"`` (one
            JSON object per line).
        role: default role prefix (``"trainer"``, ``"syncer"``, ``"sponsor"``, ``"cli"``).
        stream: where lines go (default stderr).
    Raises:
        ValueError: an unknown ``fmt``.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: one of {', '.join(LOG_FORMATS)}")
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(_ContextFilter())
    handler.setFormatter({"kv": _KvFormatter, "json": _JsonFormatter}.get(fmt, _TextFormatter)())
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    if role is not None:
        set_log_context(role=role)


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger("tenzro." + name)``."""
    return logging.getLogger(name if name.startswith("tenzro") else f"tenzro.{name}")


def log_kv(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    """Log ``msg`` with structured ``key=value`` fields appended."""
    logger.log(level, msg, extra={"kv": fields})
