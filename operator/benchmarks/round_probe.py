"""Per-round resources of the syncer process and of the IPFS node, cut where the syncer finalizes.

A sampler thread watches ``syncer-rounds.jsonl`` (the syncer appends one line per finalized
round) and, every time a line appears, closes a round: the syncer's CPU time since the previous
cut (user + system, all threads, from ``/proc/<pid>/stat``), its peak resident memory since the
previous cut (``VmHWM`` of ``/proc/<pid>/status``, reset at each cut by writing ``5`` to
``/proc/<pid>/clear_refs``), and the IPFS bytes the `IpfsMeter` counted since the previous cut.
Round r is thus everything between the finalization of round r-1 and that of round r (trainers
fetch round r's weights, train, pin and submit; the syncer validates, aggregates, pins and
finalizes). Round 0 also holds the start-up of every daemon.

    probe = RoundProbe(work / "syncer" / "syncer-rounds.jsonl", syncer_pid, meter).start()
    ...                                   # the run
    rows = probe.stop()                   # [{"round", "cpu_s", "peak_rss_mib", "ipfs_up", "ipfs_down"}]

Linux only (``/proc``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ipfs_meter import IpfsMeter

__all__ = ["ProcStats", "RoundProbe"]

MIB = 1 << 20


class ProcStats:
    """CPU time and peak resident memory of one process, from ``/proc``.

    Args:
        pid: the process id (the syncer daemon's).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._tick = os.sysconf("SC_CLK_TCK")

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process so far (all its threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime (fields 14, 15 of stat)

    def peak_rss_bytes(self) -> int:
        """``VmHWM``: the peak resident set since the start or the last `reset_peak`, bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise OSError(f"/proc/{self.pid}/status has no VmHWM")

    def reset_peak(self) -> None:
        """Reset ``VmHWM`` to the current resident set (``clear_refs`` 5; same user needed)."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")


class RoundProbe:
    """Cuts the syncer's CPU, peak memory and the IPFS bytes per finalized round (module docstring).

    Args:
        rounds_jsonl: the syncer's ``syncer-rounds.jsonl`` (need not exist yet).
        pid: the syncer process id.
        meter: the IPFS byte counter every daemon talks through.
        interval_s: sampling period, seconds.
    """

    def __init__(self, rounds_jsonl: Path, pid: int, meter: IpfsMeter, interval_s: float = 0.2) -> None:
        self.path, self.proc, self.meter, self.interval_s = Path(rounds_jsonl), ProcStats(pid), meter, interval_s
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="round-probe", daemon=True)
        self._cpu = 0.0
        self._ipfs = (0, 0)

    def start(self) -> "RoundProbe":
        """Take the first sample (round 0 starts now) and sample from a daemon thread; returns self."""
        self._cpu = self.proc.cpu_s()
        self._ipfs = self.meter.totals()
        self.proc.reset_peak()
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        """Stop sampling (cutting a last round if its line appeared meanwhile); returns the rows."""
        self._stop.set()
        self._thread.join(5)
        return self.rows

    def _lines(self) -> int:
        try:
            return sum(1 for line in self.path.read_text().splitlines() if line.strip())
        except FileNotFoundError:
            return 0

    def _loop(self) -> None:
        seen = 0
        while True:
            stopping = self._stop.wait(self.interval_s)
            try:
                n = self._lines()
                if n > seen:
                    self._cut(range(seen, n))
                    seen = n
            except (OSError, ValueError, IndexError):  # the syncer exited: nothing more to cut
                return
            if stopping:
                return

    def _cut(self, rounds: range) -> None:
        """Close ``rounds`` (usually one; two finalized within one sample share the figures)."""
        cpu, ipfs, peak = self.proc.cpu_s(), self.meter.totals(), self.proc.peak_rss_bytes()
        k = len(rounds)
        for r in rounds:
            self.rows.append({"round": r, "cpu_s": (cpu - self._cpu) / k, "peak_rss_mib": peak / MIB,
                              "ipfs_up": (ipfs[0] - self._ipfs[0]) // k, "ipfs_down": (ipfs[1] - self._ipfs[1]) // k})
        self._cpu, self._ipfs = cpu, ipfs
        self.proc.reset_peak()
