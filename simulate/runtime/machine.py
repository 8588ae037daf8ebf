"""What the machine has: the memory a new allocation can get, the limit a command keeps to, the refusal.

:func:`available_bytes` reads what the device has (host: ``MemAvailable`` and the cgroup
limit; CUDA: free device memory); :func:`memory_limit` is that, or
``$DEPTH_WORKBENCH_MEMORY_LIMIT`` (bytes, or with a unit: ``512M``, ``8G``; ``off`` switches the
check off); :func:`check_fits` refuses in one line (exit 2) before any work. The estimates it
is given come from the engine's memory model (:mod:`simulate.engine.memory_model`) or a
service's own (the trainer's budget).

>>> format_bytes(51_200_000_000)
'51.2 GB'
>>> _parse_size("512Mi"), _parse_size("8G")
(536870912, 8000000000)
"""

from __future__ import annotations

import os
from pathlib import Path

from theory.cli import fail, format_bytes  # one formatter of byte counts, shared with theory

__all__ = ["LIMIT_ENV", "available_bytes", "memory_limit", "format_bytes", "check_fits"]

LIMIT_ENV = "DEPTH_WORKBENCH_MEMORY_LIMIT"


def _cgroup_room() -> int | None:
    """Bytes the cgroup (v2 or v1) still allows this process, or None without a limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit != "max" and int(limit) < 1 << 60:
            return max(0, int(limit) - usage)
    return None


def _host_available() -> int:
    """``MemAvailable`` of /proc/meminfo (else free physical pages), capped by the cgroup's room."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = 1 << 62  # unknown: do not refuse
    room = _cgroup_room()
    return available if room is None else min(available, room)


def available_bytes(device="cpu") -> int:
    """Bytes a new allocation can get on ``device``: host RAM ('cpu') or free CUDA memory.

    CUDA counts the device's free memory plus what torch's allocator holds but does not use.
    """
    name = str(device)
    if name.startswith("cuda"):
        import torch

        index = torch.device(name).index
        index = torch.cuda.current_device() if index is None else index
        free, _ = torch.cuda.mem_get_info(index)
        return int(free + torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index))
    return _host_available()


_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


def _parse_size(text: str) -> int:
    """'8G' -> 8e9, '512Mi' -> 512*2^20, '1000' -> 1000 (a trailing 'b' is allowed)."""
    value = text.strip().lower().removesuffix("b")
    number = value.rstrip("kmgti")
    unit = value[len(number):]
    if unit not in _UNITS:
        raise ValueError(text)
    return int(float(number) * _UNITS[unit])


def memory_limit(device="cpu") -> int | None:
    """The bytes a run may use on ``device``: ``$DEPTH_WORKBENCH_MEMORY_LIMIT`` or
    :func:`available_bytes`; None when the variable is ``off`` (or ``0``)."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if text.lower() in ("off", "0", "none"):
        return None
    if text:
        try:
            return _parse_size(text)
        except ValueError:
            fail("depth-workbench", f"${LIMIT_ENV}={text!r} is not allowed: a size such as 8G, 512M, "
                 "a byte count, or off")
    return available_bytes(device)


def check_fits(estimate: int, device, prog: str, flag_hint: str, *, what: str = "this run",
               advice: str | None = None) -> None:
    """Exit 2 with one line when ``estimate`` bytes exceed :func:`memory_limit` of ``device``.

    The line names the estimate, the limit and the flag to lower (``lower {flag_hint}``, or
    ``advice`` in its place); call it before any work, so that nothing has been written.
    """
    limit = memory_limit(device)
    if limit is None or estimate <= limit:
        return
    where = "the GPU" if str(device).startswith("cuda") else "this machine"
    source = f"${LIMIT_ENV}" if os.environ.get(LIMIT_ENV, "").strip() else "available"
    fail(prog, f"{what} needs about {format_bytes(estimate)} of memory at its peak but {where} has "
         f"{format_bytes(limit)} ({source}); {advice or 'lower ' + flag_hint}")
