"""Where the points of a sweep run: in this process, a local process pool, or a Ray cluster.

Each engine is a generator over the pending points that yields each point's record once
its file is on disk, in the order the points finish.

``local`` (the default)
    ``workers = 1``: the points one after another in this process. More workers: this
    process and a :class:`concurrent.futures.ProcessPoolExecutor` (``spawn``) of
    ``workers - 1`` more, every one pinned to ``cores // workers`` torch threads
    (``DEPTH_WORKBENCH_THREADS``, :func:`simulate.runtime.process.configure_process`), each taking
    the next point when it is free. The driver works too because a spawned worker first
    spends about 5 CPU seconds importing theory and torch, which the driver has done
    already. Workers write their points' files themselves. On an interrupt the pool is
    cancelled and its workers terminated (they ignore SIGINT, so Ctrl-C in a terminal is
    the driver's alone); a worker that dies breaks the pool (:class:`WorkerDied`).
``ray``
    ``ray.init(address=...)`` (a local Ray of ``workers`` CPUs when no address is given),
    one Ray task per point with one CPU and one torch thread, ``num_gpus=1`` for a point
    that asks for CUDA (or ``device = "auto"`` on a cluster with GPUs). Workers return
    the point's Parquet bytes and the driver writes them, so the cluster needs no
    shared storage. A task lost with its worker or node (after Ray's retries) is not
    recorded: a re-run tries it again.

With the same thread count (one per point: local with ``workers = cores``, or Ray) the
two engines give the same numbers (seeded, CPU).
"""

from __future__ import annotations

import importlib
import os
import queue
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Iterator

from simulate.runtime.interrupts import deferred_signals
from simulate.runtime.keys import first_difference, key_inputs
from simulate.runtime.versions import closure_version
from simulate.sweep.spec import Point
from simulate.sweep.store import encode_point, write_point
from simulate.sweep.tasks import TASKS, PointFailed, task_modules
from theory.files import write_text_atomic
from theory.verdicts import PointStatus

__all__ = ["ENGINES", "WorkerDied", "EngineError", "available_cores", "execute_point", "run_inline", "run_local",
           "run_ray"]

ENGINES = ("local", "ray")


class WorkerDied(RuntimeError):
    """A worker process of the local pool died (killed, out of memory): the sweep stops."""


class EngineError(RuntimeError):
    """The engine could not start (a Ray cluster that cannot be reached or started)."""


def available_cores() -> int:
    """CPU cores this process may use (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


_STARTED = "started_at"  # in a point's workdir: when its first attempt started (kept across resumes)


def _started_at(point: Point) -> str:
    """When the point first started: now, or the time kept in its workdir by an earlier, interrupted attempt."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if point.workdir is None:
        return now
    marker = Path(point.workdir) / _STARTED
    try:
        if marker.is_file():
            return marker.read_text().strip()
        marker.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(marker, now + "\n")
    except OSError:  # an unusable workdir: the task fails on it and says why, in the record
        pass
    return now


def _record(point: Point, status: PointStatus, error: str | None, wall_s: float, device: str, headline: dict,
            started_at: str) -> dict:
    return {"point": point.key, "index": point.index, "config": point.config(), "versions": point.versions,
            "axes": point.axes, "status": str(status), "error": error, "wall_s": round(wall_s, 4), "device": device,
            "headline": headline, "started_at": started_at, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": os.uname().nodename}


def _versions_here(point: Point) -> str | None:
    """What differs between the versions a point is keyed with and those of this process (a worker of other
    code, data, Python or torch than the process that parsed the spec), or None."""
    if not point.versions:
        return None
    task = TASKS[point.task]
    here = key_inputs(closure_version(task.module), task.corpus_digest(point.options))
    why = first_difference(point.versions, here)
    return None if why is None else f"this worker is not what the point was keyed for ({why}); run it where it is"


def execute_point(point_data: dict) -> tuple[dict, bytes]:
    """Run one point (its JSON form); return its record and Parquet bytes.

    Any exception of the task (a blow-up, an out-of-memory, a NaN loss, a bug) becomes a
    ``failed`` record with the error; only an interrupt escapes. A versioned point whose
    versions (code, corpus, Python, torch) are not this process's fails without running
    (``--retry-failed`` runs it again where they are).
    """
    import pandas as pd

    point = Point.from_dict(point_data)
    started, started_at = time.perf_counter(), _started_at(point)
    try:
        mismatch = _versions_here(point)
        if mismatch is not None:
            raise PointFailed(mismatch)
        outcome = TASKS[point.task].run(point)
        status, error, table, headline, device = PointStatus.OK, None, outcome.table, outcome.headline, outcome.device
    except PointFailed as failure:
        status, error, table, headline, device = (PointStatus.FAILED, str(failure), failure.table, failure.headline,
                                                  failure.device)
    except Exception as failure:  # noqa: BLE001 - recorded with the point, the sweep goes on
        status, table, headline, device = PointStatus.FAILED, pd.DataFrame(), {}, ""
        error = f"{type(failure).__name__}: {failure}"
        last = traceback.extract_tb(failure.__traceback__)[-1:]
        if last:
            error += f" (at {Path(last[0].filename).name}:{last[0].lineno})"
    record = _record(point, status, error, time.perf_counter() - started, device, headline, started_at)
    return record, encode_point(record, table)


def _store(point_data: dict, out: str) -> dict:
    record, data = execute_point(point_data)
    write_point(out, record["point"], data)
    return record


def run_inline(points, out: Path) -> Iterator[dict]:
    """The points one after another in this process."""
    for point in points:
        yield _store(point.to_dict(), str(out))


def _import_tasks(modules: list[str]) -> None:
    """Import the home modules of the driver's tasks (:func:`simulate.sweep.tasks.task_modules`): a spawned
    process knows the sweep's own tasks, and a task another package registers once its module is imported."""
    for module in modules:
        importlib.import_module(module)


def _init_worker(threads: int, modules: list[str]) -> None:
    import threading

    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it terminates the pool
    # tqdm's default lock is a multiprocessing semaphore: a terminated worker could not release it
    # (the resource tracker then warns of a leak); a worker draws no bars, a thread lock will do.
    tqdm.set_lock(threading.RLock())
    os.environ["DEPTH_WORKBENCH_THREADS"] = str(threads)
    from simulate.runtime.process import configure_process

    configure_process()
    _import_tasks(modules)


def _stop_pool(pool: ProcessPoolExecutor, finished: bool) -> None:
    if finished:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # the stdlib keeps no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)
    pool.shutdown(wait=True)  # the pool's manager thread sees the dead workers and releases its queues


class _Feeder:
    """Hands the pending points out one at a time: to the pool as a worker frees up (from the
    pool's callback thread) and to the driver between its own points; finished records (or
    the exception of a point) go to ``done``."""

    def __init__(self, points, pool: ProcessPoolExecutor, out: Path, workers: int):
        self.todo, self.pool, self.out = deque(points), pool, str(out)
        self.lock, self.done, self.running = threading.Lock(), queue.Queue(), 0
        for _ in range(workers):
            self.submit()

    def take(self) -> Point | None:
        with self.lock:
            return self.todo.popleft() if self.todo else None

    def submit(self) -> None:
        point = self.take()
        if point is None:
            return
        try:
            future = self.pool.submit(_store, point.to_dict(), self.out)
        except RuntimeError:  # the pool is shut down (an interrupt): nothing more goes out
            return
        with self.lock:
            self.running += 1
        future.add_done_callback(self._finished)

    def _finished(self, future) -> None:
        if not future.cancelled():
            self.done.put(future)  # before the count drops, so that busy() or done always shows it
            self.submit()
        with self.lock:
            self.running -= 1

    def busy(self) -> bool:
        with self.lock:
            return bool(self.todo) or self.running > 0


@contextmanager
def _torch_threads(threads: int):
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _results(feeder: _Feeder, block: bool) -> Iterator[dict]:
    while True:
        try:
            future = feeder.done.get(timeout=0.2) if block else feeder.done.get_nowait()
        except queue.Empty:
            return
        try:
            yield future.result()
        except BrokenProcessPool:
            raise WorkerDied("a worker process died (killed, or out of memory)") from None
        if block:
            return


def run_local(points, out: Path, workers: int) -> Iterator[dict]:
    """The points on ``workers`` processes (1: inline), ``cores // workers`` torch threads each.

    This process is one of them (it has its imports done): it runs points between collecting
    the others' results, and ``workers - 1`` spawned processes take the rest as they free up.
    """
    points = list(points)
    workers = max(1, min(workers, len(points)))
    if workers == 1:
        yield from run_inline(points, out)
        return
    threads = max(1, available_cores() // workers)
    pool = ProcessPoolExecutor(max_workers=workers - 1, mp_context=get_context("spawn"), initializer=_init_worker,
                               initargs=(threads, task_modules()))
    finished = False
    try:
        with _torch_threads(threads):
            feeder = _Feeder(points, pool, out, workers - 1)
            while (point := feeder.take()) is not None:
                yield _store(point.to_dict(), str(out))
                yield from _results(feeder, block=False)
            while feeder.busy() or not feeder.done.empty():
                yield from _results(feeder, block=True)
        finished = True
    finally:
        with deferred_signals():  # a second Ctrl-C must not leave workers running
            _stop_pool(pool, finished)


def _ray_point(point_data: dict, threads: int, modules: list[str]) -> tuple[dict, bytes]:
    os.environ["DEPTH_WORKBENCH_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _import_tasks(modules)
    return execute_point(point_data)


def _ray_options(point: Point, cluster_gpus: float) -> dict:
    options = point.options
    wants_gpu = TASKS[point.task].needs_gpu(options) or (options.get("device") == "auto" and cluster_gpus > 0)
    return {"num_cpus": 1, "num_gpus": 1 if wants_gpu else 0}


def _auth_hint(address: str | None) -> str:
    """What to set when a cluster asks for a token the driver does not send (Ray >= 2.59's default)."""
    if not address or os.environ.get("RAY_AUTH_MODE") == "token":
        return ""
    return ("; if the cluster uses token authentication (the default of `ray start` since Ray 2.59), "
            "set RAY_AUTH_MODE=token for this command (the token is read from ~/.ray/auth_token or $RAY_AUTH_TOKEN)")


def run_ray(points, out: Path, address: str | None, workers: int, lost: list | None = None) -> Iterator[dict]:
    """The points as Ray tasks on the cluster at ``address`` (None: a local Ray of ``workers`` CPUs).

    Points whose task was lost with a worker or node (after Ray's retries) go to ``lost``.
    """
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        kwargs = {"include_dashboard": False, "logging_level": "error", "log_to_driver": False}
        try:
            ray.init(address=address, **kwargs) if address else ray.init(num_cpus=workers, **kwargs)
        except Exception as error:  # noqa: BLE001 - Ray raises plain Exceptions for these
            where = f"the Ray cluster at {address}" if address else f"a local Ray of {workers} CPUs"
            raise EngineError(f"could not start {where}: {' '.join(str(error).split())}{_auth_hint(address)}") from None
    finished = False
    remote = ray.remote(_ray_point)
    gpus = float(ray.cluster_resources().get("GPU", 0))
    refs = {remote.options(**_ray_options(p, gpus)).remote(p.to_dict(), 1, task_modules()): p for p in points}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                record, data = ray.get(done[0])
            except ray.exceptions.OutOfMemoryError as error:  # killed by Ray's memory monitor
                record, data = _failed_record(refs[done[0]], f"OutOfMemoryError: {error}")
            except ray.exceptions.RayError:  # worker or node lost after the retries: not recorded
                if lost is not None:
                    lost.append(refs[done[0]])
                continue
            write_point(out, record["point"], data)
            yield record
        finished = True
    finally:
        with deferred_signals():
            if not finished:
                for ref in pending:
                    ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()


def _failed_record(point: Point, error: str) -> tuple[dict, bytes]:
    import pandas as pd

    record = _record(point, PointStatus.FAILED, " ".join(error.split())[:2000], 0.0, "", {}, "")  # started: not known
    return record, encode_point(record, pd.DataFrame())
