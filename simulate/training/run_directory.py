"""A training run's directory: the one owner of its files, and the one function that trains into it.

``python -m simulate train --out DIR``, a sweep's point and a study's point all train into a
directory of these files (columns: :mod:`simulate.training.report`):

========================  ==========================================================
``config.json``           the Setting (``setting``), the training options (``train``),
                          the run's ``key`` and what made it (``versions``: code, corpus
                          digest, Python, torch; ``code`` again on its own), ``status``
                          (``running``/``done``) and the last ``step``
``loss.csv``              training loss at every step, held-out loss at logged steps
``train_layers.csv``      per-layer statistics of the probe batch at logged steps
``model.safetensors``     the trained model (:data:`simulate.training.checkpoint.MODEL`)
``checkpoint.safetensors``  model, optimiser and step while the run is unfinished
========================  ==========================================================

:class:`RunDirectory` is the only code that reads them; anything unusable raises
:class:`RunError`, one line naming the file. :func:`train_into` trains a Setting into a
directory: a finished run of the same request and versions is kept, an interrupted one
resumes from its checkpoint, any other starts again (:mod:`simulate.training.identity`).

>>> import tempfile
>>> run = RunDirectory(tempfile.mkdtemp())
>>> run.finished
False
>>> run.require_finished()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
simulate.training.run_directory.RunError: run directory ... is not allowed: no config.json (not a training run)
"""

from __future__ import annotations

import json
import logging
import shutil
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from simulate.training.checkpoint import CHECKPOINT, MODEL, checkpoint_step

__all__ = ["RunError", "RunDirectory", "train_into"]

CONFIG = "config.json"
LOSS = "loss.csv"
LAYERS = "train_layers.csv"
GROWTH = "growth.csv"
_LOG = logging.getLogger("simulate.training")


class RunError(ValueError):
    """A run directory or its checkpoint cannot be used (one-line message naming it)."""


class RunDirectory:
    """A training run's directory (module docstring). Files are read on first use and kept."""

    def __init__(self, path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    @property
    def saved_config(self) -> dict | None:
        """``config.json`` as saved, or None where there is none or it is not JSON (a run never started)."""
        try:
            return json.loads((self.path / CONFIG).read_text())
        except (OSError, ValueError):
            return None

    @cached_property
    def config(self) -> dict:
        """``config.json`` with a valid Setting, or :class:`RunError`."""
        if not self.path.is_dir():
            raise RunError(f"run directory {str(self.path)!r} is not allowed: no such directory")
        path = self.path / CONFIG
        if not path.is_file():
            raise RunError(f"run directory {str(self.path)!r} is not allowed: no {CONFIG} (not a training run)")
        from theory.setting import Setting, SettingError

        try:
            config = json.loads(path.read_text())
            Setting.from_dict(config["setting"])
        except (json.JSONDecodeError, KeyError, TypeError, SettingError) as error:
            raise RunError(f"{path} is not allowed: not the {CONFIG} of a training run ({error})") from None
        return config

    @cached_property
    def setting(self):
        from theory.setting import Setting

        return Setting.from_dict(self.config["setting"])

    @property
    def train_options(self) -> dict:
        """The training options saved under ``train``."""
        return self.config.get("train", {})

    @property
    def seed(self) -> int:
        return int(self.train_options.get("seed", 0))

    @property
    def model_path(self) -> Path:
        return self.path / MODEL

    @property
    def finished(self) -> bool:
        """Whether the run trained to its end: ``status`` done and its model saved."""
        saved = self.saved_config
        return saved is not None and saved.get("status") == "done" and self.model_path.is_file()

    def require_finished(self) -> None:
        """:class:`RunError` naming what a finished run lacks."""
        self.config  # noqa: B018 (raises RunError for a directory that is no run)
        for name in (LAYERS, LOSS, MODEL):
            if not (self.path / name).is_file():
                raise RunError(f"run directory {str(self.path)!r} is not allowed: no {name} (an unfinished "
                               "training run?)")
        if self.config.get("status") != "done":
            raise RunError(f"run directory {str(self.path)!r} is not allowed: its {CONFIG} says status="
                           f"{self.config.get('status')!r}, not 'done' (resume it with --resume)")

    @property
    def last_step(self) -> int:
        """The step the run's model was saved at."""
        return int(self.config.get("step", self.train_options.get("steps", 0)))

    def _csv(self, name: str) -> pd.DataFrame:
        path = self.path / name
        if not path.is_file():
            raise RunError(f"run directory {str(self.path)!r} is not allowed: no {name}")
        return pd.read_csv(path)

    def loss(self) -> pd.DataFrame:
        """``loss.csv``: ``step, split, loss``."""
        return self._csv(LOSS)

    def layers(self) -> pd.DataFrame:
        """``train_layers.csv``: ``step, layer, metric, mean, sem, ci_low, ci_high, n``."""
        return self._csv(LAYERS)

    def growth(self) -> pd.DataFrame:
        """``growth.csv``: the growth fits of ``var`` over depth at every logged step."""
        return self._csv(GROWTH)

    def var_profiles(self) -> dict[int, np.ndarray]:
        """``{step: var over layers 0..L}`` of every logged step, in order (NaN where a layer is missing)."""
        var = self.layers()
        var = var[var["metric"] == "var"]
        return {int(step): rows.set_index("layer")["mean"].reindex(range(self.setting.depth + 1)).to_numpy(float)
                for step, rows in sorted(var.groupby("step"))}  # (L+1,) each


def train_into(directory, setting, config, device, header: dict | None = None, progress: bool = False) -> float:
    """Train ``setting`` with ``config`` (a :class:`~simulate.training.loop.TrainConfig`) into ``directory``;
    the seconds spent training (over every attempt).

    A finished run of the same Setting, options, code, corpus, Python and torch
    (:func:`simulate.training.identity.run_difference`) is kept as it is; an unfinished one resumes from
    its checkpoint; any other run is removed and trained again, with one warning line (logger
    ``simulate.training``) naming what differs. Once done, the checkpoint is removed
    (``model.safetensors`` is the model). A non-finite loss raises
    :class:`~simulate.training.loop.LossNotFinite` with the logs kept.
    """
    from simulate.training.data import load_corpus
    from simulate.training.identity import run_difference
    from simulate.training.loop import Trainer

    run = RunDirectory(directory)
    corpus = load_corpus(config.data, setting.tokens)
    saved = run.saved_config
    why = None if saved is None else run_difference(saved, setting, config)
    if why is not None:
        _LOG.warning("%s is trained again: it was made with %s", run.path, why)
        shutil.rmtree(run.path)
        saved = None
    run.path.mkdir(parents=True, exist_ok=True)
    if saved is not None and run.finished:
        return float(saved.get("seconds", 0.0))
    trainer = Trainer(setting, config, corpus, device, run.path, header=header, progress=progress)
    if saved is not None and checkpoint_step(run.path) is not None:
        trainer.resume()
    trainer.run()
    (run.path / CHECKPOINT).unlink(missing_ok=True)
    return trainer.seconds
