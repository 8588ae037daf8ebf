"""The streaming runner: S random stacks at once, block by block, statistics as they come.

Only the current stream (with its tangent channels) lives across layers; each layer's
statistics go straight into a small preallocated float64 device tensor
(:class:`simulate.engine.metrics.StatsBuffer`), so memory does not grow with depth. Weights are
drawn on the fly (:mod:`simulate.engine.weights`); on the CPU the next blocks' random numbers are
drawn on a background thread while the current block computes (``prefetch``,
:mod:`simulate.engine.noise`). On CUDA the depth loop never waits for the device except every
``CHECK_EVERY`` layers, where one sync reads whether a (sync-free) Cholesky factorisation
failed (then the run is redone with QR factors, exact for any rows) and whether the
stream stayed finite. ``matmul_precision`` picks fp32, TF32 or bf16 weight products.

>>> from theory.setting import Setting
>>> table = simulate(Setting(block="linear", scheme="none", depth=2, width=16, tokens=2), samples=4)
>>> list(table.columns), table.layer.unique().tolist()
(['layer', 'metric', 'mean', 'sem', 'ci_low', 'ci_high', 'n'], [0, 1, 2])
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Callable

import torch
from tqdm import tqdm

from simulate.engine.blocks import SUBLAYERS, Ctx, norm, rms_direction
from simulate.engine.metrics import (Moments, StatsBuffer, angular, kurtosis, moments, norm_ratio, parse_metrics,
                              rms_per_element, stream_var, token_cos)
from simulate.engine.tables import table_from_stats
from simulate.engine.weights import PART, WeightSampler
from theory import architecture
from theory.constraints import Integer, check_fields

__all__ = ["simulate", "NumericalBlowUp", "SimulationInterrupted", "run_stack", "resolve_device", "resolve_dtype", "make_input",
           "CHECK_EVERY", "PREFETCH_MIN", "PRECISIONS", "check_precision",
           "matmul_precision_context", "stream_states"]

CHECK_EVERY = 32  # layers between finiteness checks (one host sync each)
PREFETCH_MIN = 1 << 16  # samples*tokens*width from which prefetch is on by default (CPU)
PRECISIONS = ("highest", "tf32", "bf16")
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class NumericalBlowUp(RuntimeError):
    """The stream became inf/nan at block ``layer``; ``table`` holds layers 0..layer-1."""

    def __init__(self, layer: int, table):
        self.layer, self.table = int(layer), table
        super().__init__(f"numerical blow-up: the stream is not finite after block {layer} "
                         f"(measured layers 0..{layer - 1} kept)")


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM through :mod:`simulate.runtime.interrupts`) during :func:`simulate`.

    ``table`` holds the complete layers 0..``layer`` (finite ones only; empty when the
    stop came before layer 0 was measured), ``signum`` the signal (SIGINT for Ctrl-C).
    """

    def __init__(self, layer: int, table, signum: int = signal.SIGINT):
        self.layer, self.table, self.signum = int(layer), table, int(signum)
        super().__init__(f"interrupted after block {layer} (measured layers 0..{layer} kept)")

    def __reduce__(self):  # picklable with its table (a sweep's worker process hands it back)
        return type(self), (self.layer, self.table, self.signum)


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> cuda if available else cpu; 'cuda' without CUDA raises ValueError."""
    name = str(device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} is not allowed: CUDA is not available here (use cpu or auto)")
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"device={name!r} is not allowed: auto, cpu or cuda")
    return torch.device(name)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """'float32'/'float64' (or the torch dtype) -> torch dtype."""
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not allowed: float32 or float64")
    return _DTYPES[dtype]


def make_input(setting, sampler: WeightSampler) -> torch.Tensor:
    """Input tokens (S, T, d): input_std*(sqrt(c) z + sqrt(1-c) z_t), c = input_cos, z shared over tokens."""
    shape = (sampler.samples, setting.tokens, setting.width)
    tokens = sampler.normal((0, PART["input"]), shape)  # (S, T, d)
    cos = setting.input_cos
    if cos > 0:
        common = sampler.normal((0, PART["input_common"]), (shape[0], 1, shape[2]))  # (S, 1, d)
        tokens = cos ** 0.5 * common + (1 - cos) ** 0.5 * tokens  # (S, T, d)
    return setting.input_std * tokens


def _record_stream(buffer: StatsBuffer, layer: int, stream: torch.Tensor, previous: Moments | None) -> Moments:
    """Fold the stream statistics of ``layer`` into ``buffer``; returns the stream's moments (for angular)."""
    primal = stream[0]  # (S, T, d)
    current = moments(primal)
    var = current.var  # (S,); non-finite exactly when the stream is
    buffer.put_finite(layer, var)
    buffer.put(layer, "var", var)
    if buffer.wants("kurtosis"):
        buffer.put(layer, "kurtosis", kurtosis(primal))
    if buffer.wants("token_cos") and primal.shape[1] > 1:
        buffer.put(layer, "token_cos", token_cos(primal))
    if previous is not None and buffer.wants("angular"):
        buffer.put(layer, "angular", angular(previous, current))
    return current


def block_step(stream: torch.Tensor, ctx: Ctx, buffer: StatsBuffer | None, jac_channel: int | None,
               mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One block on the dual stream (C, S, T, d); returns (new stream, (J - I) v of the probe channel).

    Branch variances and attention entropy go into ``buffer`` at ``ctx.layer``.
    """
    setting, layer = ctx.setting, ctx.layer
    place = architecture.placement(setting, layer)
    probe = stream[jac_channel] if jac_channel is not None else None  # (S, T, d)
    deviation = torch.zeros_like(probe) if probe is not None else None  # (S, T, d)
    for metric_name, sublayer in SUBLAYERS[setting.block]:
        h = norm(stream, setting.norm) if place.norm_input else stream
        if place.input_scale != 1.0:
            h = h * place.input_scale
        branch = sublayer(h, ctx)  # (C, S, T, d)
        if place.norm_branch:
            branch = norm(branch, setting.norm)
        if place.branch_scale != 1.0:
            branch = branch * place.branch_scale
        if mask is not None:
            branch = branch * mask  # (C, S, T, d) * (S, 1, d)
        if setting.alignment > 0:
            branch = branch + setting.alignment * rms_direction(stream)
        if buffer is not None:
            if buffer.wants(metric_name):
                buffer.put(layer, metric_name, stream_var(branch[0]))
            if ctx.entropy is not None:
                buffer.put(layer, "attn_entropy", ctx.entropy)
                ctx.entropy = None
        if place.norm_after_add:  # no identity path: (J - I) v by difference
            stream = norm(stream * place.stream_scale + branch, setting.norm)
            deviation = stream[jac_channel] - probe if probe is not None else None
        else:
            stream = stream + branch
            deviation = deviation + branch[jac_channel] if probe is not None else None
    return stream, deviation


def block_context(setting, sampler: WeightSampler, layer: int, want_entropy: bool = False) -> Ctx:
    """The sublayer context of block ``layer`` (weight stds with the scheme's factors)."""
    return Ctx(sampler=sampler, layer=layer, setting=setting, want_entropy=want_entropy,
               std=lambda role: architecture.weight_std(setting, layer, role))


def block_mask(setting, sampler: WeightSampler, layer: int) -> torch.Tensor | None:
    """Branch mask D_l (S, 1, d) of Bernoulli(rho) features, or None when rho = 1."""
    if setting.mask_density >= 1.0:
        return None
    return sampler.bernoulli((layer, PART["mask"]), (sampler.samples, 1, setting.width), setting.mask_density)


def initial_stream(setting, sampler: WeightSampler, with_jac: bool, with_e2e: bool) -> torch.Tensor:
    """Layer-0 dual stream (C, S, T, d): input, a zero Jacobian-probe slot, the end-to-end probe."""
    x0 = make_input(setting, sampler)  # (S, T, d)
    channels = [x0]
    if with_jac:
        channels.append(torch.zeros_like(x0))
    if with_e2e:
        channels.append(sampler.normal((0, PART["e2e_probe"]), x0.shape))
    stream = torch.stack(channels)  # (C, S, T, d)
    return norm(stream, setting.norm) if architecture.normalises_input(setting) else stream


def run_stack(setting, sampler: WeightSampler, buffer: StatsBuffer, *, progress: bool = False,
              on_layer: Callable[[int], None] | None = None) -> int | None:
    """Run blocks 1..L, filling ``buffer``; return the first non-finite layer or None."""
    with_jac, with_e2e = buffer.wants("jac_dev"), buffer.wants("e2e_gain")
    jac_channel = 1 if with_jac else None
    e2e_channel = 1 + int(with_jac) if with_e2e else None
    stream = initial_stream(setting, sampler, with_jac, with_e2e)  # (C, S, T, d)
    previous = _record_stream(buffer, 0, stream, None)
    if with_e2e:
        probe_norm = stream[e2e_channel].double().pow(2).sum((-1, -2)).sqrt()  # (S,)
        buffer.put(0, "e2e_gain", norm_ratio(stream[e2e_channel], probe_norm))
    checked = 0
    bar = tqdm(total=setting.depth, desc="blocks", unit="block", disable=not progress, leave=False)
    try:
        for layer in range(1, setting.depth + 1):
            sampler.begin_layer(layer, setting.depth)
            if with_jac:
                stream[jac_channel] = sampler.normal((layer, PART["jac_probe"]), stream.shape[1:])
            ctx = block_context(setting, sampler, layer, buffer.wants("attn_entropy"))
            stream, deviation = block_step(stream, ctx, buffer, jac_channel, block_mask(setting, sampler, layer))
            previous = _record_stream(buffer, layer, stream, previous)
            if with_jac:
                buffer.put(layer, "jac_dev", rms_per_element(deviation))
            if with_e2e:
                buffer.put(layer, "e2e_gain", norm_ratio(stream[e2e_channel], probe_norm))
            del deviation, ctx
            if on_layer is not None:
                on_layer(layer)
            bar.update(1)
            if layer % CHECK_EVERY == 0 or layer == setting.depth:
                if sampler.factor_failed():
                    raise _FactorFailed(layer)
                bad = buffer.first_bad_layer(checked, layer + 1)
                if bad is not None:
                    return bad
                checked = layer + 1
    finally:
        bar.close()
    return None


def check_precision(precision: str, device: torch.device, dtype: torch.dtype) -> None:
    """ValueError naming ``matmul_precision`` unless it is allowed on ``device`` with ``dtype``."""
    if precision not in PRECISIONS:
        raise ValueError(f"matmul_precision={precision!r} is not allowed: one of {', '.join(PRECISIONS)}")
    if precision == "tf32" and device.type != "cuda":
        raise ValueError("matmul_precision='tf32' is not allowed on the CPU: highest or bf16 (TF32 needs CUDA)")
    if precision != "highest" and dtype == torch.float64:
        raise ValueError(f"matmul_precision={precision!r} is not allowed with dtype float64: highest")


@contextmanager
def matmul_precision_context(precision: str, device: torch.device):
    """Within the block, float32 matmuls on CUDA run at ``precision`` ('highest' = true fp32,
    'tf32' and 'bf16' = TF32 for what stays float32); restored afterwards."""
    if device.type != "cuda":
        yield
        return
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest" if precision == "highest" else "high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


class _FactorFailed(Exception):
    """A sync-free Cholesky failed somewhere: the run is redone with QR factors."""


def _run_once(setting, sampler: WeightSampler, buffer: StatsBuffer, progress: bool,
              on_layer: Callable[[int], None]) -> int | None:
    try:
        with torch.inference_mode():
            return run_stack(setting, sampler, buffer, progress=progress, on_layer=on_layer)
    finally:
        sampler.close()


def _interruption(stop: KeyboardInterrupt, buffer: StatsBuffer | None, names, last: int) -> SimulationInterrupted:
    """The :class:`SimulationInterrupted` of a stop after layer ``last`` was complete: the finite layers before it."""
    upto = last + 1 if buffer is not None else 0
    bad = buffer.first_bad_layer(0, upto) if upto else None
    upto = upto if bad is None else bad
    values = buffer.to_numpy(upto) if buffer is not None else torch.zeros(0, len(names), 1).numpy()
    return SimulationInterrupted(upto - 1, table_from_stats(values, names),
                                 getattr(stop, "signum", signal.SIGINT))


def simulate(setting, *, samples: int = 8, seed: int = 0, metrics=("var",), device="auto", dtype="float32",
             weights: str = "auto", progress: bool = False, prefetch: bool | None = None,
             matmul_precision: str = "highest", share_factors: bool = True):
    """Monte-Carlo per-layer metrics of ``setting`` at random initialisation.

    Parameters
    ----------
    setting : theory.Setting
    samples : int
        S independent stacks (own weights, own input) run as one batch.
    seed : int
        Same seed, same numbers (on the CPU).
    metrics : sequence of str or str
        Names from :data:`simulate.METRICS`, a comma-separated string, or 'all'.
    device : {'auto', 'cpu', 'cuda'}
    dtype : {'float32', 'float64'}
        Precision of the stream; statistics are always float64.
    weights : {'dense', 'implicit', 'auto'}
        How Gaussian weights are applied (:class:`simulate.engine.weights.WeightSampler`).
    progress : bool
        A tqdm bar over depth on stderr (:func:`theory.cli.progress_enabled` decides for a CLI).
    prefetch : bool, optional
        Draw the next blocks' random numbers on a background thread while the current
        block computes (:mod:`simulate.engine.noise`); same numbers either way. Default (None):
        on for the CPU when samples*tokens*width >= ``PREFETCH_MIN`` (below, the thread
        hand-off costs more than the draws), off for CUDA (draws are asynchronous kernels).
    matmul_precision : {'highest', 'tf32', 'bf16'}
        'highest': float32 matmuls in full float32. 'tf32' (CUDA only): TF32 tensor-core
        matmuls (10-bit mantissa inputs, float32 accumulate). 'bf16': the weight products
        (Gram and L Z, or x W) take bfloat16 inputs with float32 accumulation, the factor
        and everything else (norms, attention, statistics) stays float32/float64; also on
        the CPU (slow there; for tests). Statistics are float64 whatever the choice.
    share_factors : bool
        One factorisation for the weights that meet the same rows (q/k/v, SwiGLU up/gate);
        False only for the bench's ablation (same numbers, more work).

    Returns
    -------
    pandas.DataFrame
        Columns layer, metric, mean, sem, ci_low, ci_high, n (layer 0 = input).

    Raises
    ------
    NumericalBlowUp
        At the first non-finite layer, with the table measured before it.
    SimulationInterrupted
        On Ctrl-C (a KeyboardInterrupt), with the table of the layers completed before it.
    """
    names = parse_metrics(metrics, setting.block)  # a metric the block lacks: ValueError
    check_fields({"samples": samples, "seed": seed}, {"samples": Integer(1), "seed": Integer(0)})
    torch_device, torch_dtype = resolve_device(device), resolve_dtype(dtype)
    check_precision(matmul_precision, torch_device, torch_dtype)
    if prefetch is None:  # the thread hand-off has a fixed cost per draw: only for large draws
        prefetch = torch_device.type == "cpu" and samples * setting.tokens * setting.width >= PREFETCH_MIN
    options = dict(prefetch=bool(prefetch),
                   matmul_dtype=torch.bfloat16 if matmul_precision == "bf16" else None,
                   share_factors=share_factors)
    completed, buffer = [0], None  # the last layer whose statistics are all in the buffer

    def finished(layer: int) -> None:
        completed[0] = layer

    with matmul_precision_context(matmul_precision, torch_device):
        try:
            sampler = WeightSampler(seed, samples, torch_device, torch_dtype, weights, **options)
            buffer = StatsBuffer(setting.depth, names, samples, torch_device)
            try:
                bad = _run_once(setting, sampler, buffer, progress, finished)
            except _FactorFailed:  # rare (rank-deficient rows): redo every product with QR factors
                completed[0], buffer = 0, None
                sampler = WeightSampler(seed, samples, torch_device, torch_dtype, weights, factor="qr", **options)
                buffer = StatsBuffer(setting.depth, names, samples, torch_device)
                bad = _run_once(setting, sampler, buffer, progress, finished)
        except KeyboardInterrupt as stop:
            raise _interruption(stop, buffer, names, completed[0]) from None
    upto = setting.depth + 1 if bad is None else bad
    table = table_from_stats(buffer.to_numpy(upto), names)
    if bad is not None:
        raise NumericalBlowUp(bad, table)
    return table


def stream_states(setting, *, samples: int, seed: int = 0) -> torch.Tensor:
    """Every layer's stream of ``samples`` random stacks, (L+1, S, T, d) on the CPU: for figures only.

    The same weights, input and block step as :func:`simulate` with this seed (dense or implicit
    weights as ``auto`` picks, no Jacobian channels), but every primal stream kept, so memory grows
    with depth (the angular-distance heatmaps of ``paper_figs.angular``).
    """
    sampler = WeightSampler(seed, samples, torch.device("cpu"), torch.float32, "auto")
    states = []
    with torch.inference_mode():
        stream = initial_stream(setting, sampler, False, False)  # (1, S, T, d)
        states.append(stream[0].clone())
        for layer in range(1, setting.depth + 1):
            ctx = block_context(setting, sampler, layer)
            stream, _ = block_step(stream, ctx, None, None, block_mask(setting, sampler, layer))
            states.append(stream[0].clone())
    return torch.stack(states)  # (L+1, S, T, d)
