"""Shared helpers of the benchmark scripts: the exact command, machine load, result files."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def command() -> str:
    """The command line that produced a result, relative to the repository root."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), Path(__file__).resolve().parents[2])
    return " ".join([".venv/bin/python", script, *map(shlex.quote, sys.argv[1:])])


def machine() -> dict:
    """CPU count, torch threads and the load average at the time of the call."""
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "loadavg_1_5_15": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def write(name: str, markdown: str, data: dict) -> tuple[Path, Path]:
    """Write ``results/<name>.md`` (command at the top) and ``results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    cmd = command()
    md = RESULTS / f"{name}.md"
    md.write_text(f"```\n{cmd}\n```\n\n{markdown.rstrip()}\n")
    js = RESULTS / f"{name}.json"
    js.write_text(json.dumps({"command": cmd, **data}, indent=2, default=float) + "\n")
    return md, js
