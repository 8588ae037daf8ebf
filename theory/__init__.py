"""Symbolic theory of depth in residual stacks: recursions, bounds and a lemma registry.

Imports no torch and nothing of ``simulate``.
"""

from theory.setting import Setting, SettingError

__all__ = ["Setting", "SettingError"]
