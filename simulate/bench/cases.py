"""The rows of ``python -m simulate bench``: the base setting per device, its ablations, the correlated pair.

See :mod:`simulate.bench` for what each row measures.

>>> [case.name for case in cases("cpu", quick=True, ablate=False)][:1]
['llama-w64-T16-L4-S4']
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from theory.setting import Setting

__all__ = ["CHECK_METRICS", "PAIR_METRICS", "PAIR_INPUT_STDS", "Case", "cases", "simulate_function"]

CHECK_METRICS = ("var", "angular")
# The correlated-input pair: the metrics of the issue that found the slowdown (token_cos shows the collapse).
PAIR_METRICS = ("var", "jac_dev", "angular", "e2e_gain", "token_cos")
PAIR_INPUT_STDS = (1.0, 0.02)  # independent tokens; P1's embedding std (tokens collapse with depth)


def simulate_function() -> Callable:
    """:func:`simulate.simulate`, the package's public entry point (what the bench times and ablates)."""
    from simulate import simulate

    return simulate


@dataclass
class Case:
    """One bench row: a setting, how ours runs it, and whether the naive simulator runs too.

    ``reference`` names an earlier row whose statistics this row's are checked against
    (besides the naive run). ``tf32`` sets TF32 matmuls for the row (CUDA), None = leave.
    ``pair`` names an earlier row of the same size whose time this row's is compared with
    (``vs_pair``; other statistics, so no check).
    """

    name: str
    setting: Setting
    samples: int
    kwargs: dict = field(default_factory=dict)
    naive: bool = False
    reference: str | None = None
    looped: bool = False  # one simulate call per sample (the batched-samples ablation)
    tf32: bool | None = None
    metrics: tuple[str, ...] = CHECK_METRICS
    pair: str | None = None


def _label(setting: Setting, samples: int, variant: str = "") -> str:
    name = f"llama-w{setting.width}-T{setting.tokens}-L{setting.depth}-S{samples}"
    return f"{name}:{variant}" if variant else name


def cases(device: str, quick: bool, ablate: bool) -> list[Case]:
    """The bench rows for ``device`` ('cpu'/'cuda').

    >>> [c.name for c in cases("cpu", quick=True, ablate=False)]
    ['llama-w64-T16-L4-S4', 'llama-w128-T16-L8-S16:input-std-1', 'llama-w128-T16-L8-S16:input-std-0.02']
    >>> names = [c.name for c in cases("cuda", quick=False, ablate=True)]
    >>> len(names) == len(set(names)), names[0]
    (True, 'llama-w4096-T1024-L10000-S1:tf32')
    """
    if quick:
        small, samples = Setting.preset("llama", width=64, heads=4, tokens=16, depth=4), 4
    else:
        small, samples = Setting.preset("llama", width=512, heads=4, tokens=64, depth=96), 8
    base = Case(_label(small, samples), small, samples, naive=True)
    rows = [base]
    if device == "cuda" and not quick:
        rows = _gpu_cases(base)
    elif device == "cuda":
        rows.append(Case(_label(small, samples, "tf32"), small, samples, tf32=True, reference=base.name))
        rows.append(Case(_label(small, samples, "bf16"), small, samples, kwargs={"matmul_precision": "bf16"},
                         reference=base.name))
    if ablate:
        names = {row.name for row in rows}
        rows += [row for row in _ablation_cases(_base_of(rows, base))
                 if row.name not in names]
    return rows + _correlated_cases(quick)


def _correlated_cases(quick: bool) -> list[Case]:
    """The same stack with independent and with correlated tokens (width 128, 16 tokens, depth 3000)."""
    setting = Setting.preset("llama", width=128, tokens=16, depth=8 if quick else 3000)
    samples, rows = 16, []
    for std in PAIR_INPUT_STDS:
        variant = setting.replace(input_std=std)
        rows.append(Case(_label(variant, samples, f"input-std-{std:g}"), variant, samples, metrics=PAIR_METRICS,
                         pair=rows[0].name if rows else None))
    return rows


def _base_of(rows: list[Case], base: Case) -> Case:
    """The row compared with the naive simulator (the ablations' reference)."""
    return next((row for row in rows if row.naive), base)


def _gpu_cases(base: Case) -> list[Case]:
    """Depth 10000 at width 4096 (target <= 15 s, TF32), base vs naive, precision, weights, memory."""
    big = Setting.preset("llama", width=4096, heads=32, tokens=1024, depth=10000)
    mid = big.replace(depth=100)
    small, samples = base.setting, base.samples
    return [
        Case(_label(big, 1, "tf32"), big, 1, tf32=True, metrics=("var",)),
        Case(base.name, small, samples, naive=True, tf32=False),
        Case(_label(small, samples, "tf32"), small, samples, tf32=True, reference=base.name),
        Case(_label(small, samples, "bf16"), small, samples, kwargs={"matmul_precision": "bf16"},
             reference=base.name),
        Case(_label(mid, 1, "dense"), mid, 1, kwargs={"weights": "dense"}, tf32=True, metrics=("var",)),
        Case(_label(mid, 1, "implicit"), mid, 1, kwargs={"weights": "implicit"}, tf32=True, metrics=("var",)),
        Case(_label(mid, 1, "auto"), mid, 1, kwargs={"weights": "auto"}, tf32=True, metrics=("var",)),
        Case(_label(small, samples, "dense"), small, samples, kwargs={"weights": "dense"}, tf32=True),
        Case(_label(small, samples, "implicit"), small, samples, kwargs={"weights": "implicit"}, tf32=True),
    ]


def _ablation_cases(base: Case) -> list[Case]:
    """One technique switched at a time against ``base`` (same setting, same TF32 state)."""
    small, samples = base.setting, base.samples
    rows = [
        Case(_label(small, samples, "looped-samples"), small, samples, looped=True, reference=base.name),
        Case(_label(small, samples, "dense"), small, samples, kwargs={"weights": "dense"}, reference=base.name),
        Case(_label(small, samples, "implicit"), small, samples, kwargs={"weights": "implicit"},
             reference=base.name),
        Case(_label(small, samples, "unshared-factors"), small, samples, kwargs={"share_factors": False},
             reference=base.name),
        Case(_label(small, samples, "no-prefetch"), small, samples, kwargs={"prefetch": False},
             reference=base.name),
        Case(_label(small, samples, "jvp-jac_dev"), small, samples, metrics=("var", "angular", "jac_dev"),
             reference=base.name),
    ]
    offered = inspect.signature(simulate_function()).parameters
    for keyword in ("compile", "cuda_graphs"):
        if keyword in offered:
            rows.append(Case(_label(small, samples, keyword), small, samples, kwargs={keyword: True},
                             reference=base.name))
    for row in rows:
        row.tf32 = base.tf32
    return rows
