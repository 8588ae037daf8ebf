"""The training loop: AdamW, warmup and cosine decay, clipping, probes, checkpoints, resume, a nan stop.

Step ``s`` means the parameters after ``s`` updates. At every logged step
(:meth:`TrainConfig.logged`: ``s`` a multiple of ``log_every``, and the last) the probe
batch is measured (:func:`simulate.training.probes.probe`, validation loss, bridge and
growth rows); then the training batch of step ``s`` (keyed by ``(seed, s)``) is run
forward and backward at those parameters: its loss is the ``train`` row of step ``s`` and,
at logged steps, its gradient gives ``grad_norm`` (before clipping) and its streams the
training-batch metrics. Update ``s + 1`` then uses that gradient with the learning rate
:func:`learning_rate` (P1's schedule: linear warmup, cosine decay to 0.1 of the peak).
After the last step one more forward/backward (no update) gives the final loss and
gradient norms. Optimiser: AdamW (betas 0.9, 0.95; decoupled weight decay on the
matrices, none on norm and branch gains), the Setting's ``lr`` and ``weight_decay``.

A checkpoint (:mod:`simulate.training.checkpoint`) is written every
``checkpoint_every`` updates with the logs so far; a resumed run loads it, keeps the log
rows of the steps before it and continues: everything random is keyed by ``(seed, step)``,
so on the CPU it logs exactly what an uninterrupted run logs. A non-finite training loss
stops the run at that step (:class:`LossNotFinite`) with the logs written.

>>> [round(learning_rate(u, steps=10, warmup=2, peak=1.0), 4) for u in (1, 2, 6, 10)]
[0.5, 1.0, 0.55, 0.1]
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from tqdm import tqdm

from simulate.engine import matmul_precision_context, table_from_stats
from simulate.training.checkpoint import MODEL, load_checkpoint, save_checkpoint, save_model
from simulate.training.data import Corpus, epochs_seen, probe_batch, train_batch
from simulate.training.identity import run_key, run_versions
from simulate.training.model import CausalLM
from simulate.training.probes import BATCH_METRICS, lm_loss, norms_table, probe, trace_statistics
from simulate.training.report import RunLogs, bridge_table, growth_row
from theory.files import atomic_write
from theory.constraints import Boolean, Choice, Integer, Optional, Real, check_fields

__all__ = ["PRECISIONS", "CONFIG_CONSTRAINTS", "TrainConfig", "LossNotFinite", "learning_rate", "make_optimizer",
           "Trainer"]

PRECISIONS = ("auto", "highest", "tf32", "bf16")
# What each field of TrainConfig may hold (theory.constraints); warmup < steps is checked beside them.
CONFIG_CONSTRAINTS = {"steps": Integer(1), "batch": Integer(1), "log_every": Integer(1), "seed": Integer(0),
                      "warmup": Optional(Integer(0)), "probe_batch": Optional(Integer(1)),
                      "checkpoint_every": Optional(Integer(1)), "clip": Real(0.0, note="0 = no clipping"),
                      "moe_lns_top_k": Boolean(), "precision": Choice(*PRECISIONS)}


@dataclass(frozen=True)
class TrainConfig:
    """Everything about a training run that is not the Setting (``None``: derived, see the properties)."""

    steps: int = 300
    batch: int = 16
    warmup: int | None = None  # None: steps // 10
    data: str = "docs"
    seed: int = 0
    log_every: int = 50
    clip: float = 0.0  # max gradient norm; 0 = no clipping
    probe_batch: int | None = None  # None: = batch
    checkpoint_every: int | None = None  # None: = log_every
    moe_lns_top_k: bool = False  # P2's top_k/sqrt(l) LNS factor in MoE blocks
    precision: str = "auto"  # auto: bf16 autocast (and TF32) on CUDA, full float32 on the CPU

    def __post_init__(self) -> None:
        check_fields(self.__dict__, CONFIG_CONSTRAINTS)
        if self.warmup is not None:  # a rule between two fields: warmup < steps
            Integer(0, self.steps - 1).check("warmup", self.warmup)

    @property
    def resolved_warmup(self) -> int:
        return self.steps // 10 if self.warmup is None else self.warmup

    @property
    def resolved_probe_batch(self) -> int:
        return self.batch if self.probe_batch is None else self.probe_batch

    @property
    def resolved_checkpoint_every(self) -> int:
        return self.log_every if self.checkpoint_every is None else self.checkpoint_every

    def logged(self, step: int) -> bool:
        """Whether step ``step`` is measured: a multiple of ``log_every``, or the last."""
        return step % self.log_every == 0 or step == self.steps

    def to_dict(self) -> dict:
        return asdict(self)

    def resolved_dict(self) -> dict:
        """:meth:`to_dict` with the derived fields resolved (what a resumed run must match)."""
        return {**self.to_dict(), "warmup": self.resolved_warmup, "probe_batch": self.resolved_probe_batch,
                "checkpoint_every": self.resolved_checkpoint_every}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class LossNotFinite(RuntimeError):
    """The training loss became nan or inf at ``step`` (the logs up to it are written)."""

    def __init__(self, step: int, value: float):
        self.step = int(step)
        super().__init__(f"the training loss is {value} at step {step} (after {step} updates)")


def learning_rate(update: int, steps: int, warmup: int, peak: float) -> float:
    """Learning rate of update ``update`` (1-based): linear warmup to ``peak``, cosine decay to ``0.1 peak`` (P1)."""
    if warmup > 0 and update <= warmup:
        return peak * update / warmup
    progress = (update - warmup) / max(steps - warmup, 1)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


def make_optimizer(model: CausalLM, setting) -> torch.optim.AdamW:
    """AdamW(lr, betas (0.9, 0.95)), weight decay on the matrices (ndim >= 2) only; call it after moving the
    model to its device.

    On the CPU and CUDA the update is torch's fused kernel (one call for every parameter: at d=64, L=16 on
    the CPU a quarter of the per-tensor loop's time, 6 % of a training step); the same update as the loop up
    to float rounding."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    fused = all(p.device.type in ("cpu", "cuda") for p in model.parameters())
    return torch.optim.AdamW([{"params": decay, "weight_decay": setting.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=setting.lr, betas=(0.9, 0.95),
                             fused=fused)


def resolved_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on CUDA, ``highest`` on the CPU."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "highest"
    return precision


def _with_step(table, step: int):
    return table.assign(step=step)


class Trainer:
    """One training run of ``setting`` on ``corpus`` into ``out`` (module docstring)."""

    def __init__(self, setting, config: TrainConfig, corpus: Corpus, device: torch.device, out: Path,
                 header: dict | None = None, progress: bool = False):
        self.setting, self.config, self.device, self.out = setting, config, device, Path(out)
        self.corpus, self.progress, self.header = corpus, progress, dict(header or {})
        self.precision = resolved_precision(config.precision, device)
        self.model = CausalLM(setting, seed=config.seed, moe_lns_top_k=config.moe_lns_top_k).to(device)
        self.optimizer = make_optimizer(self.model, setting)
        probe_x, probe_y = probe_batch(corpus, config.resolved_probe_batch, setting.tokens)
        self.probe_x, self.probe_y = probe_x.to(device), probe_y.to(device)
        self.logs, self.start, self.seconds = RunLogs(), 0, 0.0
        # what makes this run (simulate.training.identity), fixed with the code this process imported
        self.versions = run_versions(corpus.digest)
        self.key = run_key(setting, config, corpus.digest)

    def resume(self) -> int:
        """Load ``out``'s checkpoint and the log rows before it; returns the step to continue from."""
        self.start = load_checkpoint(self.out, self.model, self.optimizer)
        self.logs = RunLogs.read(self.out, self.start)
        config = json.loads((self.out / "config.json").read_text())
        self.seconds = float(config.get("seconds", 0.0))
        return self.start

    # -- one step --------------------------------------------------------------------
    def _measure(self, step: int) -> None:
        """Probe batch at step ``step``: train_layers, val loss, bridge and growth rows."""
        self.model.eval()
        result = probe(self.model, self.probe_x, self.probe_y, self.config.seed, step)
        self.model.train()
        self.logs.add("train_layers.csv", _with_step(result.table, step))
        self.logs.add("loss.csv", _loss_row(step, "val", result.loss))
        var = result.table[result.table.metric == "var"].set_index("layer")["mean"]
        var_mean = var.reindex(range(self.setting.depth + 1)).to_numpy()  # (L+1,)
        bridge = bridge_table(step, result.moments, var_mean)
        self.logs.add("bridge.csv", bridge)
        self.logs.add("growth.csv", growth_row(step, var_mean, bridge))

    def _forward_backward(self, step: int, logged: bool) -> float:
        """Loss and gradient of the training batch of ``step``; at logged steps also its norms and metrics."""
        x, y = (t.to(self.device) for t in train_batch(self.corpus, self.config.batch, self.setting.tokens,
                                                         self.config.seed, step))
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            output = self.model(x, collect=logged)
        loss = lm_loss(output.logits, y)
        value = float(loss.detach())
        self.logs.add("loss.csv", _loss_row(step, "train", value))
        if not math.isfinite(value):
            raise LossNotFinite(step, value)
        loss.backward()
        if logged:
            self.logs.add("train_layers.csv", _with_step(norms_table(self.model), step))
            values, _ = trace_statistics(output, BATCH_METRICS)  # (L+1, M, B)
            self.logs.add("train_batch_layers.csv", _with_step(table_from_stats(values, BATCH_METRICS), step))
        return value

    def _update(self, update: int) -> None:
        if self.config.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip)
        rate = learning_rate(update, self.config.steps, self.config.resolved_warmup, self.setting.lr)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        self.optimizer.step()

    # -- files -----------------------------------------------------------------------
    def data_record(self) -> dict:
        """The corpus (:meth:`Corpus.describe`) and how many ``epochs`` of its training part the run sees."""
        epochs = epochs_seen(self.corpus, self.config.steps, self.config.batch, self.setting.tokens)
        return {**self.corpus.describe(), "epochs": round(epochs, 4)}

    def write_config(self, status: str, step: int, **extra) -> None:
        body = {**self.header, "data": self.data_record(), "setting": self.setting.to_dict(),
                "train": self.config.to_dict(), "code": self.versions["code"], "key": self.key,
                "versions": self.versions, "device": self.device.type, "precision": self.precision, "status": status,
                "step": step, "seconds": round(self.seconds, 3), **extra}
        atomic_write(self.out / "config.json",
                     lambda temp: Path(temp).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n"))

    def _save(self, step: int, status: str) -> None:
        """Logs, checkpoint, model and config of step ``step`` (in that order: the checkpoint commits)."""
        self.logs.write(self.out)
        save_checkpoint(self.out, self.model, self.optimizer, step)
        save_model(self.out / MODEL, self.model, self.setting, {"moe_lns_top_k": self.config.moe_lns_top_k,
                                                                "step": step})
        self.write_config(status, step)

    def run(self, stop_at: int | None = None) -> dict:
        """Train from ``self.start`` to ``steps`` (or ``stop_at``); returns a summary dict."""
        config, every = self.config, self.config.resolved_checkpoint_every
        self.out.mkdir(parents=True, exist_ok=True)
        self.write_config("running", self.start)
        bar = tqdm(total=config.steps, initial=self.start, desc="train", unit="step",
                   disable=None if self.progress else True, leave=False)
        began, value = time.perf_counter(), math.nan
        try:
            with matmul_precision_context(self.precision, self.device):
                for step in range(self.start, config.steps + 1):
                    logged = config.logged(step)
                    if logged:
                        self._measure(step)
                    value = self._forward_backward(step, logged)
                    bar.set_postfix(loss=f"{value:.4f}", refresh=False)
                    if step == config.steps:
                        break
                    self._update(step + 1)
                    bar.update(1)
                    if (step + 1) % every == 0 or step + 1 == stop_at:
                        self.seconds += time.perf_counter() - began
                        began = time.perf_counter()
                        self._save(step + 1, "stopped" if step + 1 == stop_at else "running")
                        if step + 1 == stop_at:
                            return {"status": "stopped", "step": step + 1, "train_loss": value}
        except LossNotFinite as error:
            self.seconds += time.perf_counter() - began
            self.logs.write(self.out)
            self.write_config("nan", error.step, nan_step=error.step)
            raise
        finally:
            bar.close()
        self.seconds += time.perf_counter() - began
        self._save(config.steps, "done")
        return {"status": "done", "step": config.steps, "train_loss": value, "seconds": self.seconds}


def _loss_row(step: int, split: str, value: float):
    import pandas as pd

    return pd.DataFrame({"step": [step], "split": [split], "loss": [value]})
