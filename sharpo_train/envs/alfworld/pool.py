"""A batch of ALFWorld episodes stepped in parallel worker processes.

A step costs 50-135 ms of CPU in the engine (mostly textworld re-deriving the grammar of
every admissible command), so a batch is split over ``num_workers`` processes. Slots are
given to workers in contiguous blocks (slot i -> worker i * W // N), so the rollouts of one
GRPO group mostly share a worker and its per-process game cache (engine.py).

Faults: an engine exception in one slot ends that episode only (done, reward 0,
info["error"] = the reason, logged); a worker that dies, or hangs (no answer and no CPU
use for the timeout), ends all its unfinished episodes the same way, is killed, and is
started afresh at the next ``reset``. The rest of the batch goes on.

``num_workers=0`` runs the same code in-process (tests, debugging).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
import traceback
from typing import Any, Optional

from ...checks import check_int
from ..base import EnvPool, Observation, StepResult, Task

log = logging.getLogger(__name__)


def _cpu_seconds(pid: int) -> Optional[float]:
    """utime + stime of a process from /proc (None where /proc is not available)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _error_result(reason: str) -> StepResult:
    return StepResult(Observation("", ""), 0.0, True, {"won": False, "error": reason})


class SlotRunner:
    """Owns one AlfWorldEnv per slot; answers reset/step requests, never raising for a
    single slot's failure."""

    def __init__(self, env_kwargs: dict):
        self.env_kwargs = dict(env_kwargs)
        self.envs: dict[int, Any] = {}

    def _env(self, slot: int):
        env = self.envs.get(slot)
        if env is None:
            from .engine import AlfWorldEnv
            env = self.envs[slot] = AlfWorldEnv(**self.env_kwargs)
        return env

    def reset(self, items: list[tuple[int, Task]]) -> dict[int, StepResult]:
        out = {}
        for slot, task in items:
            try:
                env = self._env(slot)
                obs = env.reset(task)
                info = {"won": False, "admissible": list(obs.admissible_actions), "steps": 0,
                        "task_id": task.id}
                if env.expert_type is not None:
                    info["expert_action"] = env.expert_action()
                out[slot] = StepResult(obs, 0.0, False, info)
            except Exception as exc:
                reason = f"reset {task.id}: {exc!r}"
                log.warning("alfworld slot %d: %s", slot, reason)
                self.envs.pop(slot, None)
                out[slot] = _error_result(reason)
        return out

    def step(self, items: list[tuple[int, Optional[str]]]) -> dict[int, StepResult]:
        out = {}
        for slot, action in items:
            try:
                env = self.envs.get(slot)
                if env is None:
                    raise RuntimeError("no episode in this slot (its reset failed or was not called)")
                out[slot] = env.step(action)
            except Exception as exc:
                reason = f"step: {exc!r}"
                log.warning("alfworld slot %d: %s", slot, reason)
                out[slot] = _error_result(reason)
        return out

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()


def _worker_main(conn, env_kwargs: dict) -> None:
    logging.basicConfig(level=logging.WARNING)
    runner = SlotRunner(env_kwargs)
    parent = os.getppid()
    try:
        while True:
            try:
                if not conn.poll(1.0):
                    if os.getppid() != parent:
                        break        # the pool's process is gone (killed without close())
                    continue
                msg = conn.recv()
            except (EOFError, OSError):
                break
            kind = msg[0]
            if kind == "close":
                break
            try:
                if kind == "reset":
                    conn.send(("ok", runner.reset(msg[1])))
                elif kind == "step":
                    conn.send(("ok", runner.step(msg[1])))
                elif kind == "ping":
                    conn.send(("ok", os.getpid()))
                else:
                    conn.send(("err", f"unknown request {kind!r}"))
            except (BrokenPipeError, EOFError):
                break
            except Exception:
                try:
                    conn.send(("err", traceback.format_exc(limit=5)))
                except OSError:
                    break
    finally:
        runner.close()
        conn.close()


class _Worker:
    def __init__(self, ctx, env_kwargs: dict, index: int):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, env_kwargs),
                                name=f"sharpo-alfworld-{index}", daemon=True)
        self.proc.start()
        child.close()

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.join(timeout=5)
        except Exception:  # pragma: no cover
            pass
        try:
            self.conn.close()
        except Exception:  # pragma: no cover
            pass


class ProcessEnvPool(EnvPool):
    """EnvPool over ``num_workers`` processes (0 = in-process).

    env_kwargs go to AlfWorldEnv (max_steps, expert, seed). A worker is declared hung when
    it neither answers nor uses CPU for ``timeout_s + per_slot_timeout_s * slots`` seconds
    (CPU time read from /proc; without /proc this is a plain wall-clock limit), or when one
    request takes ``hard_limit_factor`` times that long in all."""

    def __init__(self, num_workers: int = 2, env_kwargs: Optional[dict] = None, *,
                 start_method: str = "spawn", timeout_s: float = 120.0,
                 per_slot_timeout_s: float = 30.0, hard_limit_factor: float = 10.0):
        check_int(num_workers, "num_workers", 0)
        if start_method not in mp.get_all_start_methods():
            raise ValueError(f"start_method: {start_method!r} not available here "
                             f"({mp.get_all_start_methods()})")
        self.num_workers = num_workers
        self.env_kwargs = dict(env_kwargs or {})
        self.timeout_s = float(timeout_s)
        self.per_slot_timeout_s = float(per_slot_timeout_s)
        self.hard_limit_factor = float(hard_limit_factor)
        if self.timeout_s <= 0 or self.per_slot_timeout_s < 0 or self.hard_limit_factor < 1:
            raise ValueError("timeout_s must be > 0, per_slot_timeout_s >= 0, hard_limit_factor >= 1")
        self._ctx = mp.get_context(start_method)
        self._workers: list[Optional[_Worker]] = [None] * num_workers
        self._local = SlotRunner(self.env_kwargs) if num_workers == 0 else None
        self._owner: dict[int, int] = {}      # slot -> worker index
        self._dead_slots: set[int] = set()
        self._closed = False

    # -- plumbing ----------------------------------------------------------------------
    def _worker(self, w: int) -> _Worker:
        worker = self._workers[w]
        if worker is None or not worker.proc.is_alive():
            if worker is not None:
                worker.kill()
            worker = self._workers[w] = _Worker(self._ctx, self.env_kwargs, w)
        return worker

    def _fail_worker(self, w: int, slots: list[int], reason: str) -> dict[int, StepResult]:
        log.warning("alfworld worker %d: %s; ending its %d episode(s) as failures",
                    w, reason, len(slots))
        worker = self._workers[w]
        if worker is not None:
            worker.kill()
        self._workers[w] = None
        for slot, owner in list(self._owner.items()):
            if owner == w:
                self._dead_slots.add(slot)
        return {s: _error_result(f"worker {w}: {reason}") for s in slots}

    def _call(self, kind: str, by_worker: dict[int, list]) -> dict[int, StepResult]:
        out: dict[int, StepResult] = {}
        sent = {}
        for w, items in by_worker.items():
            if not items:
                continue
            old = self._workers[w]
            if kind == "step" and (old is None or not old.proc.is_alive()):
                # it died since the last answer: its episodes are gone with it (a fresh
                # worker would only say it has no episode in these slots)
                code = None if old is None else old.proc.exitcode
                out.update(self._fail_worker(w, [s for s, _ in items], "worker fault: the "
                                             f"process died between requests (exit code {code})"))
                continue
            try:
                worker = self._worker(w)
                worker.conn.send((kind, items))
                sent[w] = (worker, items, time.monotonic())
            except Exception as exc:
                out.update(self._fail_worker(w, [s for s, _ in items], f"send failed ({exc!r})"))
        for w, (worker, items, t0) in sent.items():
            slots = [s for s, _ in items]
            # a busy worker on a crowded machine is slow, not hung: the wall-clock limit
            # only runs while the worker uses no CPU; the hard limit bounds a runaway
            limit = self.timeout_s + self.per_slot_timeout_s * len(items)
            hard_limit = t0 + self.hard_limit_factor * limit
            last_progress, last_cpu = time.monotonic(), _cpu_seconds(worker.proc.pid)
            try:
                while not worker.conn.poll(0.2):
                    if not worker.proc.is_alive():
                        raise EOFError(f"process exited with code {worker.proc.exitcode}")
                    now = time.monotonic()
                    cpu = _cpu_seconds(worker.proc.pid)
                    if cpu is not None and last_cpu is not None and cpu > last_cpu + 0.01:
                        last_progress, last_cpu = now, cpu
                    if now - last_progress > limit:
                        raise TimeoutError(f"no answer and no CPU progress for {limit:.0f} s")
                    if now > hard_limit:
                        raise TimeoutError(f"no answer within {hard_limit - t0:.0f} s")
                status, payload = worker.conn.recv()
            except (EOFError, OSError, TimeoutError) as exc:
                out.update(self._fail_worker(w, slots, f"died or hung ({exc})"))
                continue
            if status != "ok":
                out.update(self._fail_worker(w, slots, f"request failed: {payload}"))
                continue
            out.update(payload)
        return out

    def _split(self, n: int) -> list[int]:
        w = max(1, self.num_workers)
        return [i * w // n for i in range(n)]

    # -- EnvPool -----------------------------------------------------------------------
    def reset(self, tasks: list[Task]) -> list[StepResult]:
        if self._closed:
            raise RuntimeError("reset: the pool is closed")
        tasks = list(tasks)
        for i, t in enumerate(tasks):
            if not isinstance(t, Task):
                raise TypeError(f"tasks[{i}]: expected a Task, got {type(t).__name__}")
        self._dead_slots.clear()
        if not tasks:
            self._owner = {}
            return []
        owners = self._split(len(tasks))
        self._owner = dict(enumerate(owners))
        if self._local is not None:
            res = self._local.reset(list(enumerate(tasks)))
        else:
            by_worker: dict[int, list] = {}
            for slot, (task, w) in enumerate(zip(tasks, owners)):
                by_worker.setdefault(w, []).append((slot, task))
            res = self._call("reset", by_worker)
        return [res[i] for i in range(len(tasks))]

    def step(self, actions: dict[int, Optional[str]]) -> dict[int, StepResult]:
        if self._closed:
            raise RuntimeError("step: the pool is closed")
        out: dict[int, StepResult] = {}
        todo: dict[int, list] = {}
        for slot, action in actions.items():
            if slot not in self._owner:
                raise ValueError(f"actions: slot {slot!r} is not part of the current batch "
                                 f"(0..{len(self._owner) - 1})")
            if action is not None and not isinstance(action, str):
                raise TypeError(f"actions[{slot}]: expected a string or None, got "
                                f"{type(action).__name__}")
            if slot in self._dead_slots:
                out[slot] = _error_result("worker died earlier in this episode")
                continue
            todo.setdefault(self._owner[slot], []).append((slot, action))
        if self._local is not None:
            out.update(self._local.step([x for items in todo.values() for x in items]))
        else:
            out.update(self._call("step", todo))
        return {s: out[s] for s in actions}

    def worker_pids(self) -> list[Optional[int]]:
        return [w.proc.pid if w is not None and w.proc.is_alive() else None
                for w in self._workers]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._local is not None:
            self._local.close()
        for w, worker in enumerate(self._workers):
            if worker is None:
                continue
            try:
                worker.conn.send(("close",))
                worker.proc.join(timeout=5)
            except Exception:
                pass
            worker.kill()
            self._workers[w] = None

    def __del__(self):  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
