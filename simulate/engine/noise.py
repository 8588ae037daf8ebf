"""Keyed random numbers, optionally drawn ahead on a background thread.

Every draw of a run is keyed by ``(layer, part)`` (:func:`simulate.engine.weights.generator`):
its numbers depend on the run seed, the key and the shape only, never on the order in
which draws happen or on which thread makes them. That is what lets
:class:`NoiseSource` draw the next blocks' numbers while the current block computes.

Prefetch. On the CPU a float32 normal costs about as much as 10 matmul flops (torch's
MT19937 + Box-Muller runs at ~3e8 numbers/s on one core, without intra-op threads), and
an implicit run spends about 40% of its time there. With ``prefetch=True`` the runner
calls :meth:`NoiseSource.begin_layer` before each block; the source then submits, to
one worker thread, the draws of this block and the next one, following the pattern of
draws (kind, part, shape) the previous block made. torch releases the GIL while it
fills a tensor, so the worker draws on one core while the block's matmuls run on the
other. A request that matches a submitted draw takes its result (waiting if needed);
anything else (the first block, a block with another pattern) is drawn on the spot.
Either way the numbers are the same: prefetching changes timing only.

>>> import torch
>>> ahead, plain = NoiseSource(0, "cpu", prefetch=True), NoiseSource(0, "cpu", prefetch=False)
>>> for layer in (1, 2, 3):
...     ahead.begin_layer(layer, 3)
...     same = torch.equal(ahead.normal((layer, 10), (2, 3)), plain.normal((layer, 10), (2, 3)))
>>> same, ahead.prefetched > 0
(True, True)
>>> ahead.close()
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import torch

__all__ = ["DRAW_DTYPE", "NoiseSource", "key_generator"]

# Random numbers are drawn in float32 whatever the run's dtype (then cast): float32 and
# float64 runs see the same draws up to rounding, and CPU float64 draws are ~5x slower.
DRAW_DTYPE = torch.float32
_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def key_seed(seed: int, layer: int, part: int) -> int:
    """The 63-bit generator seed of draw ``(seed, layer, part)`` (splitmix64 chain: no collisions in practice).

    >>> key_seed(0, 1, 10) == key_seed(0, 1, 10), key_seed(0, 1, 10) == key_seed(0, 10, 1)
    (True, False)
    """
    state = 0
    for number in (seed, layer, part):
        state = _splitmix64(state ^ (number & _MASK64))
    return state >> 1


def key_generator(seed: int, layer: int, part: int, device: torch.device | str) -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded by :func:`key_seed`."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(key_seed(seed, layer, part))
    return gen


def _draw(kind: str, seed: int, key: tuple[int, int], shape: tuple[int, ...], device: torch.device):
    gen = key_generator(seed, key[0], key[1], device)
    fill = torch.randn if kind == "normal" else torch.rand
    return fill(shape, generator=gen, device=device, dtype=DRAW_DTYPE)


class NoiseSource:
    """Float32 standard normals and uniforms keyed by ``(layer, part)``, with optional prefetch.

    Parameters
    ----------
    seed : int
        The run seed.
    device : torch.device or str
    prefetch : bool
        Draw the coming blocks' numbers on a background thread (see the module text).

    Attributes
    ----------
    prefetched : int
        Requests served by a prefetched draw (for tests and the bench).
    """

    def __init__(self, seed: int, device: torch.device | str, prefetch: bool = False):
        self.seed, self.device, self.prefetch = int(seed), torch.device(device), bool(prefetch)
        self.prefetched = 0
        self._futures: dict[tuple, Future] = {}
        self._patterns: dict[int, list[tuple]] = {}  # layer -> [(kind, part, shape)] in request order
        self._scheduled: set[int] = set()
        self._executor: ThreadPoolExecutor | None = None

    def normal(self, key: tuple[int, int], shape: tuple[int, ...]) -> torch.Tensor:
        """i.i.d. N(0, 1) float32 numbers of ``shape`` from the generator of ``key``."""
        return self._take("normal", key, tuple(shape))

    def uniform(self, key: tuple[int, int], shape: tuple[int, ...]) -> torch.Tensor:
        """i.i.d. U[0, 1) float32 numbers of ``shape`` from the generator of ``key``."""
        return self._take("uniform", key, tuple(shape))

    def _take(self, kind: str, key: tuple[int, int], shape: tuple[int, ...]) -> torch.Tensor:
        if self.prefetch:
            self._patterns.setdefault(key[0], []).append((kind, key[1], shape))
            future = self._futures.pop((kind, key, shape), None)
            if future is not None:
                self.prefetched += 1
                return future.result()
        return _draw(kind, self.seed, key, shape, self.device)

    def begin_layer(self, layer: int, last: int) -> None:
        """Block ``layer`` (of 1..``last``) starts: submit its draws and the next block's, as block layer-1 drew."""
        if not self.prefetch:
            return
        for stale in [k for k in self._futures if k[1][0] < layer]:
            self._futures.pop(stale).cancel()
        self._patterns = {k: v for k, v in self._patterns.items() if k >= layer - 1}
        pattern = self._patterns.get(layer - 1)
        if not pattern:
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="noise")
        for ahead in (layer, layer + 1):
            if ahead > last or ahead in self._scheduled:
                continue
            self._scheduled.add(ahead)
            for kind, part, shape in pattern:
                key = (ahead, part)
                self._futures[(kind, key, shape)] = self._executor.submit(
                    _draw, kind, self.seed, key, shape, self.device)

    def close(self) -> None:
        """Drop pending draws and stop the worker thread."""
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
