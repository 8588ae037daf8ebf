"""The engine's memory model: what one simulator run needs at its peak, estimated before any work.

:func:`estimate_run_bytes` models the peak memory of one :func:`simulate.simulate` call from
the Setting and the Monte-Carlo options, stage by stage as :mod:`simulate.engine.stack` and
:mod:`simulate.engine.blocks` run a block (derived here from the code, no measurement inside):

- always alive: the dual stream (C, S, T, d) (C = 1 + one channel per Jacobian probe),
  the float64 copy kept by the previous layer's moments (angular), the statistics buffer
  (L+1, M+1, S) float64, and on the CPU with prefetch the random numbers drawn ahead for
  the rest of this block and the next one (:mod:`simulate.engine.noise`);
- at the worst moment of a block, the largest of: the input norm, each sublayer's
  intermediates (q/k/v and their rotations, the (S, H, T, T) attention weights and their
  tangents when they are materialised, the two (S, T, d_ff) SwiGLU products, the Gram
  and Cholesky factors of the implicit product or the dense (S, d_in, d_out) weight),
  the branch post-processing and the residual add, the per-layer statistics;
- on the host, the statistics table and its CSV text, which grow with depth.

The sum is multiplied by :data:`ALLOCATOR_SLACK` (freed blocks that the allocator keeps,
fragmentation), or by :data:`MMAP_SLACK` on the CPU when the tensors are large enough for
malloc to map and unmap them one by one. ``tests/simulate/test_memory.py`` checks the estimate against measured
peak resident sets (within a factor 1.5); the closing note of issue 12 lists them.

:func:`check_run_fits` compares it with what the machine has (:mod:`simulate.runtime.machine`)
and refuses in one line, naming the flags whose halving helps most (:func:`flag_hint`).

>>> from theory.setting import Setting
>>> memory = run_memory(Setting(block="linear", depth=4, width=64, tokens=8), samples=4)
>>> memory.parts["stream"] == 4 * 8 * 64 * 4  # (S, T, d) float32
True
>>> estimate_run_bytes(Setting(width=4096, tokens=4096), samples=64) > 100e9  # issue 12's run killed by the kernel
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulate.runtime.machine import check_fits, format_bytes, memory_limit
from theory import architecture

__all__ = ["ALLOCATOR_SLACK", "MMAP_THRESHOLD", "MMAP_SLACK", "TABLE_ROW_BYTES", "RunMemory", "run_memory",
           "estimate_run_bytes", "naive_bytes", "table_bytes", "flag_hint", "check_run_fits"]

# Resident over live bytes: freed blocks that malloc keeps (simulate.runtime.process asks it to keep
# them below 256 MiB), per-thread arenas (prefetch), fragmentation. The kept heap depends on
# how the allocations interleave, which changes from one run of the same setting to the next:
# 24 runs of the three settings of tests/simulate/test_memory.py measured 1.33-2.51 (medians
# 1.6-1.8). 1.8 is the geometric middle of that range, so every one of them lies within a
# factor 1.5 of the estimate.
ALLOCATOR_SLACK = 1.8
# Blocks from 256 MiB on are mmapped by malloc (simulate.runtime.process) and given back when freed:
# when one channel of the stream is that large, resident is live (measured 1.05 at 2.2 GB).
MMAP_THRESHOLD = 256 << 20
MMAP_SLACK = 1.05
TABLE_ROW_BYTES = 500  # host bytes per (layer, metric) row: the Python rows, the DataFrame, its CSV text (measured)
_DRAW_BYTES = 4  # random numbers are drawn in float32 (simulate.engine.noise.DRAW_DTYPE)


@dataclass(frozen=True)
class _Dims:
    """The sizes the peak depends on (a Setting reduced to numbers, so that a flag can be halved)."""

    S: int  # samples
    T: int  # tokens
    d: int  # width
    f: int  # ffn width
    H: int  # query heads
    Hkv: int  # key-value heads
    L: int  # depth
    E: int  # experts


@dataclass(frozen=True)
class RunMemory:
    """Peak bytes of one run: ``device`` (the stream and its intermediates), ``host`` (the table),
    and the parts of the device peak by name (for the message and the tests)."""

    device: int
    host: int
    parts: dict

    @property
    def total(self) -> int:
        """What one device needs when the run is on the CPU (device and host are the same memory)."""
        return self.device + self.host


def _dims(setting, samples: int) -> _Dims:
    return _Dims(S=samples, T=setting.tokens, d=setting.width, f=setting.resolved_ffn_width, H=setting.heads,
                 Hkv=setting.resolved_kv_heads, L=setting.depth, E=setting.experts)


def _method(dims: _Dims, rows: int, d_in: int, d_out: int, device: str, mode: str, dtype) -> str:
    """'dense' or a factored method, as :meth:`simulate.engine.weights.WeightSampler._method` picks it."""
    if mode == "dense":
        return "dense"
    if mode == "implicit":
        return "cholesky" if rows <= d_in else "dense"
    from simulate.engine.implicit import choose_method

    return choose_method(dims.S, rows, d_in, d_out, device, dtype=dtype)


class _Model:
    """Byte counts of the tensors of one block (see the module docstring); all in bytes."""

    def __init__(self, setting, dims: _Dims, metrics: tuple[str, ...], dtype_bytes: int, device: str,
                 mode: str, prefetch: bool, torch_dtype):
        self.setting, self.n, self.b = setting, dims, dtype_bytes
        self.device, self.mode, self.torch_dtype = device, mode, torch_dtype
        self.C = 1 + ("jac_dev" in metrics) + ("e2e_gain" in metrics)
        self.metrics, self.prefetch = metrics, prefetch
        n = dims
        self.X = n.S * n.T * n.d  # elements of one channel of the stream
        self.cast = dtype_bytes if dtype_bytes != _DRAW_BYTES else 0  # float32 draws cast to float64
        self.draws = 0  # float32 bytes drawn per block (prefetch keeps up to two blocks of them)

    def product(self, d_in: int, d_out: int, outputs_alive: int = 0) -> int:
        """Peak of rows (S, C*T, d_in) times a fresh Gaussian (d_in, d_out): factor, draw, output."""
        n, b, m = self.n, self.b, self.C * self.n.T
        method = _method(n, m, d_in, d_out, self.device, self.mode, self.torch_dtype)
        if method == "dense":
            draw = n.S * d_in * d_out
            self.draws += draw * _DRAW_BYTES
            return outputs_alive + draw * (_DRAW_BYTES + self.cast) + n.S * m * d_out * b
        k = min(m, d_in)
        draw = n.S * k * d_out
        self.draws += draw * _DRAW_BYTES
        factor = 3 * n.S * m * k * b  # Gram, its Cholesky factor, the scaled factor
        return outputs_alive + factor + draw * (_DRAW_BYTES + self.cast) + n.S * m * d_out * b

    def norm(self, channels_bytes: int) -> int:
        """Temporaries of a norm over (C, S, T, width): the output and its tangent pieces."""
        per_channel = channels_bytes // self.C
        return channels_bytes + per_channel * (1 + 2 * (self.C - 1))

    def rows_copy(self, channels_bytes: int) -> int:
        """(C, S, T, w) -> (S, C*T, w): a copy when there are tangent channels."""
        return channels_bytes if self.C > 1 else 0

    def attention(self) -> int:
        n, b, C, X = self.n, self.b, self.C, self.X
        kv = n.Hkv / n.H
        stream = C * X * b
        projections = max(self.product(n.d, n.d), self.product(n.d, int(kv * n.d), stream),
                          self.product(n.d, int(kv * n.d), int(stream * (1 + kv))))
        qkv = int(stream * (1 + 2 * kv))
        rotated = int(stream * (1 + kv)) if self.setting.rope else 0
        P = n.S * n.H * n.T * n.T  # attention weights (S, H, T, T)
        if C == 1 and "attn_entropy" not in self.metrics:
            core = X * b  # fused kernel: no (T, T) weights kept
        else:
            repeated = 2 * stream if n.Hkv < n.H else 0
            entropy = 2 * P * 8 if "attn_entropy" in self.metrics else 0
            core = repeated + max(2 * P * b + entropy, (2 + 3 * (C - 1)) * P * b) + 2 * stream
        merged = qkv + 2 * stream + self.product(n.d, n.d)  # q, k, v live until the sublayer returns
        return self.rows_copy(stream) + max(projections, qkv + rotated, qkv + core, merged)

    def mlp(self, expert: bool = False) -> int:
        n, b, C = self.n, self.b, self.C
        stream = C * self.X * b
        Y = n.S * n.T * n.f * b  # one channel of a hidden layer
        if self.setting.activation == "swiglu":
            up = self.product(n.d, n.f)
            gate = self.product(n.d, n.f, C * Y)
            hidden = C * Y if C == 1 else 4 * C * Y + Y + 2 * (C - 1) * Y
            products = 2 * C * Y
        else:
            up = gate = self.product(n.d, n.f)
            hidden = 2 * Y if C == 1 else 2 * C * Y + 2 * Y + (C - 1) * Y
            products = C * Y
        down = products + self.rows_copy(C * Y) + self.product(n.f, n.d)
        inner = self.rows_copy(stream) + max(up, gate, hidden, down)
        return inner + (4 * stream if expert else 0)  # an expert's output, its gated copies, the sum

    def moe(self) -> int:
        stream = self.C * self.X * self.b
        router = self.product(self.n.d, self.n.E)
        peak = self.mlp(expert=True)
        for _ in range(self.n.E - 1):  # every expert draws its weights (prefetch keeps them)
            self.mlp(expert=True)
        return max(router, peak) + stream

    def sublayer(self, kind: str) -> int:
        return {"attention": self.attention, "mlp": self.mlp, "moe": self.moe,
                "linear": lambda: self.product(self.n.d, self.n.d)}[kind]()

    def after(self, place) -> int:
        """Branch output, its norm/scale/mask copies, the branch variance, the residual add."""
        stream, X, b = self.C * self.X * self.b, self.X, self.b
        extra = self.norm(stream) if place.norm_branch else stream
        variance = X * 8 if b == 4 else 0
        add = stream + (2 * X * b if "jac_dev" in self.metrics else 0)
        if place.norm_after_add:
            add += self.norm(stream)
        return stream + max(extra, variance, add)

    def record(self) -> int:
        """Per-layer statistics: the current float64 moments, kurtosis and token-cosine temporaries."""
        X = self.X
        current = X * 8 if self.b == 4 else 0
        extra = 3 * X * 8 if "kurtosis" in self.metrics else 0
        extra = max(extra, 2 * X * 8 if "token_cos" in self.metrics else 0)
        return current + extra + (X * (_DRAW_BYTES + self.cast) if "jac_dev" in self.metrics else 0)


def _device_type(device) -> str:
    """'cpu' or 'cuda' ('auto' resolved as :func:`simulate.engine.stack.resolve_device` does)."""
    import torch

    if str(device) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


def _widest_placement(setting, depth: int):
    """A placement with every norm that block 1 or block L has (mix: Post-LN first, Pre-LN after)."""
    first, last = architecture.placement(setting, 1), architecture.placement(setting, max(1, depth))
    return architecture.Placement(norm_input=first.norm_input or last.norm_input,
                                  norm_branch=first.norm_branch or last.norm_branch,
                                  norm_after_add=first.norm_after_add or last.norm_after_add)


def run_memory(setting, samples: int, metrics=("var",), dtype="float32", weights: str = "auto",
               device="cpu", *, prefetch: bool | None = None, matmul_precision: str = "highest") -> RunMemory:
    """The modelled peak of ``simulate(setting, samples=..., ...)``, by parts (module docstring).

    Arguments as :func:`simulate.simulate`; ``device`` 'cpu' or 'cuda' (as resolved).
    """
    return _run_memory(setting, _dims(setting, samples), metrics, dtype, weights, device, prefetch,
                       matmul_precision)


def _run_memory(setting, dims: _Dims, metrics, dtype, weights, device, prefetch, matmul_precision) -> RunMemory:
    import torch

    from simulate.engine.metrics import parse_metrics
    from simulate.engine.stack import PREFETCH_MIN, resolve_dtype

    names = parse_metrics(metrics, setting.block)
    torch_dtype = resolve_dtype(dtype)
    device = _device_type(device)
    if prefetch is None:
        prefetch = device == "cpu" and dims.S * dims.T * dims.d >= PREFETCH_MIN
    mm_dtype = torch.bfloat16 if matmul_precision == "bf16" else torch_dtype
    model = _Model(setting, dims, names, torch_dtype.itemsize, device, weights, bool(prefetch), mm_dtype)
    stream = model.C * model.X * model.b
    previous = model.X * 8 if model.b == 4 else stream  # float64 copy (or the whole old stream, float64)
    stats = (dims.L + 1) * (len(names) + 1) * dims.S * 8
    place = _widest_placement(setting, dims.L)
    # the input draw (float32, cast), its scaled copy, the stacked channels
    stages = {"input": model.X * (_DRAW_BYTES + model.cast + model.b) + stream, "record": model.record()}
    if "jac_dev" in names:
        model.draws += model.X * _DRAW_BYTES  # the block's Jacobian probe
    drawn = {}  # draws of this block made before each stage (taken from prefetch by then)
    for kind in architecture.SUBLAYERS[setting.block]:
        before = model.draws
        norm_in = model.norm(stream) if place.norm_input else 0
        inner = model.sublayer(kind)
        for name, value in ((f"{kind} norm", norm_in), (kind, (stream if place.norm_input else 0) + inner),
                            (f"{kind} add", model.after(place))):
            stages[name], drawn[name] = value, before
    drawn["record"] = drawn["input"] = model.draws
    # Prefetch holds what this block has not taken yet and the whole next block; it starts
    # at block 2 (it follows the draws of the block before), so a 2-block run has no next one.
    this, following = (model.draws if dims.L >= 2 else 0), (model.draws if dims.L >= 3 else 0)
    ahead = {name: max(0, this - drawn[name]) + following if model.prefetch else 0 for name in stages}
    ahead["input"] = 0  # before block 1 nothing is drawn ahead
    worst = max(stages, key=lambda name: stages[name] + ahead[name])
    parts = {"stream": stream, "previous moments": previous, "statistics": stats, "prefetched draws": ahead[worst],
             worst: stages[worst]}
    slack = MMAP_SLACK if device == "cpu" and model.X * model.b >= MMAP_THRESHOLD else ALLOCATOR_SLACK
    device_bytes = int(slack * sum(parts.values()))
    return RunMemory(device=device_bytes, host=table_bytes((dims.L + 1) * len(names)), parts=parts)


def table_bytes(rows: int) -> int:
    """Host bytes of a statistics table of ``rows`` (layer, metric) rows while it is built and written."""
    return int(rows * TABLE_ROW_BYTES)


def estimate_run_bytes(setting, samples: int, metrics=("var",), dtype="float32", weights: str = "auto",
                       device="cpu", **options) -> int:
    """Peak bytes of one :func:`simulate.simulate` call on ``device`` ('cpu': stream and table together).

    ``options``: ``prefetch``, ``matmul_precision`` (as :func:`simulate.simulate`).
    """
    memory = run_memory(setting, samples, metrics, dtype, weights, device, **options)
    return memory.total if _device_type(device) == "cpu" else memory.device


def naive_bytes(setting, dtype="float32") -> int:
    """Peak bytes of :func:`simulate.naive.naive_simulate`: every block's weights at once (an
    nn.Module stack) and one sample's activations, including its (H, T, T) attention weights."""
    import torch

    b = torch.empty(0, dtype=getattr(torch, str(dtype).replace("torch.", ""))).element_size()
    d, f, T = setting.width, setting.resolved_ffn_width, setting.tokens
    kv = setting.resolved_kv_heads * setting.head_dim
    weights = setting.depth * (2 * d * d + 2 * d * kv + (3 if setting.activation == "swiglu" else 2) * d * f)
    activations = 8 * T * max(d, f) + 4 * setting.heads * T * T
    return int(ALLOCATOR_SLACK * (weights + activations) * b)


_FLAGS = {"S": "--samples", "T": "--tokens", "d": "--width", "f": "--ffn-width", "L": "--depth", "E": "--experts"}


def flag_hint(setting, samples: int, metrics=("var",), dtype="float32", weights: str = "auto", device="cpu",
              **options) -> str:
    """The flags whose halving lowers the estimate most, e.g. ``'--samples or --tokens (halving one: 25.6 GB)'``.

    The sizes of the run are tried (samples, tokens, width, ffn width, depth, and experts
    for MoE); flags within 5% of the best are named together. Where prefetched random
    numbers are a large part, ``--prefetch off`` is named with what it gives.
    """
    dims = _dims(setting, samples)
    prefetch, precision = options.get("prefetch"), options.get("matmul_precision", "highest")

    def peak(sizes: _Dims, ahead) -> int:
        memory = _run_memory(setting, sizes, metrics, dtype, weights, device, ahead, precision)
        return memory.total if _device_type(device) == "cpu" else memory.device

    trials = {key: peak(replace(dims, **{key: getattr(dims, key) // 2}), prefetch)
              for key in ("S", "T", "d", "f", "L") + (("E",) if setting.block == "moe" else ())
              if getattr(dims, key) >= 2}
    if not trials:
        return "--samples"
    best = min(trials.values())
    flags = [_FLAGS[key] for key in sorted(trials, key=trials.get) if trials[key] <= 1.05 * best]
    hint = f"{' or '.join(flags)} (halving {'it' if len(flags) == 1 else 'one'}: {format_bytes(best)})"
    without = _run_memory(setting, dims, metrics, dtype, weights, device, False, precision)
    if without.parts["prefetched draws"] == 0 and _run_memory(setting, dims, metrics, dtype, weights, device,
                                                                prefetch, precision).parts["prefetched draws"]:
        hint += f", or use --prefetch off ({format_bytes(peak(dims, False))})"
    return hint + (", or use --dtype float32" if str(dtype).endswith("64") else "")


def check_run_fits(setting, samples: int, prog: str, *, metrics=("var",), dtype="float32", weights="auto",
                   device="cpu", **options) -> RunMemory:
    """:func:`check_fits` for one simulator run (the device and, on CUDA, the host table); returns the estimate.

    The flag hint (:func:`flag_hint`, a few more estimates) is only worked out for a refusal.
    """
    memory = run_memory(setting, samples, metrics, dtype, weights, device, **options)
    on_cpu = _device_type(device) == "cpu"
    estimate = memory.total if on_cpu else memory.device
    limit = memory_limit(device)
    if limit is not None and estimate > limit:
        check_fits(estimate, device, prog, flag_hint(setting, samples, metrics, dtype, weights, device, **options))
    if not on_cpu:
        check_fits(memory.host, "cpu", prog, "--depth or the number of metrics", what="the statistics table")
    return memory
