"""Checkpoints of a training run as safetensors (no pickle), each written all at once.

``DIR/checkpoint.safetensors`` holds the model's tensors (``model.NAME``), the AdamW state
tensors (``optim.INDEX.KEY``, parameters in ``model.parameters()`` order) and, in the
file's string metadata, the step and the optimiser's parameter groups as JSON. One file
is the commit point of a checkpoint: it is written to a temporary file and moved into
place (:func:`theory.files.atomic_write`), so an interrupted write leaves the previous
checkpoint intact. ``DIR/model.safetensors`` is the model alone, with the Setting in its
metadata (what ``simulate scores`` and :func:`load_model` read).

>>> import tempfile, pathlib
>>> from theory.setting import Setting
>>> from simulate.training.model import CausalLM
>>> setting = Setting.preset("llama", depth=1, width=8, heads=2, tokens=4)
>>> path = save_model(pathlib.Path(tempfile.mkdtemp()) / "model.safetensors", CausalLM(setting, seed=1), setting)
>>> bool(torch.equal(load_model(path).head, CausalLM(setting, seed=1).head))
True
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from simulate.training.model import CausalLM
from theory.files import atomic_write
from theory.setting import Setting

__all__ = ["CHECKPOINT", "MODEL", "FORMAT", "save_checkpoint", "load_checkpoint", "checkpoint_step", "save_model",
           "load_model"]

CHECKPOINT = "checkpoint.safetensors"
MODEL = "model.safetensors"
FORMAT = "depth-workbench-train/1"


def _model_tensors(model: CausalLM) -> dict[str, torch.Tensor]:
    return {f"model.{name}": tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}


def save_checkpoint(directory: Path, model: CausalLM, optimizer: torch.optim.Optimizer, step: int) -> Path:
    """Write model, optimiser state and ``step`` to ``directory/checkpoint.safetensors`` atomically."""
    state = optimizer.state_dict()
    tensors = _model_tensors(model)
    for index, entry in state["state"].items():
        for key, value in entry.items():
            tensors[f"optim.{index}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    metadata = {"format": FORMAT, "step": str(step), "param_groups": json.dumps(state["param_groups"])}
    return atomic_write(directory / CHECKPOINT, lambda temp: save_file(tensors, temp, metadata=metadata))


def checkpoint_step(directory: Path) -> int | None:
    """The step of ``directory``'s checkpoint, or None when there is none (or it is not one of ours)."""
    path = Path(directory) / CHECKPOINT
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
    except Exception:  # noqa: BLE001 - a damaged or foreign file is "no checkpoint"
        return None
    return int(metadata["step"]) if metadata.get("format") == FORMAT else None


def load_checkpoint(directory: Path, model: CausalLM, optimizer: torch.optim.Optimizer) -> int:
    """Load ``directory``'s checkpoint into ``model`` and ``optimizer`` (on their devices); returns its step."""
    path = Path(directory) / CHECKPOINT
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(path))
    model.load_state_dict({name[len("model."):]: t for name, t in tensors.items() if name.startswith("model.")})
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, tensor in tensors.items():
        if name.startswith("optim."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = tensor
    optimizer.load_state_dict({"state": state, "param_groups": json.loads(metadata["param_groups"])})
    return int(metadata["step"])


def save_model(path: Path, model: CausalLM, setting: Setting, extra: dict | None = None) -> Path:
    """Write the model's tensors with ``{"setting": ..., **extra}`` (JSON) in the metadata, atomically."""
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    metadata = {"format": FORMAT, "setting": json.dumps(setting.to_dict()), "extra": json.dumps(extra or {})}
    return atomic_write(path, lambda temp: save_file(tensors, temp, metadata=metadata))


def load_model(path: Path, device: str | torch.device = "cpu") -> CausalLM:
    """The :class:`CausalLM` saved by :func:`save_model` (its Setting and options from the metadata)."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    setting = Setting.from_dict(json.loads(metadata["setting"]))
    extra = json.loads(metadata.get("extra", "{}"))
    model = CausalLM(setting, seed=0, moe_lns_top_k=bool(extra.get("moe_lns_top_k", False)))
    model.load_state_dict(load_file(str(path)))
    return model.to(device)
