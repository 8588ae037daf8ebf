"""``python -m simulate train``: a tiny byte-level LM of a Setting trained on text, measured per layer.

``train [SETTING FLAGS] --steps N --batch B --warmup W --data PATH|docs --seed N
--device auto|cpu|cuda --log-every K --out DIR`` writes ``DIR/config.json``, ``DIR/loss.csv``,
``DIR/train_layers.csv``, ``DIR/train_batch_layers.csv``, ``DIR/bridge.csv``,
``DIR/growth.csv`` (:mod:`simulate.training.report`), ``DIR/model.safetensors`` and
``DIR/checkpoint.safetensors``. ``--resume DIR`` continues an interrupted run of the same
Setting and training flags (``--device``, ``--stop-at`` and ``--progress`` may change), made by
the same code, corpus, Python and torch (:mod:`simulate.training.identity`); ``--stop-at N``
checkpoints and stops after update N (continue later with ``--resume``); ``--quick`` is a tiny
run (LLaMA preset, d=64, L=8, T=64, 4 heads, 300 steps) unless flags say otherwise. Bad input
(a Setting value, ``--steps 0``, data that cannot be used, a batch that does not fit in
memory, a ``--resume`` directory of another run or of one made by other code, data, Python or
torch): one line on stderr naming what differs, exit 2, nothing written. A loss that becomes
nan: the logs are kept, one line names the step, exit 1.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from simulate.engine import resolve_device
from simulate.runtime.machine import check_fits
from simulate.training.budget import estimate_bytes
from simulate.training.checkpoint import checkpoint_step
from simulate.training.data import DataError, load_corpus
from simulate.training.loop import PRECISIONS, LossNotFinite, Trainer, TrainConfig
from theory.cli import CliParser, fail, int_at_least, output_path
from theory.setting import SettingError, add_setting_arguments, setting_from_args

__all__ = ["PROG", "QUICK", "build_parser", "main"]

PROG = "python -m simulate train"
QUICK = {"preset": "llama", "width": 64, "depth": 8, "tokens": 64, "heads": 4, "steps": 300}


def build_parser() -> CliParser:
    parser = CliParser(prog=PROG, description="Train a tiny byte-level LM of a Setting and measure it per layer.")
    add_setting_arguments(parser)
    train = parser.add_argument_group("training")
    train.add_argument("--steps", type=int, default=None, help="updates N (default 300)")
    train.add_argument("--batch", type=int, default=16, help="sequences per step B (default 16)")
    train.add_argument("--warmup", type=int, default=None, help="linear warmup updates W (default steps/10)")
    train.add_argument("--data", default="docs", help="'docs' (the standard library's docs), 'stdlib' (its sources) "
                       "or a UTF-8 text file")
    train.add_argument("--seed", type=int, default=0, help="seed of weights, batches and probes (default 0)")
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    train.add_argument("--precision", default="auto", choices=PRECISIONS,
                       help="auto: bf16 autocast + TF32 on CUDA, float32 on the CPU")
    train.add_argument("--log-every", type=int, default=50, help="measure every K steps (default 50)")
    train.add_argument("--probe-batch", type=int, default=None, help="held-out probe sequences (default: --batch)")
    train.add_argument("--clip", type=float, default=0.0, help="max gradient norm (default 0: no clipping)")
    train.add_argument("--checkpoint-every", type=int, default=None, help="updates between checkpoints "
                       "(default: --log-every)")
    train.add_argument("--moe-lns-top-k", action="store_true",
                       help="P2's LNS factor top_k/sqrt(l) in MoE blocks (default 1/sqrt(l))")
    train.add_argument("--out", default=None, help="output directory (required unless --resume)")
    train.add_argument("--resume", default=None, metavar="DIR", help="continue the interrupted run in DIR")
    train.add_argument("--stop-at", type=int_at_least(1), default=None, metavar="N",
                       help="checkpoint and stop after update N (continue with --resume)")
    train.add_argument("--quick", action="store_true", help="a tiny run: " +
                       ", ".join(f"{k}={v}" for k, v in QUICK.items()) + " (flags given win)")
    train.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                       help="a tqdm bar over steps on a terminal (default on)")
    return parser


def _apply_quick(args: argparse.Namespace) -> None:
    for name, value in QUICK.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(steps=300 if args.steps is None else args.steps, batch=args.batch, warmup=args.warmup,
                       data=args.data, seed=args.seed, log_every=args.log_every, clip=args.clip,
                       probe_batch=args.probe_batch, checkpoint_every=args.checkpoint_every,
                       moe_lns_top_k=args.moe_lns_top_k, precision=args.precision)


def _check_memory(setting, config: TrainConfig, device) -> None:
    check_fits(estimate_bytes(setting, config.batch, config.resolved_probe_batch), device, PROG,
               "--batch, --probe-batch, --tokens, --width or --depth", what=f"training with batch={config.batch}")


def _check_resume(directory: Path, setting, config: TrainConfig) -> dict:
    """The saved config of a resumable run in ``directory`` of this Setting, these flags, this code and data,
    this Python and torch (:func:`simulate.training.identity.run_difference`), else exit 2."""
    from simulate.training.identity import run_difference
    from simulate.training.run_directory import RunDirectory

    saved = RunDirectory(directory).saved_config
    if saved is None or checkpoint_step(directory) is None:
        fail(PROG, f"--resume {directory} is not allowed: no checkpoint of a training run there")
    why = run_difference(saved, setting, config)
    if why is not None:
        fail(PROG, f"--resume {directory} is not allowed: it was made with {why}; train it again with --out")
    return saved


def _prepare(argv: list[str]):
    """Parse and check everything (exit 2 on bad input) before anything is written."""
    args = build_parser().parse_args(argv)
    if args.quick:
        _apply_quick(args)
    try:
        setting = setting_from_args(args)
        config = _config(args)
        device = resolve_device(args.device)
        if config.precision == "tf32" and device.type != "cuda":
            raise ValueError("precision='tf32' is not allowed on the CPU: auto, highest or bf16")
    except (SettingError, ValueError) as error:
        fail(PROG, str(error))
    if not setting.causal:
        fail(PROG, "causal=False is not allowed in train: a language model must not see the bytes it predicts")
    if setting.input_cos > 0:
        fail(PROG, f"input_cos={setting.input_cos} is not allowed in train: 0 (the input is a byte embedding; "
                   "input_cos shapes the simulator's Gaussian input)")
    if args.out is None and args.resume is None:
        fail(PROG, "--out is required (or --resume DIR)")
    if args.resume is not None and args.out is not None and Path(args.out).resolve() != Path(args.resume).resolve():
        fail(PROG, f"--out {args.out} is not allowed with --resume {args.resume}: a resumed run writes into its "
                   "own directory")
    try:
        corpus = load_corpus(config.data, setting.tokens)
    except DataError as error:
        fail(PROG, str(error))
    _check_memory(setting, config, device)
    if args.resume is not None:
        out = Path(args.resume)
        saved = _check_resume(out, setting, config)
    else:
        out, saved = output_path(PROG, args.out, directory=True), None
    return args, setting, config, device, corpus, out, saved


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simulate train``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, setting, config, device, corpus, out, saved = _prepare(argv)
    if saved is not None and saved.get("status") == "done":
        print(f"{PROG}: the run in {out} is complete ({config.steps} steps); nothing to do")
        return 0
    trainer = Trainer(setting, config, corpus, device, out, header={"command": ["train", *argv]},
                      progress=args.progress)
    if saved is not None:
        trainer.resume()
    if args.stop_at is not None and args.stop_at <= trainer.start:
        fail(PROG, f"stop_at={args.stop_at} is not allowed: an update after the checkpoint ({trainer.start})")
    try:
        summary = trainer.run(stop_at=args.stop_at)
    except LossNotFinite as error:
        fail(PROG, f"{error}; the run stops there, logs kept in {out}", code=1)
    return _report(summary, setting, config, out)


def _report(summary: dict, setting, config: TrainConfig, out: Path) -> int:
    from simulate.training.run_directory import RunDirectory

    if summary["status"] == "stopped":
        print(f"{PROG}: stopped after update {summary['step']}; continue with --resume {out}")
        return 0
    run = RunDirectory(out)
    loss = run.loss()
    final = loss[loss.step == config.steps].set_index("split")["loss"]
    growth = run.growth().iloc[-1]
    tokens = config.steps * config.batch * setting.tokens
    print(f"{setting.scheme}/{setting.block} L={setting.depth} d={setting.width} T={setting.tokens} "
          f"B={config.batch} {config.steps} steps: train loss {final.get('train', math.nan):.4f}, "
          f"val loss {final.get('val', math.nan):.4f} (log 256 = {math.log(256):.4f}); var growth "
          f"{growth.growth_class}, log-log slope {growth.loglog_slope:.3g} "
          f"[{growth.loglog_low:.3g}, {growth.loglog_high:.3g}]; {summary['seconds']:.1f} s, "
          f"{tokens / max(summary['seconds'], 1e-9):.0f} tokens/s -> {out}")
    return 0
