"""``python -m simulate bench --train``: the trainer with its statistics against plain training loops.

The baseline is a plain PyTorch loop over the same model (:class:`CausalLM`, fused
``scaled_dot_product_attention``), the same optimiser (:func:`make_optimizer`), schedule
and batches, with nothing measured. When ``transformers`` is installed, a second baseline
is the same loop over ``transformers``' own ``LlamaForCausalLM`` (SDPA attention) with the
same weights (:func:`simulate.scores.hf.llama_model`; Pre-LN or LNS llama-preset settings).
The trainer (:class:`Trainer`) runs the same steps with every statistic at ``log_every``
and no checkpoints inside the loop; its parts (an unlogged step, a logged step's statistics,
a checkpoint) are also timed alone, to give its rate at a study's logging rate. The three
loops take turns :data:`REPEATS` times and each keeps its fastest time. Each is warmed up
first with two steps at the measured size (the first forward-mode JVP loads torch's
decompositions once per process, seconds; the first full-size steps pay for the process's
memory). The rows: the setting of the earlier sessions (d=128, L=12, T=128) and the
atlas's (d=64, L=16, T=64). Each row of
``DIR/bench_train.csv`` (written atomically):

========================  ========================================================
setting                   width, depth, tokens, batch, steps, log_every
device                    cpu or cuda
plain_tokens_per_s        training tokens per wall-clock second of the plain loop
trainer_tokens_per_s      the same for the trainer with statistics (end to end)
overhead                  trainer wall seconds / plain wall seconds - 1: the extra
                          time, end to end (the logged steps 0, log_every, ...,
                          steps, the final forward/backward of step ``steps``, the
                          final files)
plain_tokens_per_cpu_s    training tokens per process CPU second (all threads): on
trainer_tokens_per_cpu_s  a shared machine closer to an idle machine's rate
cpu_overhead              trainer CPU seconds / plain CPU seconds - 1
probe_s                   CPU seconds of one logged step's statistics (probe, JVPs,
                          norms)
steady_overhead           probe_s / (log_every x plain CPU seconds per step): the
                          extra time per ``log_every`` steps of a long run
hf_tokens_per_s           the ``LlamaForCausalLM`` loop's tokens per wall second (NaN
                          without transformers)
trainer_vs_hf             trainer_tokens_per_s / hf_tokens_per_s (end to end, its
                          statistics at the start and the end of this short run)
unlogged_tokens_per_s     the trainer's own unlogged steps (``_forward_backward`` and
                          ``_update`` at the same steps, timed alone): the plain loop
                          plus the trainer's per-step bookkeeping (its loss row)
study_rate_tokens_per_s   the trainer's rate with its statistics and checkpoints at a
                          study's rate (:data:`STUDY_LOG_EVERY`): per step, an unlogged
                          step plus ``(probe_wall_s + checkpoint_wall_s) /
                          STUDY_LOG_EVERY``; what a run pays once (the final
                          forward/backward, the first config file) is one step in a
                          study's 1600 and left out
checkpoint_wall_s         wall seconds of one checkpoint (logs, checkpoint, model,
                          config files)
study_rate_vs_hf          study_rate_tokens_per_s / hf_tokens_per_s
========================  ========================================================

Nothing here asserts a time.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from simulate.training.data import load_corpus, train_batch
from simulate.training.loop import Trainer, TrainConfig, learning_rate, make_optimizer
from simulate.training.model import CausalLM
from simulate.training.probes import lm_loss
from theory.files import atomic_write
from theory.setting import Setting

__all__ = ["BENCH_COLUMNS", "STUDY_LOG_EVERY", "REPEATS", "bench_settings", "plain_loop_seconds", "TrainerTimes",
           "trainer_seconds", "bench_train", "run_train_bench"]

BENCH_COLUMNS = ["setting", "device", "plain_tokens_per_s", "trainer_tokens_per_s", "overhead",
                 "plain_tokens_per_cpu_s", "trainer_tokens_per_cpu_s", "cpu_overhead", "probe_s", "steady_overhead",
                 "probe_wall_s", "checkpoint_wall_s", "hf_tokens_per_s", "trainer_vs_hf", "unlogged_tokens_per_s",
                 "study_rate_tokens_per_s", "study_rate_vs_hf"]
STUDY_LOG_EVERY = 100  # the studies' default logging rate, 100 of 1600 steps (simulate.study.train.point);
# the atlas's 400-step runs log every 25
REPEATS = 2  # each loop is timed this many times, taking turns, and keeps its fastest (one with quick)


def bench_settings(quick: bool) -> list[tuple[Setting, TrainConfig]]:
    """The rows: LLaMA d=128, L=12, T=128 and the atlas's d=64, L=16, T=64, batch 16, 50 steps, statistics
    every 50 (``quick``: one row of seconds)."""
    if quick:
        return [(Setting.preset("llama", width=32, depth=2, heads=2, tokens=16),
                 TrainConfig(steps=10, batch=4, log_every=5, checkpoint_every=11))]
    config = TrainConfig(steps=50, batch=16, log_every=50, checkpoint_every=51)
    return [(Setting.preset("llama", width=128, depth=12, heads=4, tokens=128), config),
            (Setting.preset("llama", width=64, depth=16, heads=4, tokens=64, lr=1e-3, input_std=0.02), config)]


class _Clock:
    """Wall-clock and process CPU seconds of a block (device synchronised)."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self):
        _sync(self.device)
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        _sync(self.device)
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plain_loop_seconds(setting: Setting, config: TrainConfig, corpus, device: torch.device,
                       hugging_face: bool = False) -> _Clock:
    """Seconds of ``config.steps`` plain training steps (same model, optimiser, schedule, batches).

    ``hugging_face``: the model is ``transformers``' ``LlamaForCausalLM`` with the same weights.
    """
    model = CausalLM(setting, seed=config.seed)
    if hugging_face:
        from simulate.scores.hf import llama_model

        model = llama_model(model)
    model = model.to(device)
    optimizer = make_optimizer(model, setting)
    with _Clock(device) as clock:
        for step in range(config.steps):
            x, y = (t.to(device) for t in train_batch(corpus, config.batch, setting.tokens, config.seed, step))
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = model(input_ids=x, use_cache=False).logits if hugging_face else model(x).logits
            lm_loss(logits, y).backward()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step + 1, config.steps, config.resolved_warmup, setting.lr)
            optimizer.step()
    return clock


@dataclass
class TrainerTimes:
    """The trainer's run end to end and its parts timed alone."""

    run: _Clock  # Trainer.run over config.steps
    probe_cpu: float  # CPU seconds of one logged step's statistics (logged minus unlogged forward/backward)
    probe_wall: float  # the same in wall seconds
    unlogged_wall: float  # wall seconds of config.steps unlogged steps (forward/backward and update)
    checkpoint_wall: float  # wall seconds of one checkpoint

    @classmethod
    def fastest(cls, repeats: list["TrainerTimes"]) -> "TrainerTimes":
        """Each part's fastest time over ``repeats`` (the run: the one of least wall time)."""
        return cls(min((times.run for times in repeats), key=lambda clock: clock.wall),
                   *(min(getattr(times, name) for times in repeats)
                     for name in ("probe_cpu", "probe_wall", "unlogged_wall", "checkpoint_wall")))


def trainer_seconds(setting: Setting, config: TrainConfig, corpus, device: torch.device) -> TrainerTimes:
    """:class:`TrainerTimes` of ``config``'s run, in a temporary directory."""
    with tempfile.TemporaryDirectory() as temp:
        trainer = Trainer(setting, config, corpus, device, Path(temp))
        with _Clock(device) as logged:
            trainer._measure(0)
            trainer._forward_backward(0, logged=True)
        with _Clock(device) as plain:
            trainer._forward_backward(0, logged=False)
        with _Clock(device) as unlogged:  # the unlogged steps of Trainer.run
            for step in range(config.steps):
                trainer._forward_backward(step, logged=False)
                trainer._update(step + 1)
        with _Clock(device) as checkpoint:
            trainer._save(config.steps, "running")
        trainer = Trainer(setting, config, corpus, device, Path(temp))
        with _Clock(device) as clock:
            trainer.run()
        return TrainerTimes(clock, max(logged.cpu - plain.cpu, 0.0), max(logged.wall - plain.wall, 0.0),
                            unlogged.wall, checkpoint.wall)


def bench_train(device: torch.device, quick: bool = False) -> pd.DataFrame:
    """The bench rows (module docstring)."""
    try:
        import transformers  # noqa: F401

        hugging_face = True
    except ImportError:
        hugging_face = False
    rows = []
    for setting, config in bench_settings(quick):
        corpus = load_corpus("docs", setting.tokens)
        # Each loop is warmed up at the measured size: the first full-size steps of a process pay for its
        # memory (first-touch page faults, the allocator's growth), and the trainer's first JVP loads torch's
        # decompositions. Warmed at one block, the loop timed first paid for it alone.
        warm = TrainConfig(steps=2, batch=config.batch, log_every=1, checkpoint_every=3)
        trainer_seconds(setting, warm, corpus, device)
        plain_loop_seconds(setting, warm, corpus, device)
        if hugging_face:
            plain_loop_seconds(setting, warm, corpus, device, hugging_face=True)
        # The loops take turns, REPEATS times, and each keeps its fastest time: a shared machine's load
        # only ever adds time, and taking turns spreads it over all three.
        plains, hf_walls, trainer_times = [], [], []
        for _ in range(1 if quick else REPEATS):
            plains.append(plain_loop_seconds(setting, config, corpus, device))
            if hugging_face:
                hf_walls.append(plain_loop_seconds(setting, config, corpus, device, True).wall)
            trainer_times.append(trainer_seconds(setting, config, corpus, device))
        plain = min(plains, key=lambda clock: clock.wall)
        hf_wall = min(hf_walls, default=float("nan"))
        times = TrainerTimes.fastest(trainer_times)
        ours, probe = times.run, times.probe_cpu
        tokens = config.steps * config.batch * setting.tokens
        study_step = (times.unlogged_wall / config.steps
                      + (times.probe_wall + times.checkpoint_wall) / STUDY_LOG_EVERY)  # seconds per step
        study_rate = config.batch * setting.tokens / study_step
        rows.append({"setting": f"llama d={setting.width} L={setting.depth} T={setting.tokens} B={config.batch} "
                                f"steps={config.steps} log_every={config.log_every}",
                     "device": device.type, "plain_tokens_per_s": tokens / plain.wall,
                     "trainer_tokens_per_s": tokens / ours.wall, "overhead": ours.wall / plain.wall - 1.0,
                     "plain_tokens_per_cpu_s": tokens / plain.cpu, "trainer_tokens_per_cpu_s": tokens / ours.cpu,
                     "cpu_overhead": ours.cpu / plain.cpu - 1.0, "probe_s": probe,
                     "steady_overhead": probe / (config.log_every * plain.cpu / config.steps),
                     "probe_wall_s": times.probe_wall, "checkpoint_wall_s": times.checkpoint_wall,
                     "hf_tokens_per_s": tokens / hf_wall, "trainer_vs_hf": hf_wall / ours.wall,
                     "unlogged_tokens_per_s": tokens / times.unlogged_wall, "study_rate_tokens_per_s": study_rate,
                     "study_rate_vs_hf": study_rate * hf_wall / tokens})
    return pd.DataFrame(rows, columns=BENCH_COLUMNS)


def run_train_bench(out: Path, device: torch.device, quick: bool, threads: int | None = None) -> int:
    """``bench --train``: the rows into ``out/bench_train.csv`` (atomically) and printed; returns 0."""
    if threads is not None:
        torch.set_num_threads(threads)
    table = bench_train(device, quick)
    Path(out).mkdir(parents=True, exist_ok=True)
    atomic_write(Path(out) / "bench_train.csv", lambda temp: table.to_csv(temp, index=False))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(f"device {device.type}, {torch.get_num_threads()} CPU threads")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {Path(out) / 'bench_train.csv'}")
    return 0
