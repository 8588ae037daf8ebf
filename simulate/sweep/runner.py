"""Run a validated sweep into a directory: skip what is done, run the rest, rebuild the summary.

:func:`run_sweep` reads which points already have a file (:mod:`simulate.sweep.store`),
hands the others to an engine (:mod:`simulate.sweep.engines`) with a progress bar over
points, and rebuilds ``DIR/summary.csv`` from what is on disk at the end, also when it is
interrupted (then the points not yet run are ``pending``). One sweep writes to a
directory at a time (a lock file, ``DIR/.lock``).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from simulate.runtime.interrupts import deferred_signals
from simulate.sweep import engines, store
from simulate.sweep.spec import Sweep
from theory.files import write_text_atomic
from theory.verdicts import PointStatus

__all__ = ["SweepReport", "SweepBusy", "run_sweep"]


class SweepBusy(RuntimeError):
    """Another sweep is writing to the same directory."""


@dataclass
class SweepReport:
    """What a run of a sweep did: points in the spec, done before, run now, failed, lost; seconds.

    ``on_disk`` counts the spec's points with a file once the run ended (a worker may have
    written one whose result the driver never saw, when interrupted).
    """

    total: int
    skipped: int = 0
    ran: int = 0
    failed: int = 0
    lost: list = field(default_factory=list)
    seconds: float = 0.0
    summary: Path | None = None
    on_disk: int = 0


@contextmanager
def _directory_lock(out: Path):
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    with open(out / ".lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SweepBusy(f"another sweep is writing to {out}: wait for it or use another --out") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _engine(name: str, pending, out: Path, workers: int, address: str | None, lost: list):
    if name == "local":
        return engines.run_local(pending, out, workers)
    if name == "ray":
        return engines.run_ray(pending, out, address, workers, lost)
    raise ValueError(f"engine={name!r} is not allowed: one of {', '.join(engines.ENGINES)}")


def run_sweep(sweep: Sweep, out: str | Path, *, engine: str = "local", workers: int | None = None,
              address: str | None = None, progress: bool = False, retry_failed: bool = False,
              spec_text: str | None = None) -> SweepReport:
    """Run the points of ``sweep`` that have no file in ``out`` yet; rebuild ``out/summary.csv``.

    Parameters
    ----------
    sweep : Sweep
        From :func:`simulate.sweep.load_spec` (validated).
    out : path
        The sweep's directory (created).
    engine : {'local', 'ray'}
    workers : int, optional
        Local processes (default: the cores) or, for a local Ray, its CPUs.
    address : str, optional
        Ray cluster address (``HOST:6379``); None starts a local Ray.
    progress : bool
        A tqdm bar over points on stderr (only when stderr is a terminal).
    retry_failed : bool
        Run failed points again (by default a recorded failure counts as done).
    spec_text : str, optional
        Written to ``out/spec.toml`` as the record of the run.

    Returns
    -------
    SweepReport
        Also when an interrupt (KeyboardInterrupt, or the CLI's SIGTERM) or a dead worker
        ends the run early: the exception propagates after the summary is written, with
        the report as its ``report`` attribute.
    """
    out = Path(out)
    (out / store.POINTS_DIR).mkdir(parents=True, exist_ok=True)
    workers = workers or engines.available_cores()
    started = time.perf_counter()
    with _directory_lock(out):
        if spec_text is not None:
            write_text_atomic(out / "spec.toml", spec_text)
        store.remove_partial(out)
        done = store.finished_records(out, [p.key for p in sweep.points])
        if retry_failed:
            done = {k: r for k, r in done.items() if store.record_status(r) is not PointStatus.FAILED}
        pending = [p for p in sweep.points if p.key not in done]
        report = SweepReport(total=len(sweep.points), skipped=len(done))
        bar = tqdm(total=report.total, initial=report.skipped, unit="point", desc=f"sweep {sweep.name}",
                   file=sys.stderr, disable=not (progress and sys.stderr.isatty()), dynamic_ncols=True)
        try:
            if pending:
                for record in _engine(engine, pending, out, workers, address, report.lost):
                    report.ran += 1
                    report.failed += store.record_status(record) is PointStatus.FAILED
                    bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in record["axes"].items()), refresh=False)
                    bar.update()
        except BaseException as error:
            error.report = report
            raise
        finally:
            with deferred_signals():  # the summary is written whole, also on a second Ctrl-C
                bar.close()
                store.remove_partial(out)  # what a terminated worker left half-written
                report.seconds = time.perf_counter() - started
                records = store.finished_records(out, [p.key for p in sweep.points])
                report.on_disk = len(records)
                table = store.summary_table(sweep.points, records, sweep.axis_fields)
                report.summary = store.write_summary(out, table)
    return report
