"""A manual check of notebook 03's explorer in a real JupyterLab: press *run* many times, check every plot it shows.

Not a test (CI has no browser): run it by hand after changing the explorer or the notebook,
on a machine with Chromium (Debian: ``apt-get install chromium``) and Playwright
(``pip install playwright``; no browser download needed, it drives the given Chromium)::

    python tools/explorer_in_jupyterlab.py --presses 50                     # the default setting
    python tools/explorer_in_jupyterlab.py --presses 50 --setting overflow  # none/linear, L=512, input std 10
    python tools/explorer_in_jupyterlab.py --presses 50 --restart           # after a kernel restart

It copies ``notebooks/03_explorer.ipynb`` into a scratch directory, starts JupyterLab there on
127.0.0.1 (a free port, a fresh token, autosave off, the app exposed to the page), opens the
notebook in headless Chromium and records whether it shows as modified once its kernel is
ready; then Run All, optionally a kernel restart and Run All again, optionally the overflow
setting (set from the kernel), and the presses, one after another, each waited for. After each
press it reads the explorer's ``<img>`` back from the page and calls the plot whole when the
PNG is over 15 kB, at least 500 x 300 pixels, with drawn and coloured pixels over the plot area
(a blank plot is about 2 kB and white). It also counts the PNG ``display_data`` messages the
kernel sends (each is a figure drawn by someone else's flush: the explorer sends none), sees
whether the run button was disabled during the run, which stages the status line named and
whether the text below the plot is clean (no warning, no line of spaces left by the bar).
Per press one JSON line on stdout, then a summary; ``--out`` gets ``results.json``, every
image that was not whole and a screenshot of the explorer. Exit code 0 when every plot was
whole and the notebook opened unmodified, else 1. JupyterLab and Chromium are stopped at the end.
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
OVERFLOW = ("explorer.controls['scheme'].value = 'none'; explorer.controls['block'].value = 'linear'; "
            "explorer.controls['depth'].value = 512; explorer.controls['input_std'].value = 10.0")
PANEL = "window.jupyterapp.shell.currentWidget"
KERNEL_IDLE = (f"() => {{ const w = window.jupyterapp && {PANEL}; const s = w && w.sessionContext && "
               "w.sessionContext.session; return s && s.kernel && s.kernel.status === 'idle'; }")
CELL = ".jp-Cell:has(.widget-button)"  # the explorer's cell
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
STATE = f"""() => {{
  const cell = {PANEL}.node.querySelector('{CELL}');
  const button = Array.from(cell.querySelectorAll('button')).find(b => b.textContent.trim() === 'run');
  const status = cell.querySelector('.widget-html-content');
  const output = cell.querySelector('.widget-output');
  return {{status: status ? status.textContent : '', disabled: button.disabled, text: output ? output.innerText : ''}};
}}"""


def analyse(png: bytes) -> dict:
    """Size and drawn content of one plot (:func:`paper_figs.layout.ink`); ``whole`` as the module docstring says."""
    from paper_figs.layout import ink

    seen = ink(png)
    return {**seen, "whole": seen["bytes"] > 15000 and seen["width"] >= 500 and seen["height"] >= 300
            and seen["drawn"] > 0.02 and seen["coloured"] > 0.005}


def start_jupyterlab(root: Path, scratch: Path, log) -> tuple[subprocess.Popen, str, str]:
    """JupyterLab on 127.0.0.1 serving ``root``, autosave off: the process, its base URL and its token."""
    settings = scratch / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"autosave": false}')
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(scratch / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces")}
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=50)
    parser.add_argument("--setting", choices=("default", "overflow"), default="default")
    parser.add_argument("--restart", action="store_true", help="restart the kernel after Run All, then Run All again")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--out", default=None, help="directory for results.json, images and a screenshot")
    parser.add_argument("--run-timeout", type=float, default=300, help="seconds one run may take")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    scratch = Path(tempfile.mkdtemp(prefix="explorer-check-"))
    out = Path(args.out) if args.out else scratch / "out"
    out.mkdir(parents=True, exist_ok=True)
    (scratch / "root").mkdir()
    shutil.copy(REPO / "notebooks" / "03_explorer.ipynb", scratch / "root" / "03_explorer.ipynb")
    log = open(scratch / "server.log", "w")
    server, base, token = start_jupyterlab(scratch / "root", scratch, log)
    foreign_figures = [0]

    def watch(socket_):
        def frame(payload):
            data = payload if isinstance(payload, (bytes, bytearray)) else payload.encode()
            foreign_figures[0] += b'"display_data"' in data and b"image/png" in data
        socket_.on("framereceived", frame)

    rows = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium,
                                                 args=["--no-sandbox", "--disable-gpu", "--headless=new"])
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.on("websocket", watch)
            page.goto(f"{base}/lab/tree/03_explorer.ipynb?token={token}")
            page.wait_for_function(KERNEL_IDLE, timeout=180_000)
            time.sleep(5)  # JupyterLab writes the kernel's metadata once it is connected
            modified_on_open = page.evaluate(f"() => {PANEL}.context.model.dirty")

            def run_all():
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                page.wait_for_function(f"() => {{ const s = {PANEL}.node.querySelector('{CELL} .widget-html-content');"
                                       " return s && /done in/.test(s.textContent); }", timeout=600_000)
                page.wait_for_function(KERNEL_IDLE, timeout=120_000)

            run_all()
            if args.restart:
                page.evaluate(f"() => {PANEL}.sessionContext.session.kernel.restart()")
                page.wait_for_function(KERNEL_IDLE, timeout=180_000)
                run_all()
            if args.setting == "overflow":
                page.evaluate(f"async code => {{ await {PANEL}.sessionContext.session.kernel"
                              ".requestExecute({code, silent: true}).done; }", OVERFLOW)
                time.sleep(2)
            for press in range(args.presses):
                before = foreign_figures[0]
                row = {"press": press, **press_once(page, args.run_timeout)}
                time.sleep(0.7)  # a stray figure from someone else's flush would arrive by now
                images = [base64.b64decode(text) for text in page.evaluate(IMAGES)]
                row["images"] = [analyse(png) for png in images]
                row["whole"] = len(images) == 1 and row["images"][0]["whole"]
                row["foreign_png_messages"] = foreign_figures[0] - before
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
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    summary = {"setting": args.setting, "restart": args.restart, "presses": len(rows),
               "whole": sum(r["whole"] for r in rows), "modified_on_open": modified_on_open,
               "foreign_png_messages": sum(r["foreign_png_messages"] for r in rows),
               "button_disabled_in_every_run": all(r["disabled_during_run"] for r in rows),
               "output_clean_in_every_run": all(r["output_clean"] for r in rows),
               "mean_wall_s": round(sum(r["wall_s"] for r in rows) / max(len(rows), 1), 2), "out": str(out)}
    (out / "results.json").write_text(json.dumps({"summary": summary, "presses": rows}, indent=1))
    print("summary:", json.dumps(summary))
    return 0 if summary["whole"] == args.presses and not modified_on_open else 1


if __name__ == "__main__":
    sys.exit(main())
