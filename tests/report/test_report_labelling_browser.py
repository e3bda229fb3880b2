"""Labelling in a real browser: headless Chromium on the page `memtrace serve` serves labels two failed questions
(one with two acceptable ops), and labels.jsonl holds both; a reload shows them. Opened as a plain file, the
same form keeps a label and downloads labels.jsonl. Skipped only where Chromium is missing and CI is not set."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memtrace_opt.report import write_report
from memtrace_opt.report.browser import HeadlessChromium
from memtrace_opt.report.labels import read_labels
from memtrace_opt.report.serve import LabelServer

DELETED = "mem0/demo/demo-q3"  # the update decision op:10 deleted "works at the bookshop"
RETRIEVAL = "mem0/demo/demo-q4"


@pytest.fixture
def server(demo_run: Path) -> Iterator[LabelServer]:
    with LabelServer(demo_run, by="browser-test") as served:
        thread = threading.Thread(target=served.serve_forever, daemon=True)
        thread.start()
        yield served
        served.shutdown()
        thread.join(timeout=5)


def _fill(browser: HeadlessChromium, case_id: str, error_type: str, ops: list[str], rationale: str) -> None:
    browser.click(f'.case-item[data-case="{case_id}"]')
    browser.wait_for(f"(document.getElementById('label-form') || {{}}).dataset && "
                     f"document.getElementById('label-form').dataset.case === {json.dumps(case_id)}")
    browser.evaluate(f"(() => {{ const s = document.getElementById('label-etype'); s.value = {json.dumps(error_type)};"
                     " s.dispatchEvent(new Event('change')); })()")
    for op in ops:
        browser.click(f'#label-form input.label-op[value="{op}"]')  # a real click on the checkbox
    browser.evaluate(f"document.getElementById('label-rationale').value = {json.dumps(rationale)}")
    browser.click("#label-save")


def _status(browser: HeadlessChromium) -> str:
    return browser.evaluate("document.getElementById('label-status').textContent")


def test_label_two_questions_through_the_served_page(chromium: str, server: LabelServer) -> None:
    with HeadlessChromium(chromium, width=1440, height=1000) as browser:
        browser.open(server.url)
        _fill(browser, DELETED, "UpdateError", ["op:10"], "op:10 decided DELETE on 'works at the Quillfeather Bookshop'")
        browser.wait_for("document.getElementById('label-status').textContent === 'Saved to labels.jsonl.'")
        _fill(browser, RETRIEVAL, "RetrievalError", ["op:18", "op:19"], "the memory was stored but not retrieved")
        browser.wait_for("document.getElementById('label-status').textContent === 'Saved to labels.jsonl.'")

        lines = read_labels(server.labels_path)
        assert [(x["case_id"], x["error_type"], x["ops"]) for x in lines] == [
            (DELETED, "UpdateError", ["op:10"]), (RETRIEVAL, "RetrievalError", ["op:18", "op:19"])]
        assert all(x["source"] == "human" and x["by"] == "browser-test" and x["at"] for x in lines)
        assert lines[0]["rationale"].startswith("op:10 decided DELETE")

        browser.open(server.url)  # a reload shows both labels
        assert browser.evaluate("document.querySelectorAll('.case-item .labelled').length") == 2
        browser.click(f'.case-item[data-case="{RETRIEVAL}"]')
        browser.wait_for("document.getElementById('label-saved').dataset.etype === 'RetrievalError'")
        saved = browser.evaluate("document.getElementById('label-saved').textContent")
        assert "op:18" in saved and "op:19" in saved and "by browser-test" in saved
        assert browser.evaluate("document.querySelector('#label-form input.label-op[value=\"op:19\"]').checked")

        # op:10 is ticked from the saved label: a click unticks it, and a label without an op is not sent
        _fill(browser, DELETED, "UpdateError", ["op:10"], "")
        browser.wait_for("document.getElementById('label-status').textContent.startsWith('Tick the root-cause op')")
        assert len(read_labels(server.labels_path)) == 2
        assert browser.page_errors == []


def test_the_plain_file_page_keeps_a_label_and_downloads_labels_jsonl(chromium: str, demo_run: Path,
                                                                     tmp_path: Path) -> None:
    page = write_report(demo_run).path
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with HeadlessChromium(chromium) as browser:
        browser.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        browser.open(page.as_uri())
        _fill(browser, DELETED, "GoldError", [], "the answer is right; the metric calls it wrong")
        browser.wait_for("document.getElementById('label-status').textContent.startsWith('Kept in this page')")
        assert browser.evaluate("document.getElementById('label-download').textContent") == "Download labels.jsonl (1)"
        browser.click("#label-download")
        target = downloads / "labels.jsonl"
        deadline = time.monotonic() + 20
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        [line] = read_labels(target)
        assert (line["case_id"], line["error_type"], line["ops"], line["source"]) == (DELETED, "GoldError", [], "human")
        assert browser.page_errors == []
        assert all(url.startswith(("file:", "data:", "about:", "blob:")) for url in browser.requests), browser.requests
