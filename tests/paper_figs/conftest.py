"""Each registry figure is built once per test session at the quick size and kept open for the tests.

:func:`built` calls ``FIGURES[name](out_dir, True)`` with ``matplotlib.pyplot.close`` held
back, so the figure the builder saved (and would have closed) stays available: the file
tests look at what was written, the layout and data tests at the figure itself.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from paper_figs import FIGURES

_BUILT: dict = {}


@pytest.fixture(scope="session")
def built(tmp_path_factory, shared_cache):
    """``built(name) -> (paths, figure)``: the quick build of a registry figure (once per session)."""
    opened = []

    def build(name: str):
        if name not in _BUILT:
            out = tmp_path_factory.mktemp(f"fig-{name}")
            captured = []
            real_close = plt.close

            def hold(fig=None):
                if fig is not None and not isinstance(fig, str):
                    captured.append(fig)
                else:
                    real_close(fig)

            plt.close = hold
            try:
                paths = FIGURES[name](out, True)
            finally:
                plt.close = real_close
            assert captured, f"{name}: the builder saved no figure through paper_figs.style.save_figure"
            opened.extend(captured)
            _BUILT[name] = (paths, captured[-1])
        return _BUILT[name]

    yield build
    for fig in opened:
        plt.close(fig)
    _BUILT.clear()
