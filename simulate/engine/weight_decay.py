"""The decoupled weight-decay process of P2 Theorem 3, many chains at once.

u_{t+1} = (1 - lr*wd) u_t - lr*g_t, g_t ~ N(0, grad_noise_std^2) i.i.d., u_0 ~ N(0, s^2)
with s = setting.resolved_init_std. Chains: ``samples`` x ``width`` independent
coordinates; metric 'var' at step t is, per sample, the unbiased variance over the
width chains, then mean/sem/CI over samples. Its expectation is the exact law
Var(u_t) = (1-eta lam)^(2t) Var(u_0) + eta^2 sigma_G^2 (1-(1-eta lam)^(2t))/(1-(1-eta lam)^2)
(``theory.weight_decay_variance``).

>>> from theory.setting import Setting
>>> table = weight_decay_process(Setting(width=8), samples=4, seed=0, steps=3)
>>> table.layer.tolist(), set(table.metric)
([0, 1, 2, 3], {'var'})
"""

from __future__ import annotations

import pandas as pd
import torch

from simulate.engine.tables import table_from_stats
from simulate.engine.weights import generator
from theory.constraints import Integer, check_fields

__all__ = ["weight_decay_process", "WD_PART"]

WD_PART = 70  # generator part of the weight-decay process (layer 0)


def weight_decay_process(setting, *, samples: int, seed: int, steps: int | None = None) -> pd.DataFrame:
    """Monte-Carlo 'var' of the weight-decay process over steps t = 0..steps (float64, CPU).

    Parameters
    ----------
    setting : theory.Setting
        Uses lr, weight_decay, grad_noise_std, resolved_init_std, width (chains per sample), depth.
    samples : int
        Independent groups of ``width`` chains; sem is over them.
    seed : int
    steps : int, optional
        Number of steps (default ``setting.depth``).

    Returns
    -------
    pandas.DataFrame
        Columns layer (= step t), metric ('var'), mean, sem, ci_low, ci_high, n.
    """
    steps = setting.depth if steps is None else steps
    check_fields({"steps": steps, "samples": samples}, {"steps": Integer(0), "samples": Integer(2)})
    gen = generator(seed, 0, WD_PART, "cpu")
    shape = (samples, setting.width)
    decay, lr = 1.0 - setting.lr * setting.weight_decay, setting.lr
    values = torch.empty(steps + 1, 1, samples, dtype=torch.float64)  # (steps+1, 1, S)
    u = setting.resolved_init_std * torch.randn(shape, generator=gen, dtype=torch.float64)  # (S, d)
    values[0, 0] = u.var(dim=-1)  # (S,)
    for step in range(1, steps + 1):
        noise = torch.randn(shape, generator=gen, dtype=torch.float64)  # (S, d)
        u = decay * u - lr * setting.grad_noise_std * noise
        values[step, 0] = u.var(dim=-1)  # (S,)
    return table_from_stats(values.numpy(), ("var",))
