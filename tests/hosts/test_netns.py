"""The hosts harness (tenzro_operator.netns): namespaces joined by a bridge in its own namespace, nothing
in the root namespace, no route out, counters, caps, cuts, and nothing left behind (on exit, and of a
crashed harness on the next start). Skips where namespaces are unavailable (not root, no iproute2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tenzro_operator import netns
from tenzro_operator.netns import FAMILY, Hosts, LinkCounters, NetnsError, family_namespaces, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def root_links() -> str:
    return subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout


def root_addrs() -> str:
    return subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True, check=True).stdout


def listen(hosts: Hosts, host: str) -> socket.socket:
    with hosts.inside(host):
        srv = socket.socket()
        srv.bind((hosts.address(host), 0))
        srv.listen()
    srv.settimeout(5)
    return srv


def dial(hosts: Hosts, host: str, addr: tuple[str, int], timeout_s: float = 3.0) -> socket.socket:
    with hosts.inside(host):
        return socket.create_connection(addr, timeout=timeout_s)


def test_hosts_talk_over_the_bridge_and_nothing_lands_in_the_root_namespace():
    links, addrs = root_links(), root_addrs()
    with Hosts(["a", "b"]) as hosts:
        assert set(family_namespaces(hosts.prefix)) == {hosts.prefix + n for n in ("br", "a", "b")}
        assert root_links() == links and root_addrs() == addrs
        route = hosts.run("a", ["ip", "route"], capture_output=True, text=True, check=True).stdout
        assert "default" not in route and route.split()[0] == "10.77.0.0/24"
        bridge = subprocess.run(["ip", "-n", hosts.bridge_ns, "-br", "-4", "addr"], capture_output=True,
                                text=True, check=True).stdout
        assert "10.77" not in bridge  # the bridge carries no address
        srv = listen(hosts, "a")
        before_a, before_b = hosts.counters("a"), hosts.counters("b")
        c = dial(hosts, "b", srv.getsockname())
        s, _ = srv.accept()
        c.sendall(b"x" * 200_000)
        c.close()
        got = 0
        while chunk := s.recv(65536):
            got += len(chunk)
        assert got == 200_000
        sent_b, got_a = hosts.counters("b") - before_b, hosts.counters("a") - before_a
        assert isinstance(sent_b, LinkCounters)
        assert 200_000 <= sent_b.tx_bytes < 230_000  # payload + TCP/IP headers
        assert 200_000 <= got_a.rx_bytes < 230_000
        with pytest.raises(OSError):  # no route out of a host
            dial(hosts, "a", ("192.0.2.1", 80), timeout_s=1)
    assert family_namespaces(hosts.prefix) == []
    assert root_links() == links


def test_cut_link_stops_traffic_until_restored_and_cap_installs_tbf():
    with Hosts(["a", "b"]) as hosts:
        srv = listen(hosts, "a")
        hosts.cut("a")
        with pytest.raises(OSError):
            dial(hosts, "b", srv.getsockname(), timeout_s=1.5)
        hosts.restore("a")
        dial(hosts, "b", srv.getsockname()).close()
        hosts.cap("b", rate_bit=10_000_000)
        assert "tbf" in hosts.qdisc("b") and "10Mbit" in hosts.qdisc("b")
        hosts.uncap("b")
        assert "tbf" not in hosts.qdisc("b")
        with pytest.raises(KeyError):
            hosts.counters("c")


def test_bad_host_names_are_refused():
    with pytest.raises(ValueError):
        Hosts(["a", "a"])
    with pytest.raises(ValueError):
        Hosts(["has-dash"])


def test_leftovers_of_a_crashed_harness_are_removed_on_the_next_start():
    script = textwrap.dedent(f"""
        import os
        from tenzro_operator.netns import Hosts
        h = Hosts(["x"])
        print(h.prefix, flush=True)
        os._exit(0)  # a crash: no close, no atexit
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    prefix = done.stdout.strip()
    assert FAMILY.match(prefix)
    assert len(family_namespaces(prefix)) == 2  # left behind by the crash
    with Hosts(["a"]) as hosts:
        assert set(hosts.removed_on_start) >= {prefix + "br", prefix + "x"}
        assert family_namespaces(prefix) == []


def test_processes_left_in_a_host_are_ended_on_close():
    hosts = Hosts(["a"])
    proc = hosts.popen("a", ["sleep", "300"])
    hosts.close()
    assert proc.wait(timeout=10) != 0
    assert family_namespaces(hosts.prefix) == []
    hosts.close()  # idempotent


def test_a_failed_setup_leaves_nothing(monkeypatch):
    real = netns._sh

    def failing(argv, **kw):
        if "addr" in argv and "add" in argv:
            raise NetnsError("injected")
        return real(argv, **kw)

    monkeypatch.setattr(netns, "_sh", failing)
    with pytest.raises(NetnsError, match="injected"):
        Hosts(["a"])
    monkeypatch.setattr(netns, "_sh", real)
    assert [ns for ns in netns._namespaces() if ns.startswith(f"tzh{os.getpid()}x")] == []


def test_the_skip_reason_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "root" in unavailable_reason()
    with pytest.raises(NetnsError, match="root"):
        Hosts(["a"])
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "tc" else "/usr/sbin/ip")
    assert "`tc` is not installed" in unavailable_reason()
