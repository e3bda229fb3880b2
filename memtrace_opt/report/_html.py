"""Assembling report.html: the template, the stylesheet and the script from `static/`, and the payload as
JSON in a `<script type="application/json">` tag. One file, nothing fetched when it opens."""

from __future__ import annotations

import html
import json
import math
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["embed_json", "render_html"]


@cache
def _asset(name: str) -> str:
    return resources.files("memtrace_opt.report").joinpath("static", name).read_text(encoding="utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def embed_json(data: Any) -> str:
    """JSON that is safe inside a `<script>` element: `<`, `>` and `&` are written as \\u escapes (valid
    JSON, and no `</script>` or `<!--` can end or confuse the element); U+2028/2029 are escaped too."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:  # NaN or infinity somewhere in the run's data: JSON.parse would refuse them
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


def render_html(payload: dict[str, Any]) -> str:
    """The whole page for `payload` (see `_payload.build_payload`)."""
    script = _asset("report.js")
    if "</script" in script.lower():
        raise ValueError("report.js must not contain '</script'")
    summary = payload.get("summary") or {}
    title = f"memtrace report · {summary.get('run', '')} · {summary.get('system', '')}"
    page = _asset("report.html")
    # data last, so nothing in it can be taken for a placeholder
    for marker, value in (("__TITLE__", html.escape(title)), ("__CSS__", _asset("report.css")), ("__JS__", script)):
        page = page.replace(marker, value, 1)
    return page.replace("__DATA__", embed_json(payload), 1)
