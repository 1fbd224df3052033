"""Hosts on one machine: one Linux network namespace per host, joined to a bridge by virtual links.

Each harness names its namespaces ``tzh<pid>x<n>-<host>`` (``<n>`` counts the harnesses of one
process) and its bridge namespace ``tzh<pid>x<n>-br``. Host ``i`` (in the order given, from 1) has one
interface, ``eth0``, with address ``10.77.0.<i>/24``; the other end of its veth pair, ``v<i>``, sits in
the bridge namespace on the bridge ``br0`` (no address). Nothing is created in the root namespace, and
no namespace has a default route: the hosts reach each other and nothing else::

    with Hosts(["a", "b"]) as hosts:
        hosts.run("a", ["ip", "-br", "addr"])
        with hosts.inside("b"):            # this thread's sockets and children live in host b
            proc = start_ipfs_node(repo, 5001, host=hosts.address("b"))
        hosts.counters("a")                # LinkCounters(tx_bytes=..., rx_bytes=...) of a's eth0
        hosts.cap("a", rate_bit=10_000_000)  # tc tbf on both ends of a's link
        hosts.cut("a"); hosts.restore("a")  # a's link down / up

On start the harness deletes the namespaces left by a harness of a process that is gone (a crash:
``tzh<pid>x...`` with no process ``<pid>``), killing what still runs in them; on exit (the context
manager, or atexit for a harness never closed) it kills the processes in its namespaces and deletes
them. Needs root and iproute2 (``ip``, ``tc``): ``unavailable_reason()`` says why not, for a skip.

Sources: ip-netns(8), ip-link(8) (``type veth peer name ... netns ...``), tc-tbf(8); the
interface counters are ``/sys/class/net/<if>/statistics/{tx,rx}_bytes`` read inside the namespace
(``ip netns exec`` mounts that namespace's sysfs).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from tenzro_operator.devnet import pid_alive

FAMILY = re.compile(r"^tzh(\d+)x(\d+)-")  # the names every harness uses: tzh<pid>x<n>-...
NETNS_DIR = Path("/var/run/netns")
SUBNET = "10.77.0"  # /24: host i is SUBNET.i
CLONE_NEWNET = 0x40000000  # <linux/sched.h>
_counter = itertools.count(1)
_open: set[str] = set()  # prefixes of this process's harnesses not closed yet


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command of the harness failed; the message carries its command and stderr."""


@dataclass(frozen=True)
class LinkCounters:
    """Bytes counted by a host's interface since it was created (tx: sent by the host, rx: received)."""

    tx_bytes: int
    rx_bytes: int

    def __sub__(self, before: LinkCounters) -> LinkCounters:
        return LinkCounters(self.tx_bytes - before.tx_bytes, self.rx_bytes - before.rx_bytes)


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here (for ``pytest.skip``), or None when they can."""
    if os.name != "posix" or not Path("/proc/self/ns/net").exists():
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); run as root, as CI does"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"iproute2's `{tool}` is not installed"
    return None


def _sh(argv: Sequence[str], *, check: bool = True, timeout_s: float = 20.0) -> subprocess.CompletedProcess:
    """Run an ``ip``/``tc`` command; raises NetnsError with its stderr when it fails and ``check``."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _namespaces() -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    out = _sh(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_inside(ns: str, grace_s: float = 5.0) -> None:
    """SIGTERM the processes in namespace ``ns`` (``ip netns pids``), SIGKILL those left after ``grace_s``."""
    def pids() -> list[int]:
        done = _sh(["ip", "netns", "pids", ns], check=False)
        return [int(p) for p in done.stdout.split() if p.isdigit()]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [p for p in pids() if p != os.getpid()]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [p for p in pids() if p != os.getpid()]
        if not left:
            return


def _delete(ns: str) -> None:
    _kill_inside(ns)
    _sh(["ip", "netns", "del", ns], check=False)


def remove_leftovers() -> list[str]:
    """Delete the namespaces of harnesses whose process is gone, or of this process but not open
    (a crash); returns their names. Never touches a name outside the ``tzh<pid>x<n>-`` family."""
    removed = []
    for ns in _namespaces():
        m = FAMILY.match(ns)
        if m is None:
            continue
        pid = int(m.group(1))
        prefix = ns[:m.end()]
        if (pid == os.getpid() and prefix not in _open) or (pid != os.getpid() and not pid_alive(pid)):
            _delete(ns)
            removed.append(ns)
    return removed


def family_namespaces(prefix: str) -> list[str]:
    """The namespaces whose name starts with ``prefix`` (to check that a harness left none)."""
    return [ns for ns in _namespaces() if ns.startswith(prefix)]


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"setns(CLONE_NEWNET) failed: {os.strerror(err)}")


class Hosts:
    """Named hosts, each in its own network namespace, on one bridge in a namespace of its own.

    Args:
        names: host names (letters, digits, ``_``; at most 10 characters), at most 250 hosts.

    Raises NetnsError when a namespace or link cannot be made (the harness is removed again).
    """

    def __init__(self, names: Sequence[str]) -> None:
        reason = unavailable_reason()
        if reason:
            raise NetnsError(reason)
        if not names or len(set(names)) != len(names) or len(names) > 250:
            raise ValueError(f"host names must be 1 to 250 distinct names, got {list(names)!r}")
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9_]{1,10}", name):
                raise ValueError(f"host name {name!r}: letters, digits and _ only, at most 10 characters")
        self.names = list(names)
        self.prefix = f"tzh{os.getpid()}x{next(_counter)}-"
        self.bridge_ns = self.prefix + "br"
        self.removed_on_start = remove_leftovers()
        self._closed = False
        _open.add(self.prefix)
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- layout -------------------------------------------------------------

    def ns(self, host: str) -> str:
        """The namespace name of ``host``; raises KeyError for a host the harness does not have."""
        if host not in self.names:
            raise KeyError(f"no host {host!r} in this harness (hosts: {', '.join(self.names)})")
        return self.prefix + host

    def address(self, host: str) -> str:
        """IPv4 address of ``host`` on the bridge (``10.77.0.<i>``, i from 1 in the order given)."""
        self.ns(host)  # KeyError for a stranger
        return f"{SUBNET}.{self.names.index(host) + 1}"

    def _port(self, host: str) -> str:
        return f"v{self.names.index(host) + 1}"

    def _build(self) -> None:
        _sh(["ip", "netns", "add", self.bridge_ns])
        self._no_ipv6(self.bridge_ns)
        _sh(["ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", self.bridge_ns, "link", "set", "br0", "up"])
        for host in self.names:
            ns, port = self.ns(host), self._port(host)
            _sh(["ip", "netns", "add", ns])
            _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            self._no_ipv6(ns)
            _sh(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port,
                 "netns", self.bridge_ns])
            _sh(["ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0", "up"])
            _sh(["ip", "-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0"])
            _sh(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def _no_ipv6(self, ns: str) -> None:
        """Turn IPv6 off in ``ns`` before its link exists (no link-local address, no router or
        neighbour solicitations adding to the counters); harmless where the kernel has no IPv6."""
        conf = "/proc/sys/net/ipv6/conf"
        _sh(["ip", "netns", "exec", ns, "sh", "-c",
             f"echo 1 > {conf}/default/disable_ipv6; echo 1 > {conf}/all/disable_ipv6"], check=False)

    # -- use ----------------------------------------------------------------

    def run(self, host: str, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``host`` (``ip netns exec``); keyword arguments go to subprocess.run."""
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)

    def popen(self, host: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` in ``host`` (``ip netns exec``); killed on close if still running."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)

    @contextlib.contextmanager
    def inside(self, host: str) -> Iterator[None]:
        """Move the calling thread into ``host``'s namespace for the block (setns(2)): the sockets it
        opens and the processes it starts there belong to that host (they stay there after the
        block). Restores the thread's namespace on exit. Raises NetnsError if setns fails."""
        target = os.open(NETNS_DIR / self.ns(host), os.O_RDONLY)
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(home)
        finally:
            os.close(target)
            os.close(home)

    def counters(self, host: str) -> LinkCounters:
        """Bytes sent and received on ``host``'s ``eth0`` (its sysfs counters read inside the namespace).
        Raises NetnsError when they cannot be read."""
        stats = "/sys/class/net/eth0/statistics"
        done = self.run(host, ["cat", f"{stats}/tx_bytes", f"{stats}/rx_bytes"], capture_output=True, text=True)
        values = done.stdout.split()
        if done.returncode != 0 or len(values) != 2:
            raise NetnsError(f"cannot read the counters of {host}'s eth0: {done.stderr.strip() or done.stdout!r}")
        return LinkCounters(int(values[0]), int(values[1]))

    def cap(self, host: str, rate_bit: int, *, latency_ms: int = 400) -> None:
        """Cap ``host``'s link at ``rate_bit`` bits per second in each direction: a ``tc tbf`` on its
        ``eth0`` (what it sends) and on its bridge port (what it receives); burst 1/50 s of the rate,
        at least 16 KiB. Raises NetnsError."""
        if rate_bit <= 0:
            raise ValueError(f"rate_bit must be positive, got {rate_bit}")
        burst = max(16384, rate_bit // 8 // 50)
        for ns, dev in ((self.ns(host), "eth0"), (self.bridge_ns, self._port(host))):
            _sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_bit}bit",
                 "burst", str(burst), "latency", f"{latency_ms}ms"])

    def uncap(self, host: str) -> None:
        """Remove the caps of ``host``'s link (its default queueing again)."""
        for ns, dev in ((self.ns(host), "eth0"), (self.bridge_ns, self._port(host))):
            _sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)

    def qdisc(self, host: str) -> str:
        """``tc qdisc show`` of ``host``'s eth0 (to check a cap is in place)."""
        return _sh(["tc", "-n", self.ns(host), "qdisc", "show", "dev", "eth0"]).stdout

    def cut(self, host: str) -> None:
        """Take ``host``'s link down (both ends): nothing moves between it and the others."""
        _sh(["ip", "-n", self.ns(host), "link", "set", "eth0", "down"])
        _sh(["ip", "-n", self.bridge_ns, "link", "set", self._port(host), "down"])

    def restore(self, host: str) -> None:
        """Bring ``host``'s link up again (both ends)."""
        _sh(["ip", "-n", self.bridge_ns, "link", "set", self._port(host), "up"])
        _sh(["ip", "-n", self.ns(host), "link", "set", "eth0", "up"])

    # -- end ----------------------------------------------------------------

    def close(self) -> None:
        """Kill the processes in the harness's namespaces and delete them (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for ns in family_namespaces(self.prefix):
            _delete(ns)
        _open.discard(self.prefix)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
