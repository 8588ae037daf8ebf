"""Will a training run fit in memory? An estimate made before anything is allocated.

The estimate (float32, bytes) adds the parameters with their gradients and the two AdamW
moments (4 copies), the activations autograd keeps for one training step, those of the
probe pass (streams, branches and the unfused attention weights of its JVPs) and the
logits. Per token and block autograd keeps about ``12 d`` numbers for the attention
sublayer plus ``5 d_ff`` for an MLP (``E`` times that and the gates for a dense MoE), and
the fused attention kernel keeps no ``T x T`` matrix. It is an estimate: a run is
refused only when it exceeds what is available (:func:`available_bytes`).

>>> from theory.setting import Setting
>>> estimate = estimate_bytes(Setting.preset("llama", depth=8, width=64, heads=4, tokens=64), batch=16, probe_batch=16)
>>> 1e6 < estimate < 1e9
True
"""

from __future__ import annotations

from theory import architecture

__all__ = ["parameter_count", "estimate_bytes"]

_FLOAT = 4
_SAFETY = 1.5


def parameter_count(setting) -> int:
    """Parameters of the LM of ``setting`` (embedding, blocks, head; norm and branch gains at most 4d a sublayer).

    >>> from theory.setting import Setting
    >>> from simulate.training.model import CausalLM
    >>> setting = Setting.preset("llama", depth=2, width=16, heads=2, tokens=4)
    >>> exact = sum(p.numel() for p in CausalLM(setting).parameters())
    >>> 1.0 <= parameter_count(setting) / exact < 1.02
    True
    """
    d, d_ff, kv = setting.width, setting.resolved_ffn_width, setting.resolved_kv_heads * setting.head_dim
    mats = 3 if setting.activation == "swiglu" else 2
    sublayer = {"attention": 2 * d * d + 2 * d * kv, "mlp": mats * d * d_ff, "linear": d * d,
                "moe": setting.experts * (mats * d * d_ff + d) + (mats * d * d_ff if setting.shared_expert else 0)}
    per_block = sum(sublayer[kind] + 4 * d for kind in architecture.SUBLAYERS[setting.block])  # + norms, gains
    return 2 * 256 * d + setting.depth * per_block + 2 * d


def _activation_numbers_per_token(setting) -> int:
    d, d_ff = setting.width, setting.resolved_ffn_width
    per_kind = {"attention": 12 * d, "mlp": 5 * d_ff + 2 * d, "linear": 3 * d,
                "moe": setting.experts * (5 * d_ff + 1) + 2 * d + (5 * d_ff if setting.shared_expert else 0)}
    return setting.depth * sum(per_kind[kind] for kind in architecture.SUBLAYERS[setting.block])


def estimate_bytes(setting, batch: int, probe_batch: int) -> int:
    """Estimated peak bytes of one training step plus one probe (module docstring), with a 1.5x margin."""
    tokens = setting.tokens
    optimiser = 4 * parameter_count(setting)
    train = batch * tokens * (_activation_numbers_per_token(setting) + 3 * 256)
    attention_rows = setting.depth * setting.heads * tokens * tokens * 3 if "attention" in \
        architecture.SUBLAYERS[setting.block] else 0
    probe = probe_batch * (tokens * (_activation_numbers_per_token(setting) // 2 + 256) + attention_rows)
    return int(_SAFETY * _FLOAT * (optimiser + train + probe))
