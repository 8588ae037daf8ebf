"""Every notebook is saved clean and executes top to bottom in quick mode (QUICK=1), printing its verdicts.

After execution the text each notebook prints (cell outputs, and the explorer's output widget,
which nbclient stores in the notebook's widget state) must contain its answers in the words a
reader sees: what was compared and how it came out. Every figure cell shows a picture.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
NAMES = ["01_curse_of_depth", "02_sparsity", "03_explorer", "04_lemma_report", "05_regimes", "06_trained",
         "07_sweeps", "08_studies"]
# 07 has no size switch: it runs the example spec as written, shrunk to a 2 x 2 grid under QUICK=1.
SIZE_SWITCH = [name for name in NAMES if name != "07_sweeps"]
CELL_TIMEOUT_S = 180
# A code cell that calls one of these draws a figure and must show it.
FIGURE_CALL = (r"\b(profile_figure|sweep_figure|exponent_panel|plot_summary|summary_figure|variance_figure|new_figure"
               r"|depth_figure|pruning_figure|lns_gain_figure|phase_figure|plot_map|plt\.show)\(")
VERDICT = (r"(agrees with the measurement|is never crossed|is within \d+% of the measurement"
           r"|differs from the measurement)")
VERDICT_WORD = r"\((holds|violated|inconclusive|design cannot resolve)\)"
# a log ratio of drops that are not positive is not measured
VERDICT_OR_UNMEASURED = r"\((holds|violated|inconclusive|design cannot resolve|not measured)\)"
# What each notebook must print (regular expressions over its executed text); every notebook has an entry.
PRINTED = {
    "01_curse_of_depth": [
        r"Answer 1: averaged over layers, LNS (LOWERS|does not uniformly lower) the per-layer angular distance",
        r"Answer 2: \(var_L - var_0\)/L goes from",
        r"P1's recursion with c = 1 \(a constant P1 does not state\) over-predicts",
        r"p1-lemma-3\.2 at L=100: P1's recursion .* with c = 1 \(a constant the paper does not state\) " + VERDICT,
        r"Answer 3 \(approx laws\): \|z\| at the last layer at most [\d.]+ sem, worst over all layers",
        r"worst layer +worst \|z\| +verdict \(all layers\)",
    ],
    "02_sparsity": [
        r"P2 Thm 1 over-estimates the exact variance by x[\d.]+",
        r"p2-thm-1 +\d+ +holds as a bound x\d+",
        r"exact laws: [1-9]\d* of \d+ comparisons hold within 4 sem",  # not 0: members, not words, are counted
    ],
    "03_explorer": [
        r"preln-init: the (exact|approximate) law preln-init \(derived here\) " + VERDICT,
        r"p1-lemma-3\.2: P1's recursion .* with c = 1 \(a constant the paper does not state\) " + VERDICT,
        r"metric=var  scheme=pre  block=transformer  depth=8",
        r"4 samples are too few to judge a law by its \|z\|",  # the quick setting's 4 samples
    ],
    "04_lemma_report": [
        r"=== holds: \d+ rows",
        r"P1's (LNS )?recursion .* with c = 1 \(a constant the paper does not state\) " + VERDICT,
        r"\d+ rows of laws derived here: mean z",
        r"accuracy map: \d+ cells, \d+ curves of laws derived here: \d+ within noise",
    ],
    "05_regimes": [
        r"no norm, alpha=0\.5: exponential .* holds \(worst \|z\| [\d.]+ at layer \d+\)",
        r"P1 recursion with c=1: sigma\^2 at l=10000",
        r"exponential growth needs the aligned part to scale with the stream",
    ],
    "06_trained": [
        r"pre: held-out loss at step \d+: [\d.]+ \[(nan|[\d.]+), (nan|[\d.]+)\] \(log 256 = 5\.5452 is the "
        r"uniform guess\)",
        r"lns: more than half the blocks above a = sigma/L (from step \d+ on|at no logged step)",
        r"1\. Growth class after training: Pre-LN (polynomial|exponential) \(p = [\d.]+( \[[\d.]+, ([\d.]+|inf)\])?, q = ",
        r"- pruning drop, log\(deep half / shallow half\) \(claim < 0\): trained \S* ?" + VERDICT_OR_UNMEASURED
        + r"; step 0 \S* ?" + VERDICT_OR_UNMEASURED,
        r"- held-out loss, LNS minus Pre-LN \(claim < 0\): trained \S+ " + VERDICT_WORD,
        r"- weight decay: mean log\(L_lin/L\) vs reference \(claim > 0\): trained \S+ " + VERDICT_WORD,
    ],
    "07_sweeps": [
        r"\d+ points: \d+ done before, \d+ run now -> \S+summary\.csv",
        r"pre: growth exponent of var [\d.]+ \+- [\d.]+ at L=8, [\d.]+ \+- [\d.]+ at L=16",
        r"lns: growth exponent of var [\d.]+ \+- [\d.]+ at L=8, [\d.]+ \+- [\d.]+ at L=16",
    ],
    "08_studies": [
        r"results/atlas: \d+ distinct models \(\d+ ok, \d+ failed\), [\d.]+ h of one CPU thread \(training [\d.]+ h, "
        r"scores [\d.]+ h\)",
        r"atlas-400-steps/depth: 30 models in its report \(\d+ ok, \d+ failed, \d+ pending\), 3 seeds, [\d.]+ h of one "
        r"CPU thread",
        r"atlas/depth: \d+ models in its report \(\d+ ok, \d+ failed, \d+ pending\)",
        r"of \d+ trends with a claimed direction, the verdict is (?:(?:holds|violated|inconclusive|design cannot "
        r"resolve|too few axis values) for \d+(?:, | \(|$))+",
        # a trend that holds is named (the verdicts are members, not words), under its line
        r"along depth \([^)]*\), line \w+( \([^)]*\))?: holds p\d",
        r"p1-lns-prune, line tuned, log\(LNS / Pre-LN\), along depth \(atlas/depth, steps=\d+\)",
        r"p1-lns-prune, line fixed \(not drawn in the figures\), log\(LNS / Pre-LN\), along depth \(atlas/depth, "
        r"steps=\d+\)",
        r"phase diagram \(400 steps, atlas-400-steps\), Pre-LN at L=8: lr 0\.0003: \S+",
        r"atlas: \d+ laws per scheme \(([\w ]+, )*[\w ]+\)",
        r"atlas-400-steps: extrapolation test, pre, bridge law: last_log_error = \S+ \[\S+, \S+\] \(L=\d+, [23] models\)",
        r"atlas-400-steps: the law on its own data, pre, bridge law: last_log_error = \S+ \[\S+, \S+\] \(L=\d+, \d+ models\)",
        r"atlas-400-steps: extrapolation test, lns, growth law: last_log_error = \S+ \[\S+, \S+\] \(L=\d+, [23] models\)",
        r"atlas-400-steps: the law on its own data, pre, growth law: mean_abs_log_error = \S+ \[\S+, \S+\] \(L=\d+, \d+ models\)",
    ],
}


def test_every_notebook_is_known_and_has_its_answers_checked():
    assert [p.stem for p in NOTEBOOKS] == NAMES
    assert sorted(PRINTED) == NAMES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_saved_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4 and notebook.metadata.kernelspec.name == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: a cell has outputs"
    assert "widgets" not in notebook.metadata, f"{path.name}: saved with widget state"


@pytest.fixture(scope="module")
def kernel_metadata() -> dict:
    """The kernelspec and language info JupyterLab writes for ipykernel's ``python3`` kernel (language info read in
    a child process: importing ipykernel's kernel here would hand this process's widgets to a kernel it lacks)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    code = "import json; from ipykernel.ipkernel import IPythonKernel as K; print(json.dumps(K.language_info))"
    info = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     timeout=120).stdout)
    return {"kernelspec": {"display_name": spec.display_name, "language": spec.language, "name": "python3"},
            "language_info": info}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_saved_with_the_metadata_jupyterlab_writes(path, kernel_metadata):
    """Opening a notebook, JupyterLab writes the kernel's spec and language info into its metadata; a notebook
    saved with other values shows as modified at once. The Python version is that of the machines here."""
    metadata = nbformat.read(path, as_version=4).metadata
    assert metadata.kernelspec == kernel_metadata["kernelspec"], metadata.kernelspec
    info, expected = dict(metadata.language_info), dict(kernel_metadata["language_info"])
    assert re.fullmatch(r"3\.\d+\.\d+", info.pop("version", "")) and expected.pop("version"), info
    assert info == expected, info


@pytest.mark.parametrize("path", [NOTEBOOK_DIR / f"{name}.ipynb" for name in SIZE_SWITCH], ids=lambda p: p.stem)
def test_has_a_full_size_switch(path):
    """The first code cell starts with ``FULL = False`` and says what FULL = True costs (or that it has none)."""
    first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    head = first.source.splitlines()[0]
    assert re.match(r"FULL = False  # .*\((about|under) .*(minute|hour)s? on 2 cores\)$|FULL = False  # no effect",
                    head), head


def _widget_models(notebook, name: str) -> list:
    """The saved widget state of every model called ``name`` (e.g. 'OutputModel') in the executed notebook."""
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [model for model in state.get("state", {}).values() if model.get("model_name") == name]


def _printed_text(notebook) -> str:
    """Every stream and text output of the executed notebook, output widgets included."""
    texts = [o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type == "stream"]
    texts += [o["data"].get("text/plain", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type in ("execute_result", "display_data")]
    for model in _widget_models(notebook, "OutputModel"):
        for output in model.get("state", {}).get("outputs", []):
            texts.append(output.get("text", ""))
    return "\n".join(texts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executes_in_quick_mode(path, monkeypatch, shared_cache):
    monkeypatch.setenv("QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()
    errors = [f"{o.ename}: {o.evalue}" for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, errors
    text = _printed_text(notebook)
    for pattern in PRINTED[path.stem]:
        assert re.search(pattern, text), f"{path.name}: nothing printed matches {pattern!r}"
    for cell in notebook.cells:
        if cell.cell_type == "code" and re.search(FIGURE_CALL, cell.source):
            images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
            assert images, f"{path.name}: a figure cell shows no picture:\n{cell.source[:200]}"
    if path.stem == "04_lemma_report":  # "holds" of a curve is within 4 sem: no larger |z| is listed under it
        bounds = [float(z) for z in re.findall(r"within 4 sem at every layer \(last-layer \|z\| <= ([\d.]+)\)", text)]
        assert bounds and max(bounds) <= 4.0, bounds
    if path.stem == "08_studies":  # a missing value reads as blank, never as a literal nan
        assert not re.search(r"\bnan\b", text, re.I), re.search(r".{60}\bnan\b.{20}", text, re.I | re.S)
        # issue 52: "violated p1-lns-prune, p1-lns-prune" were two lines' trends under one label
        for listed in re.findall(r"(?:holds|violated) ([\w.-]+(?:, [\w.-]+)*)", text):
            claims = listed.split(", ")
            assert len(claims) == len(set(claims)), listed
    if path.stem == "03_explorer":  # the plot is in an image widget, the verdicts in an output widget
        pictures = [buffer["data"] for model in _widget_models(notebook, "ImageModel")
                    for buffer in model.get("buffers", []) if buffer.get("path") == ["value"]]
        assert len(pictures) == 1 and base64.b64decode(pictures[0]).startswith(b"\x89PNG"), len(pictures)
        assert not re.search(r"^ +$", text, re.M), "a line of spaces (a progress bar's remains) is shown"
