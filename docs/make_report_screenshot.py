"""Regenerates docs/report.png: the report of the demo Mem0 run with one failed question open.

    python docs/make_report_screenshot.py            # needs chromium (Debian: apt-get install -y chromium)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from memtrace_opt.report import write_report
from memtrace_opt.report.browser import HeadlessChromium
from memtrace_opt.report.demo_run import write_demo_run

CASE = "mem0/demo/demo-q3"  # "Where does Odalys work?": a bad update decision deleted the memory


def main(out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        page = write_report(write_demo_run(Path(tmp) / "mem0-demo", filler_sessions=40)).path
        with HeadlessChromium(width=1600, height=1380) as browser:
            browser.open(page.as_uri() + "#case=" + CASE.replace("/", "%2F"))
            browser.evaluate("window.scrollTo({top: document.getElementById('failures').offsetTop - 56, behavior: 'instant'})")
            browser.screenshot(out)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "report.png"
    print(main(target))
