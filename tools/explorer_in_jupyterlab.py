"""Notebooks in a real JupyterLab: Run All of each, then notebook 03's explorer pressed, every plot checked.

Not a test (CI has no browser): run it by hand after changing a notebook, the explorer or a figure, on a
machine with Chromium (Debian: ``apt-get install chromium``) and Playwright (``pip install playwright``; no
browser download needed, it drives the given Chromium)::

    python tools/explorer_in_jupyterlab.py --presses 50                     # 03: the default setting
    python tools/explorer_in_jupyterlab.py --presses 50 --setting overflow  # none/linear, L=512, input std 10
    python tools/explorer_in_jupyterlab.py --presses 5 --setting depth-1     # one block: every law a marker
    python tools/explorer_in_jupyterlab.py --presses 5 --setting two-samples # too few samples: the note
    python tools/explorer_in_jupyterlab.py --presses 50 --restart           # after a kernel restart
    python tools/explorer_in_jupyterlab.py --widgets --presses 0            # 03: every control changed in turn
    python tools/explorer_in_jupyterlab.py --notebooks all --out out/lab    # Run All of every notebook, timed

It copies ``notebooks/`` into a scratch directory, starts JupyterLab there on 127.0.0.1 (a free port, a
fresh token, autosave off, every cell rendered, the app exposed to the page, the kernel importing this
checkout's packages and a fresh simulator cache unless ``--cache`` names one) and opens each notebook in
headless Chromium.

``--notebooks NAME...`` (or ``all``): Run All of each, timed from the command to the last cell done (the
first run of a fresh cache: what a new user waits; the load average is recorded beside it), then every
output read back: error and stderr outputs, each picture's pixel size against its shown size, and a
screenshot of every cell with a picture (``NAME/cellNN.png``). A picture shown at another size than its
own is shrunk or stretched (its text with it).

Notebook 03 (the default): whether it shows as modified once its kernel is ready; then Run All,
optionally a kernel restart and Run All again, optionally another setting (set from the kernel,
:data:`SETTINGS`); with ``--widgets`` every control changed in the page as a user would (a menu choice,
a slider's arrow key, a typed seed, *new seed*) and *run* pressed after each, the kernel asked what the
plot's title and the controls hold: a control must change the plot and the title must name its new
value, and a disabled control's reason must be in the page's text (a dropdown with a description shows
no tooltip); then the presses of *run*, one after another, each waited for. After each press it reads
the explorer's ``<img>`` back from the page and calls the plot whole when the PNG is over 15 kB, at least
500 x 300 pixels, with drawn and coloured pixels over the plot area (a blank plot is about 2 kB and
white), and records the size it is shown at. It also counts the PNG
``display_data`` messages the kernel sends (each is a figure drawn by someone else's flush: the
explorer sends none), sees whether the run button was disabled during the run, which stages the status
line named and whether the text below the plot is clean (no warning, no line of spaces left by the
bar). Per press one JSON line on stdout, then a summary; ``--out`` gets ``results.json``, every image
that was not whole and screenshots. Exit code 0 when every plot was whole, every control did what it
names (or said why not), no notebook failed and 03 opened unmodified, else 1. JupyterLab and Chromium
are stopped at the end.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's paper_figs (analyse), as the kernels import it (start_jupyterlab)
NOTEBOOKS = sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))
# Settings of the explorer the presses of run may start from, set from the kernel: the code that sets each.
SETTINGS = {"overflow": ("explorer.controls['scheme'].value = 'none'; explorer.controls['block'].value = 'linear'; "
                         "explorer.controls['depth'].value = 512; explorer.controls['input_std'].value = 10.0"),
            "depth-1": "explorer.controls['depth'].value = 1",
            "two-samples": "explorer.controls['samples'].value = 2"}
# Each control of the explorer as a user changes it: (its label, how, the value or key, the title word it gives).
CONTROLS = (("block", "select", "moe", "block=moe"), ("scheme", "select", "lns", "scheme=lns"),
            ("depth L", "key", "ArrowRight", "depth=33"), ("width d", "select", "32", "width=32"),
            ("tokens T", "select", "8", "tokens=8"), ("GQA group", "select", "2", "kv_heads=2"),
            ("mask rho", "key", "ArrowLeft", "mask_density=0.95"), ("MoE top-k", "key", "ArrowRight", "top_k=3"),
            ("input std", "key", "ArrowRight", "input_std=1.2589"),
            ("alignment a", "key", "ArrowRight", "alignment=0.1"),
            ("metric", "select", "angular", "metric=angular"), ("samples S", "key", "ArrowRight", "samples=17"),
            ("seed", "type", "5", "seed=5"), ("new seed", "click", "", "seed=6"),
            ("block", "select", "mlp", "block=mlp"))
ASK = ("import json; print(json.dumps({'title': explorer.figure.axes[0].get_title() if explorer.figure else '', "
       "'disabled': {n: c.disabled for n, c in explorer.controls.items()}, "
       "'tooltips': {n: c.tooltip or '' for n, c in explorer.controls.items()}}))")
PANEL = "window.jupyterapp.shell.currentWidget"
KERNEL_IDLE = (f"() => {{ const w = window.jupyterapp && {PANEL}; const s = w && w.sessionContext && "
               "w.sessionContext.session; return s && s.kernel && s.kernel.status === 'idle'; }")
CELL = ".jp-Cell:has(.widget-button)"  # the explorer's cell
STATUS = ".widget-hbox:has(.widget-button) .widget-html-content"  # the status line, beside the buttons
PANEL_CSS = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook shown
IMAGES = f"""async () => {{
  const out = [];
  for (const img of {PANEL}.node.querySelectorAll('{CELL} img')) {{
    const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let text = '';
    for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    out.push(btoa(text));
  }}
  return out;
}}"""
ASK_KERNEL = f"""async code => {{
  const future = {PANEL}.sessionContext.session.kernel.requestExecute({{code, store_history: false}});
  let out = '';
  future.onIOPub = msg => {{ if (msg.header.msg_type === 'stream') out += msg.content.text; }};
  await future.done;
  return out;
}}"""
STATE = f"""() => {{
  const cell = {PANEL}.node.querySelector('{CELL}');
  const button = Array.from(cell.querySelectorAll('button')).find(b => b.textContent.trim() === 'run');
  const status = cell.querySelector('{STATUS}');
  const output = cell.querySelector('.widget-output');
  return {{status: status ? status.textContent : '', disabled: button.disabled, text: output ? output.innerText : ''}};
}}"""

RUN_ALL_DONE = f"""() => {{
  const w = {PANEL}; const s = w && w.sessionContext && w.sessionContext.session;
  if (!s || !s.kernel || s.kernel.status !== 'idle') return false;
  return !Array.from(w.node.querySelectorAll('.jp-InputPrompt')).some(p => p.textContent.includes('*'));
}}"""
OUTPUTS = f"""() => {{
  const cells = Array.from({PANEL}.node.querySelectorAll('.jp-CodeCell'));
  return cells.map((cell, index) => ({{
    index,
    errors: Array.from(cell.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
      .map(o => o.innerText.slice(0, 400)),
    images: Array.from(cell.querySelectorAll('.jp-OutputArea-output img')).map(img => ({{
      natural: [img.naturalWidth, img.naturalHeight], shown: [img.clientWidth, img.clientHeight]}})),
  }}));
}}"""

def analyse(png: bytes) -> dict:
    """Size and drawn content of one plot (:func:`paper_figs.layout.ink`); ``whole`` as the module docstring says."""
    from paper_figs.layout import ink

    seen = ink(png)
    return {**seen, "whole": seen["bytes"] > 15000 and seen["width"] >= 500 and seen["height"] >= 300
            and seen["drawn"] > 0.02 and seen["coloured"] > 0.005}


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_jupyterlab(root: Path, scratch: Path, log, cache: Path) -> tuple[subprocess.Popen, str, str]:
    """JupyterLab on 127.0.0.1 serving ``root``, autosave off, its kernels importing this checkout's packages
    with the simulator cache ``cache``: the process, its base URL and its token."""
    for extension, plugin, values in (("docmanager-extension", "plugin", '{"autosave": false}'),
                                      ("notebook-extension", "tracker", '{"windowingMode": "none"}'),  # every cell
                                      ("apputils-extension", "notification", '{"fetchNews": "false"}')):
        settings = scratch / "settings" / "@jupyterlab" / extension
        settings.mkdir(parents=True, exist_ok=True)
        (settings / f"{plugin}.jupyterlab-settings").write_text(values)
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(scratch / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces"), "DEPTH_WORKBENCH_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip", "127.0.0.1",
                               "--port", str(port), f"--IdentityProvider.token={token}",
                               f"--ServerApp.root_dir={root}", "--expose-app-in-browser"],
                              env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return server, base, token
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"JupyterLab did not start; see {log.name}")


def press_once(page, timeout: float) -> dict:
    """Click run, wait until the status line says done again; what the run showed."""
    page.locator(f"{CELL} button", has_text=re.compile(r"^\s*run\s*$")).first.click()
    started, disabled, stages = time.perf_counter(), False, []
    while time.perf_counter() - started < timeout:
        state = page.evaluate(STATE)
        disabled |= bool(state["disabled"])
        if "done in" not in state["status"]:
            word = state["status"].split("...")[0].strip()[:60]
            if not stages or stages[-1] != word:
                stages.append(word)
        elif stages or time.perf_counter() - started > 3:
            break
        time.sleep(0.05)
    return {"wall_s": round(time.perf_counter() - started, 2), "disabled_during_run": disabled, "stages": stages}


def start_chromium(executable: str, log):
    """Headless Chromium with a DevTools port (Playwright connects over CDP; it downloads no browser)."""
    port = free_port()
    browser = subprocess.Popen([executable, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                "--no-first-run", f"--remote-debugging-port={port}", "about:blank"],
                               stdout=log, stderr=log)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/version", timeout=2)
            return browser, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    browser.terminate()
    raise SystemExit(f"Chromium did not start; see {log.name}")


def open_notebook(context, base: str, token: str, name: str, watch=None):
    """A page showing notebook ``name`` with its kernel idle; whether it shows as modified once connected.
    ``watch``: a :class:`_Figures` counting the kernel's figures from the start."""
    page = context.new_page()
    if watch is not None:
        page.on("websocket", watch.attach)
    page.goto(f"{base}/lab/tree/{name}.ipynb?reset&token={token}")  # reset: only this notebook open
    page.wait_for_function(KERNEL_IDLE, timeout=180_000)
    time.sleep(5)  # JupyterLab writes the kernel's metadata once it is connected
    return page, bool(page.evaluate(f"() => {PANEL}.context.model.dirty"))


def run_all(page, timeout_s: float = 3600) -> float:
    """Run All and wait until no cell is running and the kernel is idle; the seconds it took."""
    started = time.perf_counter()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    time.sleep(2)
    page.wait_for_function(RUN_ALL_DONE, timeout=timeout_s * 1000, polling=500)
    return time.perf_counter() - started


def check_notebook(context, base: str, token: str, name: str, out: Path) -> dict:
    """Run All of one notebook: its time, its error and stderr outputs, its pictures' sizes, screenshots."""
    page, modified = open_notebook(context, base, token, name)
    wall = run_all(page)
    cells = page.evaluate(OUTPUTS)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        if cell["images"]:
            locator = page.locator(f"{PANEL_CSS} .jp-CodeCell").nth(cell["index"])
            locator.scroll_into_view_if_needed()
            locator.screenshot(path=str(folder / f"cell{cell['index']:02d}.png"))
    images = [image for cell in cells for image in cell["images"]]
    row = {"notebook": name, "wall_s": round(wall, 1), "load_1min": round(os.getloadavg()[0], 2),
           "modified_on_open": modified, "errors": [e for cell in cells for e in cell["errors"]],
           "pictures": len(images), "resized": [i for i in images if i["natural"][0] != i["shown"][0]]}
    page.evaluate(f"async () => {{ await {PANEL}.sessionContext.shutdown(); }}")  # its kernel ends with it
    page.close()
    return row


def press_every_control(page, out: Path) -> list[dict]:
    """Change each explorer control in the page as a user would (:data:`CONTROLS`), press run after each; what
    the kernel says the plot and the controls hold. A control does what it names when the plot changed and
    its title has the new value; a disabled one must have a tooltip."""
    rows, before = [], next(iter(base64.b64decode(t) for t in page.evaluate(IMAGES)), None)  # Run All's plot
    for label, how, value, word in CONTROLS:
        box = page.locator(f"{CELL} .widget-inline-hbox", has=page.locator(f"label:text-is('{label}')")).first
        state = json.loads(page.evaluate(ASK_KERNEL, ASK) or "{}")
        if how == "click":
            page.locator(f"{CELL} button", has_text=label).first.click()
        elif how == "select":
            box.locator("select").select_option(label=value)
        elif how == "key":
            box.locator(".noUi-handle").first.focus()
            page.keyboard.press(value)
        else:
            box.locator("input").fill(value)
            box.locator("input").press("Enter")
        time.sleep(1.0)
        run = press_once(page, 300) if how != "click" else _wait_done(page)
        after = json.loads(page.evaluate(ASK_KERNEL, ASK) or "{}")
        images = [base64.b64decode(text) for text in page.evaluate(IMAGES)]
        changed = before is not None and bool(images) and images[0] != before
        before = images[0] if images else before
        shown = page.locator(CELL).first.inner_text()  # what the page shows, as a user reads it
        reasons = {n: t.removeprefix("no effect: ") for n, t in after.get("tooltips", {}).items()
                   if after.get("disabled", {}).get(n) and t}
        rows.append({"control": label, "how": how, "value": value, "title_has": word in after.get("title", ""),
                     "plot_changed": changed, "wall_s": run["wall_s"],
                     "reasons_shown": all(reason in shown for reason in reasons.values()),
                     "disabled_after": {n: d for n, d in after.get("disabled", {}).items() if d},
                     "tooltips": {n: t for n, t in after.get("tooltips", {}).items() if t},
                     "title": after.get("title", "").replace("\n", "  ")})
        print(json.dumps(rows[-1]), flush=True)
        page.locator(CELL).first.screenshot(path=str(out / f"control_{len(rows):02d}_{label.replace(' ', '_')}.png"))
        if state.get("disabled"):
            rows[-1]["disabled_before"] = {n: d for n, d in state["disabled"].items() if d}
    return rows


def _wait_done(page) -> dict:
    started = time.perf_counter()
    time.sleep(0.5)
    page.wait_for_function(f"() => /done in/.test(({PANEL}.node.querySelector('{CELL} {STATUS}') || "
                           "{}).textContent || '')", timeout=300_000)
    return {"wall_s": round(time.perf_counter() - started, 2)}


def check_explorer(context, base, token, args, out: Path, watch) -> dict:
    """Notebook 03: Run All, the controls (``--widgets``), then the presses of run (module docstring)."""
    page, modified_on_open = open_notebook(context, base, token, "03_explorer", watch)
    wall = run_all(page)
    if args.restart:
        page.evaluate(f"() => {PANEL}.sessionContext.session.kernel.restart()")
        page.wait_for_function(KERNEL_IDLE, timeout=180_000)
        run_all(page)
    controls = press_every_control(page, out) if args.widgets else []
    if args.setting in SETTINGS:
        page.evaluate(f"async code => {{ await {PANEL}.sessionContext.session.kernel"
                      ".requestExecute({code, silent: true}).done; }", SETTINGS[args.setting])
        time.sleep(2)
    rows = []
    for press in range(args.presses):
        before = watch.count
        row = {"press": press, **press_once(page, args.run_timeout)}
        time.sleep(0.7)  # a stray figure from someone else's flush would arrive by now
        images = [base64.b64decode(text) for text in page.evaluate(IMAGES)]
        row["images"] = [analyse(png) for png in images]
        row["whole"] = len(images) == 1 and row["images"][0]["whole"]
        row["shown"] = page.evaluate(f"() => Array.from(document.querySelectorAll('{CELL} img'))"
                                     ".map(i => [i.naturalWidth, i.clientWidth])")
        row["foreign_png_messages"] = watch.count - before
        text = page.evaluate(STATE)["text"]
        row["output_clean"] = "Warning" not in text and not re.search(r"^ +$", text, re.M)
        if not row["whole"]:
            for k, png in enumerate(images):
                (out / f"press{press:02d}_{k}.png").write_bytes(png)
        rows.append(row)
        print(json.dumps(row), flush=True)
    cell = page.locator(CELL).first
    cell.scroll_into_view_if_needed()
    cell.screenshot(path=str(out / "explorer.png"))
    bad_controls = [c["control"] for c in controls
                    if not (c["plot_changed"] and c["title_has"] and c["reasons_shown"])]
    return {"run_all_s": round(wall, 1), "presses": len(rows), "whole": sum(r["whole"] for r in rows),
            "modified_on_open": modified_on_open, "foreign_png_messages": sum(r["foreign_png_messages"] for r in rows),
            "button_disabled_in_every_run": all(r["disabled_during_run"] for r in rows),
            "output_clean_in_every_run": all(r["output_clean"] for r in rows),
            "mean_wall_s": round(sum(r["wall_s"] for r in rows) / max(len(rows), 1), 2),
            "controls": controls, "controls_not_doing_what_they_name": bad_controls, "press_rows": rows}


class _Figures:
    """Counts PNG ``display_data`` messages on the page's websockets (figures drawn by someone else's flush)."""

    def __init__(self):
        self.count = 0

    def attach(self, socket_):
        def frame(payload):
            data = payload if isinstance(payload, (bytes, bytearray)) else payload.encode()
            self.count += b'"display_data"' in data and b"image/png" in data
        socket_.on("framereceived", frame)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=50)
    parser.add_argument("--setting", choices=("default", *SETTINGS), default="default")
    parser.add_argument("--restart", action="store_true", help="restart the kernel after Run All, then Run All again")
    parser.add_argument("--widgets", action="store_true", help="03: change every control in turn, run after each")
    parser.add_argument("--notebooks", nargs="*", default=None, metavar="NAME",
                        help="Run All of these notebooks (names, numbers such as 01, or 'all') instead of 03's presses")
    parser.add_argument("--cache", default=None, help="simulator cache of the kernels (default: a fresh one)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--out", default=None, help="directory for results.json, images and screenshots")
    parser.add_argument("--run-timeout", type=float, default=300, help="seconds one run may take")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    scratch = Path(tempfile.mkdtemp(prefix="notebooks-check-"))
    out = Path(args.out) if args.out else scratch / "out"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "notebooks", scratch / "root", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    log = open(scratch / "server.log", "w")
    cache = Path(args.cache) if args.cache else scratch / "cache"
    server, base, token = start_jupyterlab(scratch / "root", scratch, log, cache)
    chromium, endpoint = start_chromium(args.chromium, log)
    names = None if args.notebooks is None else [n for n in NOTEBOOKS if "all" in args.notebooks
                                                   or any(n == w or n.startswith(f"{w}_") for w in args.notebooks)]
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(endpoint)
            # 1400 px wide (a notebook's output area then shows 953 px); tall, so a cell's screenshot holds its output
            context = browser.new_context(viewport={"width": 1400, "height": 1100 if names is None else 2400})
            if names is not None:
                rows = []
                for name in names:
                    rows.append(check_notebook(context, base, token, name, out))
                    print(json.dumps(rows[-1]), flush=True)
                summary = {"notebooks": rows, "failed": [r["notebook"] for r in rows if r["errors"]], "out": str(out)}
                ok = not summary["failed"]
            else:
                summary = {"setting": args.setting, "restart": args.restart, "widgets": args.widgets,
                           **check_explorer(context, base, token, args, out, _Figures()), "out": str(out)}
                ok = summary["whole"] == args.presses and not summary["modified_on_open"] \
                    and not summary["controls_not_doing_what_they_name"]
            browser.close()
    finally:
        chromium.terminate()
        server.terminate()
        for process in (chromium, server):
            process.wait(timeout=60)
        log.close()
    (out / "results.json").write_text(json.dumps({"summary": summary}, indent=1))
    print("summary:", json.dumps({k: v for k, v in summary.items() if k not in ("press_rows", "controls")}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
