"""Progress bars for people at a terminal (rich); a no-op when stderr is not a terminal (logs only)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

Tick = Callable[[int, int], None]


@contextmanager
def progress_bar(description: str, total: int, console: Console | None = None) -> Iterator[Tick]:
    """`with progress_bar("round 3: inner steps", H) as tick: ... tick(done, total)`."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total_: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done, total_: bar.update(task, completed=done, total=total_)
