"""Each registry figure is built once per test session at the quick size and kept for the tests.

:func:`built` calls ``FIGURES[name](out_dir, True)`` and keeps the figure the builder saved
(:func:`paper_figs.style.save_figure` calls ``Figure.savefig``; the figures are not pyplot's, so
nothing closes them): the file tests look at what was written, the layout and data tests at the
figure itself.
"""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from paper_figs import FIGURES

_BUILT: dict = {}


@pytest.fixture(scope="session")
def built(tmp_path_factory, shared_cache):
    """``built(name) -> (paths, figure)``: the quick build of a registry figure (once per session)."""

    def build(name: str):
        if name not in _BUILT:
            out = tmp_path_factory.mktemp(f"fig-{name}")
            saved = []
            real_savefig = Figure.savefig

            def keep(fig, *args, **kwargs):
                if fig not in saved:
                    saved.append(fig)
                return real_savefig(fig, *args, **kwargs)

            Figure.savefig = keep
            try:
                paths = FIGURES[name](out, True)
            finally:
                Figure.savefig = real_savefig
            assert saved, f"{name}: the builder saved no figure through paper_figs.style.save_figure"
            _BUILT[name] = (paths, saved[-1])
        return _BUILT[name]

    yield build
    _BUILT.clear()
