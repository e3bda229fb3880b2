"""Secrets never reach an artifact: credentials in URLs, key- and token-looking strings, secret-named keys.

Every writer of a run directory (config.yaml, manifest.json, cases, events, graphs, verdicts, report.html) and
every exporter passes what it writes through `redact`, so a key given under an unexpected name (an `extra`
entry, an `Authorization` header, `http://user:KEY@host/v1`) is replaced by `REDACTED` before it touches disk.

    redact_text("http://me:sk-abc...@host/v1")  -> "http://me:***@host/v1"
    redact({"headers": {"Authorization": "Bearer abc"}})  -> {"headers": {"Authorization": "***"}}

The rules err on the side of hiding: a long random-looking token after `key=` / `token=` in a URL query, or
one of the well-known key shapes (OpenAI/Anthropic `sk-...`, GitHub `ghp_...`, Hugging Face `hf_...`, AWS
`AKIA...`, Google `AIza...`, Slack `xox?-...`, JWTs) anywhere in a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "redact", "redact_text", "is_secret_key"]

REDACTED = "***"

# A key whose name says it holds a secret: its value is replaced whatever it looks like.
_SECRET_KEY = re.compile(
    r"(^|[_\-.])(api[_\-]?key|apikey|password|passwd|secret|access[_\-]?token|auth[_\-]?token|token|bearer|"
    r"authorization|credentials?|private[_\-]?key|client[_\-]?secret|cookie)$",
    re.IGNORECASE,
)
# Keys that name where a secret lives, not the secret itself (kept: they are what configs should hold).
_SAFE_KEYS = frozenset({"api_key_env", "token_env", "max_tokens", "prompt_tokens", "completion_tokens", "tokens"})

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/@:]*)(?::(?P<pw>[^\s/@]*))?@")
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&;](?:api[_\-]?key|apikey|key|token|access_token|auth|sig|signature|secret|password)=)"
    r"(?P<value>[^&#\s\"']+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"\b(?:"
    r"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r")"
)


def is_secret_key(key: object) -> bool:
    """Whether a mapping key names a secret (`api_key`, `password`, `Authorization`, `x-api-key`, ...)."""
    name = str(key)
    return name.lower() not in _SAFE_KEYS and bool(_SECRET_KEY.search(name))


def _userinfo(match: re.Match[str]) -> str:
    if match.group("pw") is None:  # `scheme://TOKEN@host`: a lone user part is often the token itself
        return f"{match.group('scheme')}{REDACTED}@" if match.group("user") else match.group(0)
    return f"{match.group('scheme')}{match.group('user')}:{REDACTED}@"


def redact_text(text: str) -> str:
    """`text` with URL credentials, query-string keys, bearer tokens and key-shaped strings replaced."""
    if not text or len(text) < 8:
        return text
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _QUERY_SECRET.sub(lambda m: m.group("name") + REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact(value: Any) -> Any:
    """A copy of a JSON/YAML-like value with every secret replaced: values under secret-named keys (whole),
    and secrets inside any string (`redact_text`). Other types pass through unchanged."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    return value
