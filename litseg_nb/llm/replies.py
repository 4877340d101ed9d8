"""Reading LLM replies: size cap, unpaired surrogates, reasoning blocks removed, JSON objects extracted.

:func:`read_reply` splits answer from reasoning (a tag inside JSON is text); :func:`extract_json` takes a
reply that is one object as is, else the first complete object in a code fence, else in the answer.
Every step is linear in the reply's length."""
from __future__ import annotations

import json
import re
from bisect import bisect_right
from itertools import accumulate
from dataclasses import dataclass
from typing import Any, Iterator

# the longest token of the SmolLM2 vocabulary is 81 characters: 128 per token leaves a margin
MAX_CHARS_PER_TOKEN = 128

_TAG = re.compile(r"<(/?)(?:think|thinking)>", re.I)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_FENCE_LINE = re.compile(r"^[ \t]*```[A-Za-z0-9_+.-]*", re.M)
_STRUCT = re.compile(r'[{}\[\]"]')
_QUOTE_OR_ESCAPE = re.compile(r'\\.|"', re.S)
_STRING_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)  # after an opening quote
_INT = re.compile(r"[+-]?[0-9]{1,12}", re.ASCII)
_DECODER = json.JSONDecoder(strict=False)  # control characters inside strings are tolerated


def reply_char_limit(max_new_tokens: int | None) -> int | None:
    """The most characters a reply of at most ``max_new_tokens`` tokens can have (None = no cap)."""
    if max_new_tokens is None or max_new_tokens <= 0:
        return None
    return int(max_new_tokens) * MAX_CHARS_PER_TOKEN


def replace_lone_surrogates(text: str) -> tuple[str, int]:
    """``text`` with every (unpaired) surrogate replaced by U+FFFD, and how many."""
    return _SURROGATE.subn("\ufffd", text)


def clean_strings(value: Any) -> tuple[Any, int]:
    """Decoded JSON with unpaired surrogates replaced in every string and key (iteratively), and how many."""
    total = 0
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]  # (container, key) of each node left to clean (copied)
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            parent[key], c = replace_lone_surrogates(node)
            total += c
        elif isinstance(node, list):
            parent[key] = node = list(node)
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, dict):
            new: dict[Any, Any] = {}
            for k, v in node.items():
                k, c = replace_lone_surrogates(k) if isinstance(k, str) else (k, 0)
                total += c
                new[k] = v
            parent[key] = new
            stack.extend((new, k) for k in new)
    return (root[0], total) if total else (value, 0)


@dataclass(frozen=True)
class Reply:
    """A reply split into its answer and its reasoning, with everything done to it named."""

    raw_chars: int  # length of the reply as received
    answer: str  # the reply without reasoning blocks ('' when oversize or cut inside reasoning)
    reasoning_blocks: int = 0  # reasoning blocks removed (closed, template-opened or unclosed)
    reasoning_chars: int = 0
    truncated_in_reasoning: bool = False  # an unclosed leading block: the reply has no answer
    oversize: bool = False  # longer than its token budget allows; not parsed
    char_limit: int | None = None
    surrogates: int = 0  # unpaired surrogates replaced in the text
    notes: tuple[str, ...] = ()  # human-readable, one per thing done ('' when nothing)

    @property
    def error(self) -> str | None:
        """Why the reply has no answer to read (None when it has one, possibly empty)."""
        if self.oversize:
            return (f"reply of {self.raw_chars:,} characters exceeds the {self.char_limit:,} a reply "
                    f"within its token budget can have; not parsed")
        if self.truncated_in_reasoning:
            return "reply ended inside its reasoning block (unclosed <think>): no answer"
        return None


def read_reply(text: Any, *, max_new_tokens: int | None = None) -> Reply:
    """Split ``text`` into answer and reasoning, capped by ``max_new_tokens``. Never raises."""
    if not isinstance(text, str):
        return Reply(0, "", notes=(f"reply is {type(text).__name__}, not text",) if text is not None else ())
    limit = reply_char_limit(max_new_tokens)
    if limit is not None and len(text) > limit:
        bare = Reply(len(text), "", oversize=True, char_limit=limit)
        return Reply(len(text), "", oversize=True, char_limit=limit, notes=(bare.error or "",))
    notes: list[str] = []
    s, n_sur = replace_lone_surrogates(text)
    if n_sur:
        notes.append(f"replaced {n_sur} unpaired surrogate(s) by U+FFFD")
    answer, blocks, rchars, truncated = _strip_reasoning(s)
    if blocks:
        what = "an unclosed leading reasoning block (reply cut inside it)" if truncated and blocks == 1 else \
            f"{blocks} reasoning block(s)"
        notes.append(f"removed {what}, {rchars:,} characters")
    return Reply(len(text), answer, blocks, rchars, truncated, False, limit, n_sur, tuple(notes))


def _strip_reasoning(s: str) -> tuple[str, int, int, bool]:
    """(answer, blocks removed, reasoning characters, truncated inside reasoning); tags inside JSON are text."""
    found = list(_TAG.finditer(s))
    if not found:
        return s, 0, 0, False
    spans = sorted((c.start, c.end) for c in json_candidates(s))
    starts = [a for a, _ in spans]
    reach = list(accumulate((e for _, e in spans), max))  # furthest end among spans[0..k] (they may nest)

    def in_object(i: int) -> bool:
        k = bisect_right(starts, i) - 1
        return k >= 0 and reach[k] > i

    in_string = _tags_in_line_strings(s, found)
    tags = [(m.start(), m.end(), not m.group(1)) for m, quoted in zip(found, in_string)
            if not quoted and not in_object(m.start())]
    parts: list[str] = []
    blocks = rchars = pos = i = 0
    if tags and not tags[0][2]:  # the chat template opened the block: only its end is in the reply
        blocks, rchars, pos, i = 1, tags[0][0], tags[0][1], 1
    while i < len(tags):
        start, end, is_open = tags[i]
        if not is_open:  # a stray closing tag after the answer began: left as text
            i += 1
            continue
        j = i + 1
        while j < len(tags) and tags[j][2]:  # an opening tag inside reasoning is reasoning text
            j += 1
        if j == len(tags):  # never closed
            before = "".join(parts) + s[pos:start]
            if before.strip():  # after some answer text: not a block we can delimit, left as text
                break
            return before, blocks + 1, rchars + len(s) - end, True
        parts.append(s[pos:start])
        blocks += 1
        rchars += tags[j][0] - end
        pos = tags[j][1]
        i = j + 1
    parts.append(s[pos:])
    return "".join(parts), blocks, rchars, False


def _tags_in_line_strings(s: str, found: list[re.Match]) -> list[bool]:
    """Per tag: does it sit inside a JSON string value of its line (opened after and closed before JSON
    punctuation)? Prose with a stray quote is not."""
    out = []
    line_end = line_start = -1
    parity = scanned = 0
    last_quote = next_quote = -1
    for m in found:
        start, end = m.start(), m.end()
        if start >= line_end:  # a new line: reset the quote count
            line_start = s.rfind("\n", 0, start) + 1
            line_end = s.find("\n", start)
            line_end = len(s) if line_end < 0 else line_end
            parity, scanned, last_quote, next_quote = 0, line_start, -1, -1
        for q in _QUOTE_OR_ESCAPE.finditer(s, scanned, start):
            if q.group() == '"':
                parity += 1
                last_quote = q.start()
        scanned = start
        if parity % 2 == 0 or last_quote < 0:
            out.append(False)
            continue
        if next_quote < end:  # the first unescaped quote after the tag on this line (cached)
            next_quote = line_end
            for q in _QUOTE_OR_ESCAPE.finditer(s, end, line_end):
                if q.group() == '"':
                    next_quote = q.start()
                    break
        if next_quote >= line_end:
            out.append(False)
            continue
        before = s[max(line_start, last_quote - 64):last_quote].rstrip()[-1:]  # bounded look-around
        after = s[next_quote + 1:min(line_end, next_quote + 64)].lstrip()[:1]
        out.append(before in (":", "[", ",", "{") and (after in (",", "]", "}", ":") or after == ""))
    return out


def answer_text(text: Any, *, max_new_tokens: int | None = None) -> str:
    """The answer part of a reply (reasoning removed, surrogates replaced; '' when unreadable)."""
    return read_reply(text, max_new_tokens=max_new_tokens).answer


_LIST_ITEM = re.compile(r"(?:[-*\u2022]|\d++[.)])\s")  # matched on a stripped line: linear


def list_items(text: Any, max_items: int | None = None) -> list[str]:
    """The items of a reply's answer (lines opening with ``-``, ``*``, ``•``, ``1.`` or ``2)``), stripped, empty
    ones skipped."""
    out: list[str] = []
    for line in answer_text(text).splitlines():
        s = line.strip()
        m = _LIST_ITEM.match(s)
        if m and s[m.end():].strip():
            out.append(s[m.end():].strip())
            if max_items is not None and len(out) >= max_items:
                break
    return out


# --------------------------------------------------------------------------- JSON extraction
@dataclass(frozen=True)
class JsonCandidate:
    """One complete JSON value found in an answer: where, whether inside a fence, the value."""

    start: int
    end: int
    in_fence: bool
    value: Any


def _balanced_end(s: str, start: int) -> int:
    """Index just after the bracket closing the one at ``start`` (JSON-string aware), or -1."""
    depth = 0
    pos = start
    search, string_rest = _STRUCT.search, _STRING_REST.match
    while True:
        m = search(s, pos)
        if m is None:
            return -1
        ch, i = m.group(), m.start()
        if ch == '"':
            r = string_rest(s, i + 1)
            if r is None:
                return -1
            pos = r.end()
            continue
        if ch in "{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                return i + 1
        pos = i + 1


_TRAILING_COMMA = re.compile(r",\s*+([\]}])")


def _objects_in(s: str, offset: int, in_fence: bool, lenient: bool) -> Iterator[JsonCandidate]:
    """Complete top-level JSON objects of ``s`` in order, up to one left open; an undecodable ``{`` block
    is skipped (``lenient``: decoded once more after fixing slips)."""
    pos = 0
    while True:
        start = s.find("{", pos)
        if start < 0:
            return
        try:
            value, end = _DECODER.raw_decode(s, start)
        except (ValueError, RecursionError):
            end = _balanced_end(s, start)
            if end < 0:
                return  # left open until the end: nothing complete starts inside it
            pos = end
            if lenient:
                try:
                    # the two commonest slips: trailing commas and single quotes
                    fixed = _TRAILING_COMMA.sub(r"\1", s[start:end]).replace("'", '"')
                    yield JsonCandidate(offset + start, offset + end, in_fence, _DECODER.decode(fixed))
                except (ValueError, RecursionError):
                    pass
            continue
        yield JsonCandidate(offset + start, offset + end, in_fence, value)
        pos = end


def json_candidates(answer: str, lenient: bool = False) -> Iterator[JsonCandidate]:
    """Every complete JSON object of ``answer``: those in markdown code fences (markers starting a line)
    first, then those of the whole text."""
    if "```" in answer:
        marks = _FENCE_LINE.finditer(answer)
        for opening in marks:
            closing = next(marks, None)
            a, b = opening.end(), (closing.start() if closing is not None else len(answer))
            if answer.find("{", a, b) >= 0:
                yield from _objects_in(answer[a:b], a, True, lenient)
    yield from _objects_in(answer, 0, False, lenient)


@dataclass(frozen=True)
class JsonReply:
    """The outcome of extracting one JSON object from a reply."""

    obj: dict | None
    reply: Reply
    source: str = ""  # "whole" (the reply is the object), "fence", "prose"; '' when none
    surrogates: int = 0  # unpaired surrogates replaced inside decoded strings (JSON escapes)

    @property
    def error(self) -> str | None:
        """Why no object was read (None when one was)."""
        if self.obj is not None:
            return None
        if self.reply.error:
            return self.reply.error
        if not self.reply.answer.strip():
            return "empty reply" if not self.reply.reasoning_blocks else "no answer after the reasoning block"
        return "reply is not parsable JSON"

    @property
    def notes(self) -> list[str]:
        out = list(self.reply.notes)
        if self.surrogates:
            out.append(f"replaced {self.surrogates} unpaired surrogate escape(s) in JSON strings by U+FFFD")
        return out


def extract_json(text: Any, *, max_new_tokens: int | None = None) -> JsonReply:
    """The first JSON object of a reply, with how it was found. Never raises."""
    reply = read_reply(text, max_new_tokens=max_new_tokens)
    if reply.oversize or not isinstance(text, str):
        return JsonReply(None, reply)
    whole = text.strip()
    if whole.startswith("{") and whole.endswith("}"):
        try:
            value = _DECODER.decode(whole)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return _finish(value, reply, "whole", text)
    if reply.truncated_in_reasoning:
        return JsonReply(None, reply)
    for cand in json_candidates(reply.answer):
        if isinstance(cand.value, dict):
            return _finish(cand.value, reply, "fence" if cand.in_fence else "prose", text)
    return JsonReply(None, reply)


def _finish(value: dict, reply: Reply, source: str, text: str) -> JsonReply:
    n = 0
    if _ESCAPED_SURROGATE.search(text) or _SURROGATE.search(text):  # raw, or an escape decoding to one
        value, n = clean_strings(value)
    return JsonReply(value, reply, source, n)


def parse_json_reply(text: Any, *, max_new_tokens: int | None = None) -> dict | None:
    """The JSON object in an LLM reply, or ``None`` (see :func:`extract_json`). Never raises."""
    return extract_json(text, max_new_tokens=max_new_tokens).obj


# --------------------------------------------------------------------------- values
def read_int(value: Any) -> int | None:
    """``value`` as an integer when it unambiguously is one (int, integral float below 1e12, 1-12 digits)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):  # (NaN and infinities are not integers)
        return int(value) if value.is_integer() and abs(value) < 1e12 else None
    if isinstance(value, str) and len(value) <= 64 and _INT.fullmatch(value.strip()):
        return int(value.strip())
    return None


def is_json_int(value: Any) -> bool:
    """A JSON integer proper (Python ``int``, not ``bool``)."""
    return isinstance(value, int) and not isinstance(value, bool)
