"""Shared helpers for the notebook-layer tests (import as ``from tests.notebook.support import ...``):
scripted agents with an approval tool, a real kernel session driven through nbclient, widget-state
walking, the headless click message, and a JupyterLab server for the browser test."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import loom_nb as loom
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest
from loom_nb.testing import FakeClock, SequentialIds
from tests.agent.support import tidy_tools

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
#: Chromium's flags for the browser tests (headless, no network side traffic).
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def make_runtime() -> loom.Runtime:
    """An in-memory runtime on a fake clock with sequential ids and its own flow registry."""
    return loom.Runtime(InMemoryJournal(), clock=FakeClock(tick=0.01), ids=SequentialIds(), flows=FlowRegistry())


def last_tool_text(request: ModelRequest) -> str:
    """The text of the last tool message the model was sent ("" if none)."""
    tools = [m for m in request.messages if m.role == "tool"]
    return tools[-1].text if tools else ""


class TidyAgent:
    """A scripted agent that searches, asks to delete a file (an approval gate), then answers.

    Turn 0 calls ``search``; turn 1 calls ``delete_file`` (needs approval) with ``paths`` (one call
    each, opened as gates together); turn 2 answers "Done. I removed the stale file." or, if the
    last tool result is an error (a refusal), "Understood: <that tool message>".

    Attributes:
        agent: The ``loom.Agent``.
        model: Its ``ScriptedModel`` (``model.history`` holds every request).
        deleted: Paths the ``delete_file`` tool really deleted.
    """

    def __init__(
        self, name: str = "tidy", *, paths: tuple[str, ...] = ("/tmp/x/stale.log",), delta_delay: float = 0.0
    ) -> None:
        self.deleted: list[str] = []
        search, delete_file = tidy_tools(self.deleted)

        def respond(request: ModelRequest) -> loom.ModelResponse:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            if turn == 0:
                return loom.ModelResponse.tool_calls([("search", {"query": "stale"})], text="Let me look.")
            if turn == 1:
                return loom.ModelResponse.tool_calls([("delete_file", {"path": p}) for p in paths], text="Deleting it.")
            last = [m for m in request.messages if m.role == "tool"][-1]
            if last.is_error:
                return loom.ModelResponse.text(f"Understood: {last.text}")
            return loom.ModelResponse.text("Done. I removed the stale file.")

        self.model = loom.ScriptedModel(respond, delta_delay=delta_delay)
        self.agent = loom.Agent(model=self.model, tools=[search, delete_file], system="You tidy folders.", name=name)


# -- a real kernel through nbclient --------------------------------------------------------------
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class KernelSession:
    """Execute cells one at a time in a real kernel (nbclient), collecting outputs and widget state.

    Use as ``with KernelSession(cwd) as k: outputs = k.run("1 + 1")``.
    """

    def __init__(self, cwd: Path, *, timeout: int = 120) -> None:
        import nbformat
        from nbclient import NotebookClient

        self.nb = nbformat.v4.new_notebook()
        self.client = NotebookClient(
            self.nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(cwd)}}
        )
        self._cm: Any = None

    def __enter__(self) -> KernelSession:
        self._cm = self.client.setup_kernel()
        self._cm.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)

    def run(self, source: str, *, allow_errors: bool = False) -> list[Any]:
        """Execute one cell; returns its outputs (raises on an error unless ``allow_errors``)."""
        import nbformat

        cell = nbformat.v4.new_code_cell(source)
        self.nb.cells.append(cell)
        if allow_errors:
            cell.metadata["tags"] = ["raises-exception"]
        self.client.execute_cell(cell, len(self.nb.cells) - 1)
        return list(cell.outputs)

    def stdout(self, source: str) -> str:
        """Execute one cell and return its stdout."""
        return "".join(
            o.get("text", "")
            for o in self.run(source)
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )

    def click(self, model_id: str) -> None:
        """Send the comm message a browser sends when a Button is clicked (no reply comes)."""
        kc = self.client.kc
        msg = kc.session.msg(
            "comm_msg", {"comm_id": model_id, "data": {"method": "custom", "content": {"event": "click"}}}
        )
        kc.shell_channel.send(msg)

    def set_value(self, model_id: str, value: str) -> None:
        """Send the comm message a browser sends when a reader types ``value`` into a text field."""
        kc = self.client.kc
        content = {"comm_id": model_id, "data": {"method": "update", "state": {"value": value}, "buffer_paths": []}}
        kc.shell_channel.send(kc.session.msg("comm_msg", content))

    def run_with_click(self, source: str, model_id: str, *, after: float) -> list[Any]:
        """Execute one cell and click Button ``model_id`` ``after`` seconds into it, as a reader does on a
        card while the cell waits (the click goes through a second connection to the kernel, like the
        browser's own)."""
        import threading

        from jupyter_client.blocking import BlockingKernelClient

        other = BlockingKernelClient()
        other.load_connection_info(self.client.km.get_connection_info())
        other.start_channels()
        content = {"comm_id": model_id, "data": {"method": "custom", "content": {"event": "click"}}}
        timer = threading.Timer(after, lambda: other.shell_channel.send(other.session.msg("comm_msg", content)))
        timer.start()
        try:
            return self.run(source)
        finally:
            timer.cancel()
            other.stop_channels()

    def restart(self) -> None:
        """Restart the kernel (a new process; nothing of the old one survives)."""
        from jupyter_core.utils import run_sync

        run_sync(self.client.km.restart_kernel)(now=True)
        run_sync(self.client.kc.wait_for_ready)(timeout=60)
        self.client.widget_state.clear()

    def widget_models(self, outputs: list[Any]) -> list[str]:
        """Model ids of the widgets displayed in ``outputs``."""
        return [
            o["data"][WIDGET_MIME]["model_id"]
            for o in outputs
            if o.get("output_type") in ("display_data", "execute_result") and WIDGET_MIME in o.get("data", {})
        ]

    def find_buttons(self, root: str, css_class: str) -> list[str]:
        """Model ids of the enabled Buttons with ``css_class`` under widget ``root`` (walking the
        widget state the kernel sent, children first-to-last)."""
        found: list[str] = []
        state = self.client.widget_state

        def walk(model_id: str) -> None:
            s = state.get(model_id, {})
            if (
                s.get("_model_name") == "ButtonModel"
                and css_class in s.get("_dom_classes", ())
                and not s.get("disabled")
            ):
                found.append(model_id)
            for child in s.get("children", ()):
                walk(str(child).removeprefix("IPY_MODEL_"))

        walk(root)
        return found


def kernel_button_ids(session: KernelSession, css_class: str, widget: str = "Button") -> list[str]:
    """Model ids of the enabled Buttons (or other ``widget`` class of ipywidgets: ``"Text"``) with
    ``css_class`` that live in the kernel (asked from the kernel itself: for widgets created by a
    background task after their cell finished)."""
    code = (
        f"from ipywidgets import {widget} as _B\n"
        "from ipywidgets.widgets.widget import _instances as _I\n"
        f"print(' '.join(w.model_id for w in list(_I.values()) if isinstance(w, _B) and {css_class!r} in "
        "w._dom_classes and not w.disabled))\n"
    )
    return session.stdout(code).split()


AGENT_CELL = '''
import loom_nb as loom

@loom.tool
def search(query: str) -> list[str]:
    """Search the files."""
    return [f"/tmp/x/{query}.log"]

deleted = []

@loom.tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"

def respond(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return loom.ModelResponse.tool_calls([("search", {"query": "stale"})], text="Let me look.")
    if turn == 1:
        return loom.ModelResponse.tool_calls([("delete_file", {"path": "/tmp/x/stale.log"})],
                                             text="Deleting it.")
    last = [m for m in request.messages if m.role == "tool"][-1]
    if last.is_error:
        return loom.ModelResponse.text(f"Understood: {last.text}")
    return loom.ModelResponse.text("Done. I removed the stale file.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[search, delete_file], system="You tidy folders.",
                   name="tidy")
'''

REPORT_CELL = """
import json as _json
_r = await run
_ev = [e for e in run.runtime.journal.read(run.id) if e.kind == "gate_resolved"]
print(_json.dumps({"status": run.status, "output": _r.output, "deleted": deleted,
                   "resolved": [e.data["payload"] for e in _ev]}))
"""


def last_json(text: str) -> Any:
    """The last line of ``text`` that parses as JSON."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise AssertionError(f"no JSON line in {text!r}")


# -- JupyterLab ---------------------------------------------------------------------------------
def free_port() -> int:
    """A free TCP port on localhost."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab(NamedTuple):
    """A running JupyterLab (the ``lab`` fixture): its URL, its root folder and its theme
    (``light`` or ``dark``)."""

    url: str
    root: Path
    theme: str


#: JupyterLab's name of each theme the browser tests run in.
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


@contextmanager
def jupyter_lab(root: Path, scratch: Path, theme: str = "light") -> Iterator[str]:
    """Run JupyterLab on ``root`` (no token, fresh settings and workspaces, the ``theme`` of
    ``THEMES`` set in its settings); yields its base URL."""
    port = free_port()
    settings = scratch / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": THEMES[theme]}))
    (scratch / "workspaces").mkdir()
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(scratch / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(scratch / "rt"),
    )
    jupyter = str(Path(sys.executable).parent / "jupyter")
    log = open(scratch / "lab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            jupyter,
            "lab",
            "--no-browser",
            f"--port={port}",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--allow-root",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.ip=127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (scratch / "lab.log").read_text()) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def chromium_available() -> bool:
    """True when Debian's chromium is installed where the browser test expects it."""
    return Path(CHROMIUM).exists() or shutil.which("chromium") == CHROMIUM


#: The marks of every browser test module (``pytestmark = BROWSER_MARKS``): slow, browser, and
#: skipped where chromium is missing.
BROWSER_MARKS = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason=f"{CHROMIUM} is missing (make browser installs it)"),
]


def write_notebook(folder: Path, name: str, cells: list[str]) -> None:
    """Write a notebook of code ``cells`` (Python 3 kernel) to ``folder / name``."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / name)


def run_cell_with_toolbar(page: Any, index: int) -> None:
    """Select code cell ``index`` with a click, then click the toolbar's Run button."""
    page.locator(".jp-NotebookPanel .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
    page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:run-cell-and-select-next']").click()


def open_and_run_all(page: Any, url: str, theme: str | None = None) -> None:
    """Open a notebook in JupyterLab (checking it shows in ``theme``, ``light`` or ``dark``, when
    given), wait for an idle kernel, then Run > Run All Cells (mouse clicks)."""
    page.goto(url)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    if theme is not None:
        light = "true" if theme == "light" else "false"
        page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached", timeout=30_000)
    page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=60_000)
    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Run')")
    page.click("#jp-mainmenu-run li[data-command='runmenu:run-all']")


def folded_away(view: Any, card: Any) -> bool:
    """Whether ``card`` left ``view`` for good: out of its widget tree, and closed with every model
    it held (its layout and style models too), so a saved notebook keeps none of them."""
    from loom_nb.notebook.formatting import widget_tree

    return card not in widget_tree(view) and all(w.comm is None for w in widget_tree(card))
