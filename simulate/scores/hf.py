"""Hugging Face interop (optional extra ``pip install -e ".[hf]"``): score HF checkpoints, export to LLaMA.

- :func:`is_hf_directory`, :func:`load_hf` and :class:`HFStack`: a local Hugging Face
  LLaMA / Mixtral / Qwen-family directory (``config.json`` with a ``model_type``, and
  weights; or a config alone for a random-init model) read with ``transformers``
  (``local_files_only``: nothing is downloaded) and seen block by block, so
  ``python -m simulate scores HF_DIR`` scores it. Stock HF blocks have no position
  factors, so a swapped block is simply the other block.
- :func:`export_llama`: a Pre-LN or LNS model of the ``llama`` preset (RMSNorm, SwiGLU, RoPE,
  no biases, no masks, no planted alignment, dense blocks) as a LLaMA checkpoint directory
  (``config.json`` + ``model.safetensors``) that ``LlamaForCausalLM`` loads with the same
  logits. LNS's ``1/sqrt(l)`` on both pre-norm outputs is folded into those norms' gains
  (the norm output is multiplied by gain and factor alike), so the export is a stock LLaMA;
  our SwiGLU ``silu(h W_up) * (h W_gate)`` is HF's ``silu(gate_proj h) * up_proj h``, so our
  ``up`` is HF's ``gate_proj`` and our ``gate`` HF's ``up_proj``.

``python -m simulate.scores.hf export RUN_DIR OUT_DIR`` exports a training run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from simulate.scores.stack import LayerStack

__all__ = ["HFError", "is_hf_directory", "load_hf", "HFStack", "hf_held_out_batches", "score_hf", "llama_config",
           "llama_tensors", "llama_model", "export_llama", "main"]


class HFError(ValueError):
    """A Hugging Face directory cannot be read, or a model cannot be exported (one-line message)."""


def is_hf_directory(path) -> bool:
    """Whether ``path/config.json`` is a Hugging Face model config (has ``model_type``, not a workbench run)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and "model_type" in data and "setting" not in data


def _transformers():
    try:
        import transformers
    except ImportError:  # pragma: no cover - the optional extra is absent
        raise HFError('reading a Hugging Face directory needs the optional extra: pip install -e ".[hf]"') from None
    return transformers


def load_hf(path, device="cpu"):
    """``(model, tokenizer or None)`` from a local HF directory; random init when it holds a config only."""
    transformers = _transformers()
    path = Path(path)
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    try:
        if weights:
            model = transformers.AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
        else:
            config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError) as error:
        raise HFError(f"Hugging Face directory {str(path)!r} is not allowed: {' '.join(str(error).split())[:300]}") \
            from None
    tokenizer = None
    if any((path / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return model.to(device).eval().requires_grad_(False), tokenizer


class HFStack(LayerStack):
    """A decoder-only HF model (``model.model.layers``) as a :class:`LayerStack`."""

    def __init__(self, model):
        self.model, self.inner = model, model.model
        self.depth = len(self.inner.layers)

    def _context(self, x: torch.Tensor) -> dict:
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, T)
        from transformers.masking_utils import create_causal_mask

        mask = create_causal_mask(config=self.model.config, inputs_embeds=x, attention_mask=None, cache=None,
                                  position_ids=positions)
        return {"attention_mask": mask, "position_ids": positions,
                "position_embeddings": self.inner.rotary_emb(x, position_ids=positions)}

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.inner.embed_tokens(inputs)  # (B, T, d)

    def block(self, x: torch.Tensor, params: int, position: int) -> torch.Tensor:
        out = self.inner.layers[params - 1](x, **self._context(x))
        return out[0] if isinstance(out, tuple) else out

    def sequence_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.model.lm_head(self.inner.norm(x))  # (B, T, V)
        return F.cross_entropy(logits.transpose(1, 2).float(), targets, reduction="none").mean(-1)  # (B,)


def hf_held_out_batches(model, tokenizer, text: bytes, sequences: int, tokens: int, batch_size: int):
    """Held-out windows of ``tokens + 1`` ids: the tokenizer's ids of ``text``, else its bytes (vocab >= 256)."""
    from simulate.scores.compute import held_out_batches

    if tokenizer is not None:
        ids = torch.tensor(tokenizer(text.decode("utf-8", errors="replace"))["input_ids"], dtype=torch.long)
    else:
        if model.config.vocab_size < 256:
            raise HFError(f"vocab_size={model.config.vocab_size} is not allowed without a tokenizer: bytes need 256")
        ids = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    if len(ids) < tokens + 1:
        raise HFError(f"the held-out text has {len(ids)} tokens, fewer than one window of {tokens + 1}")
    return held_out_batches(ids, sequences, tokens, batch_size)


def score_hf(path, groups, options, *, tokens: int | None = None, data: str | None = None, device="cpu",
             progress=None):
    """Scores of a local HF directory on held-out text (``docs`` or ``data``), as
    :func:`simulate.scores.runs.score_run` returns them."""
    from simulate.scores.compute import compute_scores
    from simulate.training.data import DataError, load_corpus

    model, tokenizer = load_hf(path, device)
    tokens = tokens or min(128, int(getattr(model.config, "max_position_embeddings", 128)))
    try:
        corpus = load_corpus(data or "docs", tokens)
    except DataError as error:
        raise HFError(str(error)) from None
    batches = [(x.to(device), y.to(device)) for x, y in
               hf_held_out_batches(model, tokenizer, bytes(corpus.held_out.numpy()), options.sequences, tokens,
                                   options.batch_size)]
    timings: dict = {}
    scores, pairs = compute_scores(HFStack(model), batches, groups, options, progress, timings)
    summary = {"run": str(path), "step": None, "hugging_face": type(model).__name__, "tokens": tokens,
               "data": data or "docs", "groups": list(groups),
               "options": {k: getattr(options, k) for k in options.__dataclass_fields__},
               "seconds": {k: round(v, 3) for k, v in timings.items()}}
    return scores, pairs, summary


def llama_config(setting) -> dict:
    """The ``config.json`` of a LLaMA checkpoint with the architecture of ``setting`` (llama preset)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256,
            "hidden_size": setting.width, "intermediate_size": setting.resolved_ffn_width,
            "num_hidden_layers": setting.depth, "num_attention_heads": setting.heads,
            "num_key_value_heads": setting.resolved_kv_heads, "head_dim": setting.head_dim,
            "hidden_act": "silu", "max_position_embeddings": setting.tokens, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
            "torch_dtype": "float32", "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def _check_exportable(setting) -> None:
    problems = {"scheme": setting.scheme not in ("pre", "lns"), "block": setting.block != "transformer",
                "norm": setting.norm != "rmsnorm", "activation": setting.activation != "swiglu",
                "rope": not setting.rope, "causal": not setting.causal, "mask_density": setting.mask_density < 1,
                "alignment": setting.alignment > 0}
    bad = [name for name, wrong in problems.items() if wrong]
    if bad:
        raise HFError(f"{bad[0]}={getattr(setting, bad[0])!r} is not allowed for a LLaMA export: a Pre-LN or LNS "
                      "transformer with rmsnorm, swiglu, rope, causal attention, no mask and no alignment")


def llama_tensors(model) -> dict[str, torch.Tensor]:
    """The ``LlamaForCausalLM`` state dict that computes what ``model`` (:class:`CausalLM`) does (float32, CPU)."""
    setting = model.setting
    _check_exportable(setting)
    tensors = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.final_norm.weight,
               "lm_head.weight": model.head}
    for i, block in enumerate(model.blocks):
        attention, mlp = block.sublayers
        prefix = f"model.layers.{i}"
        tensors.update({
            f"{prefix}.input_layernorm.weight": attention.norm_input.weight * attention.input_scale,
            f"{prefix}.self_attn.q_proj.weight": attention.fn.q, f"{prefix}.self_attn.k_proj.weight": attention.fn.k,
            f"{prefix}.self_attn.v_proj.weight": attention.fn.v, f"{prefix}.self_attn.o_proj.weight": attention.fn.o,
            f"{prefix}.post_attention_layernorm.weight": mlp.norm_input.weight * mlp.input_scale,
            f"{prefix}.mlp.gate_proj.weight": mlp.fn.up, f"{prefix}.mlp.up_proj.weight": mlp.fn.gate,
            f"{prefix}.mlp.down_proj.weight": mlp.fn.down})
    return {k: v.detach().float().cpu().contiguous() for k, v in tensors.items()}


def llama_model(model):
    """A ``transformers`` ``LlamaForCausalLM`` (fused SDPA attention) with ``model``'s weights, in memory."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{k: v for k, v in llama_config(model.setting).items() if k != "architectures"})
    llama = LlamaForCausalLM._from_config(config, attn_implementation="sdpa")
    llama.load_state_dict(llama_tensors(model))
    return llama


def export_llama(model, out_dir) -> Path:
    """Write ``model`` (:class:`~simulate.training.model.CausalLM`) as a LLaMA checkpoint directory."""
    from safetensors.torch import save_file

    from theory.files import atomic_write, write_text_atomic

    tensors = llama_tensors(model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "model.safetensors", lambda temp: save_file(tensors, temp, metadata={"format": "pt"}))
    config = json.dumps(llama_config(model.setting), indent=2, sort_keys=True) + "\n"
    write_text_atomic(out / "config.json", config)
    return out


def main(argv=None) -> int:
    """``python -m simulate.scores.hf export RUN_DIR OUT_DIR``: a training run as a LLaMA checkpoint."""
    from simulate.scores.runs import load_run_model
    from simulate.training.run_directory import RunError
    from theory.cli import CliParser, fail, output_path

    prog = "python -m simulate.scores.hf"
    parser = CliParser(prog=prog, description="Export a Pre-LN or LNS llama-preset run as a LLaMA checkpoint.")
    parser.add_argument("command", choices=("export",))
    parser.add_argument("run", metavar="RUN_DIR")
    parser.add_argument("out", metavar="OUT_DIR")
    args = parser.parse_args(argv)
    out = output_path(prog, args.out, directory=True)
    try:
        model, setting, _, step = load_run_model(args.run)
        export_llama(model, out)
    except (RunError, HFError) as error:
        fail(prog, str(error))
    print(f"{setting.scheme} L={setting.depth} d={setting.width} at step {step} -> {out} (LlamaForCausalLM; "
          f"LNS factors folded into the norm gains: {setting.scheme == 'lns'}; max positions {setting.tokens})")
    return 0


if __name__ == "__main__":
    from simulate.runtime.process import configure_process

    configure_process()
    sys.exit(main())

