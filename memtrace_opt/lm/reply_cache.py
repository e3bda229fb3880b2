"""The reply cache: an LM reply kept by what the model was actually sent, so the same request is never paid twice.

A request's key is the model as it answers (its name, the server at `api_base`, the engine's own identity: the
embedded model's file and the levers that shape its replies), the rendered messages (or prompt) and the decoding
settings (temperature, reply cap, rollout, ...): never an id of ours that the model does not see. Two calls whose
prompts are byte-identical share one reply, however they came about (a replay after memories were renumbered, a
repair re-run, a validation a later row of a comparison repeats).

    cache = ReplyCache(run_dir / "replies.sqlite")       # persistent: a resumed run pays nothing twice
    models.use_replies(cache)                              # every role's LM serves and feeds it
    row = cache.layered(out / "rows" / "gepa.sqlite",      # a comparison row: the warm-up's replies, read only,
                        carried=True)                      # under the row's own (no row sees another's)
    cache.stats()                                          # hits, misses, stored

A reply served from the cache reaches no model: the usage tracker counts it as a cache hit, the LM-call budget
does not count it, and the trace records the call with `cached: true` and the original call's tokens. A cache is
thread-safe; its SQLite file is written through on every new reply, so a killed run keeps what it paid for.
Failed calls are never stored.

A cache opened with `carried=True` holds work an earlier sitting paid for (a comparison row cut before it
finished): each reply its file already holds is charged once more, as a live call with the tokens it cost then,
the first time this sitting is served it (`charge`). So a row resumed across sittings spends its budget as it
would have in one, instead of getting its earlier calls for free.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CachedReply", "ReplyCache", "request_key"]

# settings that change how a request is sent or counted, never what the model replies
_NOT_SENT = frozenset({"cache", "num_retries", "callbacks", "api_key", "timeout", "request_timeout", "max_retries"})


def request_key(model: str, prompt: Any, messages: Any, settings: Mapping[str, Any]) -> str:
    """The key of a request: `model` (its identity as it answers), the prompt or messages as sent, the decoding
    settings (those that only say how it is sent or counted left out)."""
    sent = {k: v for k, v in sorted(settings.items()) if k not in _NOT_SENT and v is not None}
    payload = json.dumps({"model": model, "prompt": prompt, "messages": messages, "settings": sent},
                         sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    """What a live call returned (DSPy's outputs: one string or dict per completion) and what it cost then."""

    outputs: tuple[Any, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps({"outputs": list(self.outputs), "prompt_tokens": self.prompt_tokens,
                           "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3)},
                          ensure_ascii=False, default=str)

    @classmethod
    def from_json(cls, text: str) -> CachedReply:
        data = json.loads(text)
        return cls(tuple(data.get("outputs") or ()), int(data.get("prompt_tokens") or 0),
                   int(data.get("completion_tokens") or 0), float(data.get("seconds") or 0.0))


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    stored: int

    def to_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "stored": self.stored}


class ReplyCache:
    """Replies by request key (module doc). `path`: a SQLite file that keeps them (None: memory only); `base`: a
    cache read beneath this one and never written (the snapshot a comparison's rows share)."""

    def __init__(self, path: str | Path | None = None, *, base: ReplyCache | None = None,
                 carried: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.base = base
        self._lock = threading.Lock()
        self._replies: dict[str, CachedReply] = {}
        self._hits = self._misses = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
            for key, text in self._db.execute("SELECT key, reply FROM replies"):
                try:
                    self._replies[key] = CachedReply.from_json(text)
                except (ValueError, TypeError):  # a damaged row is a miss, never a crash
                    continue
        self._carried = set(self._replies) if carried else set()

    def get(self, key: str) -> CachedReply | None:
        """The reply stored for `key` (here, else in the base), counted as a hit or a miss."""
        with self._lock:
            found = self._replies.get(key)
        if found is None and self.base is not None:
            found = self.base.peek(key)
        with self._lock:
            if found is None:
                self._misses += 1
            else:
                self._hits += 1
        return found

    def charge(self, key: str) -> bool:
        """Whether serving `key` now is charged as a live call: a reply an earlier sitting paid for (`carried`),
        served for the first time in this one (module doc). Asked once per served reply."""
        with self._lock:
            if key in self._carried:
                self._carried.discard(key)
                return True
            return False

    def carried_seconds(self) -> float:
        """The model time the earlier sittings spent on the replies not yet charged again (`carried`)."""
        with self._lock:
            return sum(self._replies[key].seconds for key in self._carried)

    def peek(self, key: str) -> CachedReply | None:
        """`get` without counting: whether a request would be served (pricing work before it runs)."""
        with self._lock:
            found = self._replies.get(key)
        return found if found is not None or self.base is None else self.base.peek(key)

    def put(self, key: str, reply: CachedReply) -> None:
        """Keeps `reply` for `key` (the first reply stored for a key stays)."""
        with self._lock:
            if key in self._replies:
                return
            self._replies[key] = reply
            if self._db is not None:
                self._db.execute("INSERT OR IGNORE INTO replies (key, reply) VALUES (?, ?)", (key, reply.to_json()))

    def layered(self, path: str | Path | None = None, *, carried: bool = False) -> ReplyCache:
        """A cache over this one: it reads this cache's replies (and what this cache gets later: a snapshot is
        taken by not writing to this one again) and keeps its own new replies apart, in `path` if given;
        `carried`: what `path` already holds is charged again (module doc), never what this cache serves."""
        return ReplyCache(path, base=self, carried=carried)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._replies))

    def __len__(self) -> int:
        with self._lock:
            own = len(self._replies)
        return own + (len(self.base) if self.base is not None else 0)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplyCache:
        return self  # copies of an LM share its cache, as they share its usage tracker
