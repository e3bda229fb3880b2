"""An update decision's repaired action list written back as the LM writes it (`repairs.py` uses it for repair
demos): the recorded reply edited, added actions appended as ADDs with no id, a changed action's written item
turned into a NONE of the id the LM wrote (with that memory's text), every other item byte for byte as written.

The actions of a decision name memories by the ids its prompt showed, so a changed action is written back only
where the recorded reply, read by the op's own reader (the op's `read_actions`, `ReadsActions`), gives back exactly
the recorded actions, one for one (`_written_for`); otherwise there is no such reply (None).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = ["ActionReader", "ReadsActions", "actions_reply"]

ActionReader = Callable[[Sequence[Any], dict[str, str]], tuple[list[dict[str, Any]], int, int]]


@runtime_checkable
class ReadsActions(Protocol):
    """An update op that says how it reads its LM's action items: `read_actions(items, id_map)` gives back
    `({event, unit_id, text} actions, unknown ids, malformed items)`, each shown id mapped by `id_map`. It must not
    raise for an item it cannot read (it skips and counts it)."""

    def read_actions(self, items: Sequence[Any], id_map: dict[str, str]) -> tuple[list[dict[str, Any]], int, int]: ...


class _WrittenList(NamedTuple):
    """A reply field that is one strict JSON list: its text, its items, each item's span in the text and where the
    list opens (just after its "[")."""

    text: str
    items: list[Any]
    spans: list[tuple[int, int]]
    opened: int

    def edited(self, changed: Mapping[int, Any], added: Sequence[Any]) -> str:
        """The text with item i replaced by `changed[i]` and `added` after the last item, the rest as written."""
        pieces, pos = [], 0
        for i, (start, end) in enumerate(self.spans):
            if i in changed:
                pieces += [self.text[pos:start], json.dumps(changed[i], ensure_ascii=False)]
                pos = end
        last = self.spans[-1][1] if self.spans else self.opened
        pieces.append(self.text[pos:last])
        if added:
            pieces.append((", " if self.spans else "") + ", ".join(json.dumps(a, ensure_ascii=False) for a in added))
        pieces.append(self.text[last:])
        return "".join(pieces)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":  # JSON's whitespace
        pos += 1
    return pos


def _written_list(text: str) -> _WrittenList | None:
    """`text` read as one strict JSON list, or None (a reply the adapter's lenient parser had to mend)."""
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        return None
    opened = pos + 1
    pos = _skip_space(text, opened)
    items: list[Any] = []
    spans: list[tuple[int, int]] = []
    if not text.startswith("]", pos):
        while True:
            try:
                item, end = decoder.raw_decode(text, pos)
            except ValueError:
                return None
            items.append(item)
            spans.append((pos, end))
            pos = _skip_space(text, end)
            if not text.startswith(",", pos):
                break
            pos = _skip_space(text, pos + 1)
    if not text.startswith("]", pos) or text[pos + 1:].strip():
        return None
    return _WrittenList(text, items, spans, opened)


def _written_id(item: Mapping[str, Any]) -> str:
    return "" if item.get("id") is None else str(item.get("id")).strip()


def _shown_memories(prompt: Mapping[str, str]) -> dict[str, str] | None:
    """The existing memories a decision prompt listed (`prompt`: its fields' texts), id -> text: its one input
    field that is a JSON list of distinct {"id", "text"} objects, or None when there is not exactly one."""
    found = []
    for text in prompt.values():
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, list) and value and all(isinstance(m, Mapping) and "id" in m and "text" in m for m in value):
            shown = {_written_id(m): str(m["text"]) for m in value}
            if len(shown) == len(value):
                found.append(shown)
    return found[0] if len(found) == 1 else None


def _written_for(written: Sequence[Any], shown: Mapping[str, str], actions: Sequence[Any],
                 reader: ActionReader) -> list[int] | None:
    """For each recorded action, the index of the written item it was read from, or None when that is not certain.

    Each written item is read with the op's own `reader` (each shown id standing for itself): the
    items it keeps must give back the recorded actions one for one, each shown id standing for one unit and each
    unit for one id."""
    itself = {shown_id: shown_id for shown_id in shown}
    read = [(i, kept[0]) for i, item in enumerate(written) if (kept := reader([item], itself)[0])]
    if len(read) != len(actions):
        return None
    units: dict[str, Any] = {}
    for (_, got), action in zip(read, actions, strict=True):
        if not isinstance(action, Mapping) or (action.get("event"), action.get("text")) != (got["event"], got["text"]):
            return None
        unit = action.get("unit_id")
        if (unit is None) != (got["unit_id"] is None):
            return None
        if unit is not None and units.setdefault(got["unit_id"], unit) != unit:
            return None
    return [i for i, _ in read] if len(set(units.values())) == len(units) else None


def actions_reply(written_text: str, prompt: Mapping[str, str], actions: Sequence[Any],
                  repaired: Sequence[Any], reader: ActionReader) -> str | None:
    """An update decision's repaired action list as the LM writes it (module docstring; `prompt`: the recorded
    prompt's fields by name, `actions` the op's recorded actions, `repaired` the repair's, `reader` the op's own), or None
    when it has no
    such form: the recorded reply is not one strict JSON list, the repair changes an action into anything but a
    NONE of the same unit, or the written item of a changed action is not certain (`_written_for`)."""
    written = _written_list(written_text)
    if written is None or len(repaired) < len(actions):
        return None
    changed = [j for j, action in enumerate(actions) if repaired[j] != action]
    tail = repaired[len(actions):]
    if not all(isinstance(a, Mapping) and a.get("event") == "ADD" and a.get("unit_id") is None for a in tail):
        return None
    added = [{"event": "ADD", "id": "", "text": a.get("text")} for a in tail
             if not any(isinstance(w, Mapping) and w.get("text") == a.get("text") for w in written.items)]
    if not changed and not added:
        return None
    edits: dict[int, Any] = {}
    if changed:
        shown = _shown_memories(prompt)
        index = None if shown is None else _written_for(written.items, shown, actions, reader)
        if shown is None or index is None:
            return None
        for j in changed:
            action, item = repaired[j], written.items[index[j]]
            unit = actions[j].get("unit_id") if isinstance(actions[j], Mapping) else None
            if unit is None or not isinstance(action, Mapping) or action.get("event") != "NONE" \
                    or action.get("unit_id") != unit:
                return None
            edits[index[j]] = {**item, "event": "NONE", "text": shown[_written_id(item)]}
    return written.edited(edits, added)
