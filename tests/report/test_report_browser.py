"""The report in a real browser: headless Chromium over the DevTools pipe, no network.

Opens the report of a failed Mem0 run, clicks a failed question, checks the graph is drawn with the blamed
op marked, clicks ops and checks their instruction shows. Skipped only where Chromium is missing and CI is
not set; in CI a missing browser fails the test (install: apt-get install -y chromium).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.report import write_report
from memtrace_opt.report.browser import HeadlessChromium
from memtrace_opt.report.demo_run import ANSWER_INSTRUCTION, DECIDE_INSTRUCTION, write_demo_run

CASE = "mem0/demo/demo-q3"  # "Where does Odalys work?": a bad update decision deleted the memory


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_demo_run(tmp_path_factory.mktemp("browser") / "run", filler_sessions=150)
    return write_report(run).path


def _text(browser: HeadlessChromium, selector: str) -> str:
    return browser.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''")


def test_click_a_failed_question_see_its_graph_and_the_blamed_op(chromium: str, report_page: Path) -> None:
    with HeadlessChromium(chromium, width=1440, height=1000) as browser:
        browser.open(report_page.as_uri())
        assert "Questions" in _text(browser, ".cards")
        assert browser.evaluate("document.querySelectorAll('.case-item').length") == 6

        browser.click(f'.case-item[data-case="{CASE}"]')
        browser.wait_for("document.querySelector('.qhead .question').textContent === 'Where does Odalys work?'")
        assert browser.evaluate(f"document.querySelector('.case-item.sel').dataset.case === {json.dumps(CASE)}")
        drawn = browser.evaluate("document.querySelectorAll('#graph-svg .node').length")
        edges = browser.evaluate("document.querySelectorAll('#graph-svg path.edge').length")
        assert 10 <= drawn <= 60 and edges >= drawn - 2
        blamed = browser.evaluate("Array.from(document.querySelectorAll('#graph-svg .node.blamed')).map(g => g.dataset.node)")
        verdict_op = browser.evaluate("document.querySelector('.verdict button.linkish').dataset.node")
        assert blamed == [verdict_op]
        assert "Confirmed by replay" in _text(browser, ".verdict .confirm")
        assert "replays 6 LM calls, 5,710 tokens" in _text(browser, ".verdict .meta")
        assert "BLAMED" in _text(browser, "#graph-svg .node.blamed .badge")
        assert browser.evaluate("document.querySelectorAll('#graph-svg .node.evt').length") == 2  # D1:4, D3:2
        assert browser.evaluate("document.querySelectorAll('#graph-svg path.edge.p').length") > 0

        browser.click("#graph-svg .node.blamed")  # a real mouse click on the drawn op
        browser.wait_for(f"document.getElementById('inspector').dataset.node === {json.dumps(verdict_op)}")
        assert DECIDE_INSTRUCTION[:60] in _text(browser, "#inspector .instruction")
        assert "DeletionError" in _text(browser, "#inspector")

        answer_op = browser.evaluate(
            "Array.from(document.querySelectorAll('#trail button')).map(b => b.dataset.node).pop()")
        browser.click(f'#trail button[data-node="{answer_op}"]')  # centres the graph on the answering op
        browser.click(f'#graph-svg .node[data-node="{answer_op}"]')
        browser.wait_for(f"document.getElementById('inspector').dataset.node === {json.dumps(answer_op)}")
        assert ANSWER_INSTRUCTION[:50] in _text(browser, "#inspector .instruction")
        assert "LM calls" in _text(browser, "#inspector")

        browser.click('#etype-filters button[data-etype="RetrievalError"]')
        assert browser.evaluate("document.querySelectorAll('.case-item').length") == 1
        assert browser.page_errors == []
        assert all(url.startswith(("file:", "data:", "about:")) for url in browser.requests), browser.requests


def test_optimization_rounds_and_accepted_diff_render(chromium: str, report_page: Path) -> None:
    with HeadlessChromium(chromium) as browser:
        browser.open(report_page.as_uri() + "#case=" + CASE.replace("/", "%2F"))
        assert browser.evaluate("document.querySelector('.case-item.sel').dataset.case") == CASE
        assert browser.evaluate("!document.getElementById('optimize').hidden")
        assert browser.evaluate("document.querySelectorAll('#accuracy-plot circle.pt').length") == 3
        assert "DELETE only when" in _text(browser, "#optimize ins.diff-ins")
        cut = _text(browser, "#optimize .interrupted")  # the round the budget cut short, as far as it got
        assert "round 3 cut short" in cut and "minibatch 0.5" in cut and "not evaluated" in cut
        reached = _text(browser, "#optimize .interrupted .cut-reached")  # what the cut round had done by then
        assert "cut while validating" in reached and "38 LM calls into the round" in reached
        assert "blamed: answer.predict ×2" in reached and "not fixable by prompts: mem0.retrieve ×1" in reached
        assert "repairs: 2 tried, 1 confirmed" in reached and "local set: 6 calls, 4 targets, the seed carries 2" in reached
        rounds = _text(browser, "#optimize .rounds")  # round 2's local checks and its demos candidate
        assert "local: fixed 2/2, lost 0/1" in rounds and "rejected by the local check" in rounds
        assert "+1 demo" in rounds
        assert browser.page_errors == []


def test_a_section_anchor_opens_the_page_there_with_the_first_question_shown(chromium: str, report_page: Path) -> None:
    """`report.html#optimize`, the place `memtrace optimize`'s closing line names: the address keeps the anchor
    (the first question is shown without rewriting it to `#case=...`) and the view is on the section."""
    with HeadlessChromium(chromium, width=1440, height=700) as browser:
        browser.open(report_page.as_uri() + "#optimize")
        assert browser.evaluate("location.hash") == "#optimize"
        assert browser.evaluate("document.querySelector('.case-item.sel') !== null")
        in_view = "Math.abs(document.getElementById('optimize').getBoundingClientRect().top) < 2"  # smooth scroll
        browser.wait_for(f"window.scrollY > 0 && {in_view}", timeout=10)
        assert browser.page_errors == []
