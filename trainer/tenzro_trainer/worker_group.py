"""A trainer's inner loop as one torchrun job of N ranks, driven from the daemon's process.

`TorchrunWorker` has the methods and return types of `tenzro_trainer.inner.InnerTrainer` (``run``,
``local_state``, ``rebase``, ``finish_round``, ``state_dict``, ``load_state_dict``), but the model
lives in a ``torchrun --nproc-per-node N`` job (`tenzro_trainer.sharded.ShardedInnerTrainer`, FSDP2;
NCCL on CUDA, gloo CPU processes otherwise) started once, when the worker is built, and kept until
`close` (overlap calls ``run(steps=1)`` once a step: one job per call would cost a start-up each).

Protocol.

- Set-up: the daemon pickles what the ranks rebuild their data and model from (the `Split`, the
  shard's series ids, the sampler seed, `ModelConfig`, `InnerConfig`, the init seed) into
  ``setup.pkl`` of a fresh 0700 temp dir; every rank reads it.
- Channel: the daemon listens on 127.0.0.1 (a free port); rank 0 connects with
  `multiprocessing.connection` (HMAC challenge both ways) under a random 32-byte authkey passed in the
  job's environment (``TENZRO_WORKER_AUTHKEY``, never on the command line; each rank drops it from its
  environment once read). Messages both ways are ``torch.save`` bytes of dicts of tensors, numbers,
  strings and lists, read with ``torch.load(weights_only=True)``.
- Commands: rank 0 relays each command to the other ranks (``dist.broadcast_object_list`` for the
  command with its tensors replaced by (shape, dtype) slots, then ONE ``dist.broadcast`` of all its
  tensors packed as bytes), so every rank gets the full global weights / checkpoint it is called with
  (what `ShardedInnerTrainer` asks for), and all of them call the same method. Rank 0 answers;
  results (weights, checkpoint) come from rank 0 only. While idle, rank 0 broadcasts a ping every
  `PING_S` seconds, so the other ranks' wait in the broadcast never reaches the process group's
  timeout (30 min gloo, 10 min NCCL) however long the daemon waits between rounds.
- Progress: rank 0 sends a ``step`` message after every inner step; the daemon calls ``on_step``.
- Failures: a rank whose command raises writes ``error-rank<r>.json`` in the temp dir (rank 0 also
  sends it) and exits; torchrun then ends the job (its other ranks included). The daemon tears the
  job down and raises `WorkerFailed` naming the command and the rank that failed first with its error
(then the others', mostly its echo: a peer gone in the middle of a collective); later calls
  raise `WorkerFailed` at once. A job that ends with no error written (a killed rank) gives the same
  error with the job's exit code.

Deadlines (seconds, never a hang): ``start_timeout_s`` bounds rank 0's connection, then separately
its "ready" (model built on every rank); ``reply_timeout_s`` bounds the silence between two messages
of rank 0 during a call. Every inner step sends one, so a round of H steps is bounded by
``(H + 1) * reply_timeout_s`` whatever H is, and a generous per-step value (default 600 s) costs
nothing when the job is healthy; the job's end is noticed within `POLL_S` whatever the deadlines.
A command the daemon cannot write for ``reply_timeout_s`` (rank 0 stopped reading) fails the same way;
a connection that does not pass the authkey challenge within `HANDSHAKE_S` is dropped unanswered.
An exception raised by ``on_step`` ends the call once rank 0's reply is read, so the job stays in step.

Processes: torchrun is started in a session of its own; `close` asks the ranks to exit, then
SIGTERMs and SIGKILLs torchrun's process group and SIGKILLs any rank left (torchrun starts its ranks
in sessions of their own, so they are killed by pid, reported in "ready"). Each rank asks the kernel
for SIGKILL when torchrun dies (``PR_SET_PDEATHSIG``), and rank 0 exits when its connection to the
daemon closes (the daemon died), which makes torchrun end the job. Live workers are closed at
interpreter exit (``atexit``); a worker is also a context manager.

Usage::

    with TorchrunWorker(model_cfg, inner_cfg, split, shard_ids, data_seed=s, nproc=2) as worker:
        result = worker.run(global_state, on_step=tick)   # InnerResult with the full local weights
        ckpt = worker.state_dict()                        # format "fsdp2-full": any N resumes it
"""

from __future__ import annotations

import atexit
import ctypes
import io
import json
import os
import pickle
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from tenzro_trainer.config import InnerConfig, ModelConfig
from tenzro_trainer.errors import ConfigError, TrainerError
from tenzro_trainer.inner import InnerResult, InnerTrainer

__all__ = ["TorchrunWorker", "WorkerFailed"]

ENV_ADDR, ENV_KEY, ENV_DIR = "TENZRO_WORKER_ADDR", "TENZRO_WORKER_AUTHKEY", "TENZRO_WORKER_DIR"
POLL_S = 0.2  # how often the daemon looks at the job while it waits for rank 0, seconds
PING_S = 30.0  # rank 0's keep-alive broadcast to the other ranks while the daemon sends nothing, seconds
HANDSHAKE_S = 10  # a connection must pass the authkey challenge within this, seconds
EXIT_GRACE_S = 10.0  # close(): time the ranks get to exit on "exit" before torchrun is signalled, seconds
RANK_EXIT_S = 10.0  # close(): time a SIGKILLed rank gets to disappear before close returns, seconds

_live: "weakref.WeakSet[TorchrunWorker]" = weakref.WeakSet()


class WorkerFailed(TrainerError):
    """The torchrun job of a `TorchrunWorker` failed (a rank raised, the job ended or went silent):
    the job is torn down. ``op`` is the command, ``ranks`` the ranks that reported an error, the first
    failure first (the others are mostly its echo: a peer gone in the middle of a collective)."""

    def __init__(self, message: str, op: str, ranks: Sequence[int] = ()):
        self.op, self.ranks = op, list(ranks)
        super().__init__(message)


# ---------------------------------------------------------------------------------------- wire


def _dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _loads(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True)


def _strip(obj: Any, out: list[Tensor]) -> Any:
    """``obj`` with every tensor replaced by its slot ``("__tensor__", i, shape, dtype)`` (tensors in ``out``)."""
    if isinstance(obj, Tensor):
        out.append(obj)
        return ("__tensor__", len(out) - 1, tuple(obj.shape), obj.dtype)
    if isinstance(obj, dict):
        return {k: _strip(v, out) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_strip(v, out) for v in obj)
    return obj


def _fill(obj: Any, tensors: list[Tensor]) -> Any:
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == "__tensor__":
        return tensors[obj[1]]
    if isinstance(obj, dict):
        return {k: _fill(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_fill(v, tensors) for v in obj)
    return obj


def _nbytes(shape, dtype) -> int:
    return int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()


def _broadcast_tensors(tensors: list[Tensor] | None, slots: list, device: torch.device) -> list[Tensor]:
    """Rank 0's ``tensors`` on every rank (CPU tensors), in one ``dist.broadcast`` of their bytes;
    ``slots``: their ``(shape, dtype)``, in order, as rank 0 sent them."""
    import torch.distributed as dist

    sizes = [_nbytes(shape, dtype) for shape, dtype in slots]
    if not sizes:
        return []
    if tensors is not None:  # rank 0
        buf = torch.cat([t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors]).to(device)
    else:
        buf = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
    dist.broadcast(buf, src=0)
    if tensors is not None:
        return tensors
    buf, out, pos = buf.cpu(), [], 0
    for (shape, dtype), n in zip(slots, sizes):
        out.append(buf[pos:pos + n].clone().view(dtype).reshape(shape))
        pos += n
    return out


# ------------------------------------------------------------------------------ the daemon's side


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class TorchrunWorker:
    """`InnerTrainer`'s interface over a torchrun job of ``nproc`` ranks (see the module docstring).

    Args:
        model_cfg, cfg: the model and the inner loop (``cfg.device`` "cuda": NCCL, one GPU per rank).
        split, shard_ids, data_seed: the ranks' `WindowDataset(split, shard_ids, seed=data_seed)`.
        init_seed: seed of the initial weights (overwritten by the global ones).
        nproc: ranks of the job.
        threads: CPU threads per rank (``OMP_NUM_THREADS``); None = the host's cores / ``nproc``.
        start_timeout_s: bound on rank 0's connection, and again on its "ready", seconds.
        reply_timeout_s: bound on rank 0's silence during a call (between two steps), seconds.

    Raises (constructor):
        WorkerFailed: the job did not start (a rank raised, e.g. `ConfigError` for a batch smaller
            than ``nproc``; it ended; or it stayed silent past ``start_timeout_s``).
    """

    def __init__(self, model_cfg: ModelConfig, cfg: InnerConfig, split, shard_ids=None, *, data_seed: int = 0,
                 init_seed: int = 0, nproc: int = 2, threads: int | None = None, start_timeout_s: float = 300.0,
                 reply_timeout_s: float = 600.0):
        if nproc < 1:
            raise ConfigError(f"a torchrun worker needs at least 1 rank, got {nproc}")
        self.model_cfg, self.cfg, self.nproc = model_cfg, cfg, nproc
        self.reply_timeout_s = reply_timeout_s
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._gone: str | None = None  # why the job is no longer usable
        self._closed = False
        self.pids: list[int] = []  # torchrun, then the ranks (after "ready")
        self._dir = Path(tempfile.mkdtemp(prefix="tenzro-worker-"))  # mode 0700
        setup = {"model_cfg": model_cfg, "inner_cfg": cfg, "split": split,
                 "shard_ids": None if shard_ids is None else list(shard_ids), "data_seed": data_seed,
                 "init_seed": init_seed, "threads": threads or max(1, (os.cpu_count() or 1) // nproc)}
        fd = os.open(self._dir / "setup.pkl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(setup, f)
        key = secrets.token_bytes(32)
        server = socket.create_server(("127.0.0.1", 0))
        env = {**os.environ, "OMP_NUM_THREADS": str(setup["threads"]), ENV_DIR: str(self._dir), ENV_KEY: key.hex(),
               ENV_ADDR: "127.0.0.1:%d" % server.getsockname()[1]}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "--monitor-interval", "0.5", "-m", "tenzro_trainer.worker_group"]
        self._log = open(self._dir / "torchrun.log", "wb")
        self._proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        self.pids = [self._proc.pid]
        _live.add(self)
        try:
            self._conn = self._accept(server, key, start_timeout_s)
            ready = self._reply("start", timeout_s=start_timeout_s)
        except BaseException:
            self.close()
            raise
        finally:
            server.close()
        self.pids += [int(p) for p in ready["pids"]]
        self.world, self.device = int(ready["world"]), str(ready["device"])

    # -- plumbing

    def _accept(self, server: socket.socket, key: bytes, timeout_s: float) -> Connection:
        """Rank 0's authenticated connection; other connections (wrong key, silent) are dropped."""
        server.settimeout(POLL_S)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._fail("start")
            try:
                sock, _ = server.accept()
            except TimeoutError:
                continue
            sock.settimeout(None)
            # a blocking socket whose reads give up after HANDSHAKE_S (a peer that never answers)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", HANDSHAKE_S, 0))
            conn = Connection(sock.dup().detach())
            try:
                deliver_challenge(conn, key)
                answer_challenge(conn, key)
            except Exception:  # AuthenticationError, a timeout (BlockingIOError), a reset, EOF
                conn.close()
                sock.close()
                continue
            # then: reads wait as long as they like (always after a poll); a write blocked for
            # reply_timeout_s means rank 0 stopped reading
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(self.reply_timeout_s), 0))
            sock.close()  # the connection holds its own descriptor of the socket
            return conn
        self._fail("start", silent_s=timeout_s)

    def _reply(self, op: str, on_step: Callable[[int, int], None] | None = None,
               timeout_s: float | None = None) -> Any:
        """Wait for rank 0's answer to ``op``, relaying ``step`` messages to ``on_step``.

        Raises:
            WorkerFailed: a rank reported an error, the job ended, or rank 0 was silent for
                ``timeout_s`` (default ``reply_timeout_s``) seconds.
        """
        limit = self.reply_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        raised: BaseException | None = None  # by on_step: re-raised once the reply is read (stay in step)
        while True:
            try:
                ready = self._conn.poll(POLL_S)
                msg = _loads(self._conn.recv_bytes()) if ready else None
            except (EOFError, OSError):
                self._fail(op)
            if msg is None:
                if self._proc.poll() is not None:
                    self._fail(op)
                if time.monotonic() >= deadline:
                    self._fail(op, silent_s=limit)
                continue
            if msg["kind"] == "step":
                deadline = time.monotonic() + limit
                if on_step is not None and raised is None:
                    try:
                        on_step(int(msg["done"]), int(msg["total"]))
                    except BaseException as exc:  # noqa: BLE001 - re-raised below
                        raised = exc
                continue
            if msg["kind"] == "error":
                self._fail(op, reported=msg)
            if raised is not None:
                raise raised
            return msg.get("value", msg)

    def _call(self, op: str, on_step: Callable[[int, int], None] | None = None, **args) -> Any:
        with self._lock:
            if self._gone is not None:
                raise WorkerFailed(f"torchrun worker is gone ({self._gone}): build a new one", op)
            if self._closed:
                raise WorkerFailed("torchrun worker is closed", op)
            try:
                self._conn.send_bytes(_dumps({"op": op, "args": args}))
            except (BlockingIOError, TimeoutError):  # SO_SNDTIMEO: rank 0 stopped reading
                self._fail(op, silent_s=self.reply_timeout_s)
            except OSError:
                self._fail(op)
            return self._reply(op, on_step)

    def _rank_errors(self) -> list[dict]:
        out = []
        for path in sorted(self._dir.glob("error-rank*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return sorted(out, key=lambda e: (e.get("time", 0.0), e["rank"]))  # the first failure first

    def _fail(self, op: str, reported: dict | None = None, silent_s: float | None = None):
        """Tear the job down and raise `WorkerFailed` for ``op`` with what the ranks reported."""
        if silent_s is None:  # the job failed: let torchrun end it and the other ranks write their errors
            try:
                self._proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        code = self._proc.poll()
        self._kill()
        errors = self._rank_errors()
        if reported is not None and all(e["rank"] != reported["rank"] for e in errors):
            errors = sorted([*errors, reported], key=lambda e: (e.get("time", 0.0), e["rank"]))
        where = f"torchrun worker ({self.nproc} ranks)"
        if errors:
            first, *then = errors  # the others are usually the first one's echo (a peer gone mid-collective)
            msg = f"{where}: {op} failed on rank {first['rank']}: {first['error'][:400]}" + "".join(
                f"; then rank {e['rank']}: {e['error'][:200]}" for e in then)
        elif silent_s is not None:
            msg = f"{where}: no word from rank 0 for {silent_s:.0f} s during {op}: the job was torn down"
        else:
            msg = (f"{where}: the job ended (exit code {code}) during {op} with no error from any rank "
                   f"(a rank was killed?)")
        self._gone = msg
        tail = self._log_tail()
        if tail:
            import logging

            logging.getLogger("tenzro.trainer").warning("%s; torchrun's last output:\n%s", msg, tail)
        raise WorkerFailed(msg, op, [e["rank"] for e in errors])  # first failure first

    def _log_tail(self, n: int = 4000) -> str:
        try:
            return (self._dir / "torchrun.log").read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _kill(self) -> None:
        """SIGTERM, then SIGKILL, torchrun's process group; SIGKILL any rank still alive and wait until
        it is gone (at most `RANK_EXIT_S`); reap torchrun."""
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self._proc.poll() is not None:
                break
            try:
                os.killpg(self._proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self._proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        for pid in self.pids[1:]:
            if _pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        # a killed rank takes a moment to go (its address space is torn down; longer on a loaded
        # host): return once every rank is gone, or after RANK_EXIT_S
        deadline = time.monotonic() + RANK_EXIT_S
        while any(_pid_alive(p) for p in self.pids[1:]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the InnerTrainer interface

    def run(self, global_state: Mapping[str, Tensor] | None = None, steps: int | None = None,
            on_step: Callable[[int, int], None] | None = None) -> InnerResult:
        """`InnerTrainer.run` on the job: the full local weights (from rank 0), the global batch's mean
        loss, the step times (s), the samples. ``on_step(done, total)`` is called here, after every step.

        Raises:
            WorkerFailed: see `_reply`.
        """
        value = self._call("run", on_step, global_state=None if global_state is None else dict(global_state),
                           steps=steps)
        return InnerResult(value["state"], float(value["mean_loss"]), list(value["step_times"]),
                           int(value["samples"]))

    def local_state(self) -> dict[str, Tensor]:
        """The full local weights, ``{name: fp32 CPU tensor}``."""
        return self._call("local_state")

    def rebase(self, old_base: Mapping[str, Tensor], new_base: Mapping[str, Tensor]) -> None:
        """`InnerTrainer.rebase` on the job (both bases sent to every rank).

        Raises:
            WorkerFailed: e.g. a tensor of the model missing from a base (a KeyError on the ranks).
        """
        self._call("rebase", old_base=dict(old_base), new_base=dict(new_base))

    #: `InnerTrainer.finish_round` over this worker's rebase / run / local_state.
    finish_round = InnerTrainer.finish_round

    def state_dict(self) -> dict:
        """The job's restart checkpoint (`ShardedInnerTrainer.state_dict`, ``format: fsdp2-full``)."""
        return self._call("state_dict")

    def load_state_dict(self, state: dict) -> None:
        """Resume from a ``fsdp2-full`` checkpoint (written by a job of any size).

        Raises:
            ConfigError: not such a checkpoint (the job is left as it was).
            WorkerFailed: the ranks failed to load it.
        """
        if state.get("format") != "fsdp2-full":
            raise ConfigError("not a sharded inner checkpoint (written by ShardedInnerTrainer.state_dict)")
        self._call("load_state_dict", state=state)

    # -- lifecycle

    @property
    def alive(self) -> bool:
        """Whether the job is up and usable."""
        return not self._closed and self._gone is None and self._proc.poll() is None

    def close(self) -> None:
        """End the job (the ranks exit, then torchrun's group is signalled) and remove the temp dir.
        Idempotent; safe from another thread or at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if conn is not None and self._gone is None and self._proc.poll() is None:
            try:
                conn.send_bytes(_dumps({"op": "exit", "args": {}}))
                self._proc.wait(timeout=EXIT_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        _live.discard(self)

    def __enter__(self) -> "TorchrunWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@atexit.register
def _close_live() -> None:
    for worker in list(_live):
        worker.close()


# --------------------------------------------------------------------------------- the ranks' side


def _die_with_parent() -> None:
    """SIGKILL this rank when torchrun (its parent) dies (Linux ``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # it died before the call
        os._exit(1)


def _send(conn: Connection, msg: dict) -> None:
    conn.send_bytes(_dumps(msg))


def _next_command(conn: Connection) -> dict:
    """Rank 0: the daemon's next command, or a ping after `PING_S` seconds without one.

    Raises:
        EOFError: the daemon closed the connection (it exited).
    """
    if conn.poll(PING_S):
        return _loads(conn.recv_bytes())
    return {"op": "ping", "args": {}}


def _serve(trainer, conn: Connection | None, comm: torch.device, where: dict) -> None:
    """Every rank: take commands (relayed by rank 0) until "exit"; rank 0 answers the daemon. The
    command being run is kept in ``where["op"]`` (for the error report)."""
    import torch.distributed as dist

    rank = trainer.rank
    while True:
        if rank == 0:
            msg = _next_command(conn)
            tensors: list[Tensor] | None = []
            args = _strip(msg["args"], tensors)
            box = [{"op": msg["op"], "args": args, "slots": [(tuple(t.shape), t.dtype) for t in tensors]}]
        else:
            tensors, box = None, [None]
        dist.broadcast_object_list(box, src=0)
        op, skeleton, slots = box[0]["op"], box[0]["args"], box[0]["slots"]
        where["op"] = op
        if op == "ping":
            continue
        if op == "exit":
            return
        args = _fill(skeleton, _broadcast_tensors(tensors, slots, comm))
        value: Any = None
        if op == "run":
            on_step = (lambda i, n: _send(conn, {"kind": "step", "done": i, "total": n})) if rank == 0 else None
            res = trainer.run(args["global_state"], steps=args["steps"], on_step=on_step)
            value = {"state": res.state, "mean_loss": res.mean_loss, "step_times": res.step_times,
                     "samples": res.samples}
        elif op == "local_state":
            value = trainer.local_state()
        elif op == "rebase":
            trainer.rebase(args["old_base"], args["new_base"])
        elif op == "state_dict":
            value = trainer.state_dict()
        elif op == "load_state_dict":
            trainer.load_state_dict(args["state"])
        elif op == "fault":  # tests: rank args["rank"] raises, the others wait for it in a collective
            if rank == args["rank"]:
                raise RuntimeError(args["message"])
            dist.barrier()
        else:
            raise ValueError(f"unknown command {op!r}")
        if rank == 0:
            _send(conn, {"kind": "reply", "value": value})


def _rank_main() -> int:
    """A rank of the job (``python -m tenzro_trainer.worker_group`` under torchrun). Exit code 0
    after "exit", 1 after an error (written to ``error-rank<r>.json``, and sent by rank 0)."""
    _die_with_parent()
    rank = int(os.environ.get("RANK", "0"))
    key = os.environ.pop(ENV_KEY, "")
    workdir = Path(os.environ[ENV_DIR])
    conn, where = None, {"op": "start"}
    try:
        with open(workdir / "setup.pkl", "rb") as f:
            setup = pickle.load(f)  # written by the daemon into its own 0700 dir
        torch.set_num_threads(int(setup["threads"]))
        if rank == 0:
            host, port = os.environ[ENV_ADDR].rsplit(":", 1)
            conn = Client((host, int(port)), authkey=bytes.fromhex(key))
        import torch.distributed as dist

        from tenzro_trainer.data.windows import WindowDataset
        from tenzro_trainer.sharded import ShardedInnerTrainer

        data = WindowDataset(setup["split"], setup["shard_ids"], seed=setup["data_seed"])
        trainer = ShardedInnerTrainer(setup["model_cfg"], setup["inner_cfg"], data, init_seed=setup["init_seed"])
        pids: list = [None] * trainer.world
        dist.all_gather_object(pids, os.getpid())
        comm = trainer.device if trainer.device.type == "cuda" else torch.device("cpu")
        if rank == 0:
            _send(conn, {"kind": "ready", "pids": pids, "world": trainer.world, "device": str(trainer.device)})
        _serve(trainer, conn, comm, where)
    except BaseException as exc:  # noqa: BLE001 - reported to the daemon, then the rank exits
        report = {"rank": rank, "op": where["op"], "error": f"{type(exc).__name__}: {exc}", "time": time.time(),
                  "traceback": traceback.format_exc()}
        try:
            (workdir / f"error-rank{rank}.json").write_text(json.dumps(report))
        except OSError:
            pass
        if conn is not None:
            try:
                _send(conn, {"kind": "error", **report})
            except OSError:
                pass
        print(report["traceback"], file=sys.stderr, flush=True)
        return 1
    import torch.distributed as dist

    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(_rank_main())
