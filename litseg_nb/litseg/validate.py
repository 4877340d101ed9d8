"""Validation, retry bookkeeping and fallback of LitSeg outputs (paper section 3.1.2).

This module is THE shared validator: LitSeg (:mod:`litseg_nb.litseg.pipeline`) and LitSeg-Lite
both use it.

* :func:`parse_json_reply` – tolerant JSON extraction (markdown fences, leading/trailing prose).
* :func:`validate_stage1` / :func:`validate_stage2` – schema checks of the stage-1/2 replies.
* :func:`validate_segments` – *syntax* (the stage-3 schema: a ``segments`` list of objects with
  ``subtitle``, ``from_idx``, ``to_idx`` and optional ``context_idx``) and *semantics* (integer
  indices in ``1..n``, ``from_idx <= to_idx``, segments in source order, first segment starts at 1,
  last ends at ``n``, main ranges jointly cover every sentence, context indices valid, no sentence
  only in context).
* :func:`repair_coverage` – the paper's gap fallback: every maximal run of uncovered sentences is
  appended to its left-adjacent segment in source order (the right-adjacent one when there is no
  segment to the left).
* :func:`finalize_segments` – the full fallback chain applied after the last retry, returning
  segments that always cover the unit plus the fallback type:

  ``none``          output valid, used as is;
  ``schema_repair`` some segment entries were malformed and skipped, the rest covered the unit;
  ``index_repair``  indices had to be sanitised (non-integer → coerced, reversed → swapped,
                    out of range → clamped / dropped, context indices cleaned) – the paper does not
                    spell this case out, so it is counted separately;
  ``coverage_repair`` gaps were filled by the left-adjacent rule (the paper's fallback);
  ``whole_unit``    output unparsable / without any usable segment → the whole unit as one chunk
                    (the paper's last-resort fallback).

  A unit can need both index and coverage repair; ``fallback_types`` lists all of them and the
  primary ``fallback`` is the most severe one (whole_unit > coverage_repair > index_repair > schema_repair > none).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

FALLBACK_ORDER = ("none", "schema_repair", "index_repair", "coverage_repair", "whole_unit")


@dataclass(frozen=True)
class Segment:
    """One LitSeg plot block: main range ``from_idx..to_idx`` (1-based, inclusive) + context."""

    subtitle: str
    from_idx: int
    to_idx: int
    context_idx: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"subtitle": self.subtitle, "from_idx": self.from_idx, "to_idx": self.to_idx,
                "context_idx": list(self.context_idx)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Segment":
        return cls(str(d.get("subtitle") or ""), int(d["from_idx"]), int(d["to_idx"]),
                   tuple(int(i) for i in d.get("context_idx") or ()))

    @property
    def length(self) -> int:
        return self.to_idx - self.from_idx + 1


@dataclass
class ValidationResult:
    """Outcome of validating one stage-3 reply.

    ``segments`` holds what could be read from the reply (indices coerced to int where possible,
    NOT otherwise repaired), so the fallback can start from the model's own segmentation.
    """

    syntax_ok: bool
    semantic_ok: bool
    errors: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.syntax_ok and self.semantic_ok

    @property
    def failure_type(self) -> str:
        """``ok``, ``syntax`` (unparsable / schema) or ``semantic`` (indices / coverage)."""
        return "ok" if self.ok else ("syntax" if not self.syntax_ok else "semantic")

    def to_json(self) -> dict[str, Any]:
        return {"syntax_ok": self.syntax_ok, "semantic_ok": self.semantic_ok, "errors": list(self.errors),
                "warnings": list(self.warnings), "segments": [s.to_json() for s in self.segments]}


# ----------------------------------------------------------------------------------- parsing
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def parse_json_reply(text: Any) -> dict | None:
    """The JSON object in an LLM reply, or ``None``.

    Accepts a bare object, an object inside a markdown code fence, or an object surrounded by
    prose; the first position from which a complete JSON *object* decodes wins. Truncated or
    otherwise broken JSON gives ``None`` (no guessing repairs). Never raises.
    """
    if not isinstance(text, str):
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for cand in candidates:
        s = cand.strip()
        try:
            obj = json.loads(s)
            if isinstance(obj, dict):
                return obj
        except (ValueError, RecursionError):
            pass
        for start in _top_level_braces(s)[:200]:
            try:
                obj, _ = decoder.raw_decode(s, start)
                if isinstance(obj, dict):
                    return obj
            except (ValueError, RecursionError):
                pass
    return None


def _top_level_braces(s: str) -> list[int]:
    """Positions of ``{`` that open an object at nesting depth 0 (outside JSON strings).

    Objects nested inside an unfinished (truncated) outer object are therefore never taken for
    the reply: a truncated ``{"segments": [{...}, {...`` yields no candidate but its first brace.
    """
    out: list[int] = []
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(s):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if depth == 0:  # prose: only an opening brace matters (quotes/brackets may be unbalanced)
            if ch == "{":
                out.append(i)
                depth = 1
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return out


# ------------------------------------------------------------------------------ stage 1 and 2
def _validate_string_field(obj: Any, key: str) -> list[str]:
    if not isinstance(obj, dict):
        return ["reply is not a JSON object"]
    if key not in obj:
        return [f"missing key {key!r}"]
    if not isinstance(obj[key], str):
        return [f"{key!r} must be a string, got {type(obj[key]).__name__}"]
    if not obj[key].strip():
        return [f"{key!r} is empty"]
    return []


def validate_stage1(obj: Any) -> list[str]:
    """Errors of a stage-1 reply against ``{"step_1_events": str}`` (empty list = valid)."""
    return _validate_string_field(obj, "step_1_events")


def validate_stage2(obj: Any) -> list[str]:
    """Errors of a stage-2 reply against ``{"step_2_threads": str}`` (empty list = valid)."""
    return _validate_string_field(obj, "step_2_threads")


# ------------------------------------------------------------------------------------ stage 3
def _as_int(value: Any) -> int | None:
    """``value`` as an int when it unambiguously is one (int, integral float, digit string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e12:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,12}\s*", value):
        return int(value)
    return None


def validate_segments(obj: Any, n_sentences: int) -> ValidationResult:
    """Dual-level validation of a stage-3 reply (already parsed, or ``None`` when unparsable)."""
    n = int(n_sentences)
    if obj is None:
        return ValidationResult(False, False, ["reply is not parsable JSON"])
    if not isinstance(obj, dict):
        return ValidationResult(False, False, ["reply is not a JSON object"])
    warnings = [f"missing key {k!r}" for k in ("chapter_title", "step_3_turning_points") if k not in obj]
    raw = obj.get("segments")
    if not isinstance(raw, list):
        return ValidationResult(False, False, ["'segments' missing or not a list"], warnings=warnings)

    syntax: list[str] = []
    semantic: list[str] = []
    segments: list[Segment] = []
    for k, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            syntax.append(f"segment {k}: not an object")
            continue
        missing = [key for key in ("subtitle", "from_idx", "to_idx") if key not in item]
        if missing:
            syntax.append(f"segment {k}: missing {', '.join(missing)}")
            continue
        subtitle = item["subtitle"]
        if not isinstance(subtitle, str):
            syntax.append(f"segment {k}: subtitle is not a string")
            subtitle = "" if subtitle is None else str(subtitle)
        lo, hi = _as_int(item["from_idx"]), _as_int(item["to_idx"])
        for name, val, conv in (("from_idx", item["from_idx"], lo), ("to_idx", item["to_idx"], hi)):
            if conv is None:
                semantic.append(f"segment {k}: {name} {val!r} is not an integer")
            elif not isinstance(val, int) or isinstance(val, bool):
                semantic.append(f"segment {k}: {name} {val!r} is not a JSON integer")
        ctx_raw = item.get("context_idx", [])
        if ctx_raw is None:
            ctx_raw = []
        if not isinstance(ctx_raw, list):
            syntax.append(f"segment {k}: context_idx is not a list")
            ctx_raw = []
        ctx: list[int] = []
        for c in ctx_raw:
            ci = _as_int(c)
            if ci is None or not isinstance(c, int) or isinstance(c, bool):
                semantic.append(f"segment {k}: context index {c!r} is not an integer")
            if ci is not None:
                ctx.append(ci)
        if lo is None or hi is None:
            continue
        segments.append(Segment(subtitle, lo, hi, tuple(ctx)))

    if not raw:
        semantic.append("no segments")
    for k, s in enumerate(segments, 1):
        if not (1 <= s.from_idx <= n and 1 <= s.to_idx <= n):
            semantic.append(f"segment {k}: range {s.from_idx}-{s.to_idx} outside 1..{n}")
        if s.from_idx > s.to_idx:
            semantic.append(f"segment {k}: from_idx {s.from_idx} > to_idx {s.to_idx}")
        bad_ctx = [c for c in s.context_idx if not 1 <= c <= n]
        if bad_ctx:
            semantic.append(f"segment {k}: context indices {bad_ctx[:10]} outside 1..{n}")
    if segments:
        if segments[0].from_idx != 1:
            semantic.append(f"first segment starts at {segments[0].from_idx}, not 1")
        if segments[-1].to_idx != n:
            semantic.append(f"last segment ends at {segments[-1].to_idx}, not {n}")
        starts = [s.from_idx for s in segments]
        if starts != sorted(starts):
            semantic.append("segments are not in source order")
        covered = _covered(segments, n)
        missing = [i for i in range(1, n + 1) if not covered[i]]
        if missing:
            semantic.append(f"sentences in no main range: {_runs(missing)}")
        ctx_only = sorted({c for s in segments for c in s.context_idx if 1 <= c <= n and not covered[c]})
        if ctx_only:
            semantic.append(f"sentences only in context_idx: {_runs(ctx_only)}")
    return ValidationResult(not syntax, not syntax and not semantic, syntax + semantic, segments, warnings)


def _covered(segments: Sequence[Segment], n: int) -> list[bool]:
    covered = [False] * (n + 2)
    for s in segments:
        for i in range(max(1, s.from_idx), min(n, s.to_idx) + 1):
            covered[i] = True
    return covered


def _runs(indices: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3, 7"`` (for short error messages)."""
    out, idx = [], sorted(indices)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[i]) if i == j else f"{idx[i]}-{idx[j]}")
        i = j + 1
    return ", ".join(out[:20]) + (" ..." if len(out) > 20 else "")


# ------------------------------------------------------------------------------- fallbacks
def sanitize_segments(segments: Sequence[Segment], n: int) -> tuple[list[Segment], list[str]]:
    """Make every segment a valid range inside ``1..n`` (before coverage repair).

    Reversed ranges are swapped, ranges partly outside ``1..n`` are clamped, ranges entirely
    outside are dropped; context indices outside ``1..n``, inside the segment's own main range or
    duplicated are removed. The result is sorted in source order (stable). Returns the segments
    and a list of the actions taken (empty when nothing had to change).
    """
    actions: list[str] = []
    out: list[tuple[int, int, int, Segment]] = []
    for k, s in enumerate(segments, 1):
        lo, hi = s.from_idx, s.to_idx
        if lo > hi:
            lo, hi = hi, lo
            actions.append(f"segment {k}: swapped reversed range")
        if hi < 1 or lo > n:
            actions.append(f"segment {k}: dropped range {s.from_idx}-{s.to_idx} outside 1..{n}")
            continue
        if lo < 1 or hi > n:
            actions.append(f"segment {k}: clamped range {lo}-{hi} to 1..{n}")
            lo, hi = max(1, lo), min(n, hi)
        ctx: list[int] = []
        for c in s.context_idx:
            if 1 <= c <= n and not lo <= c <= hi and c not in ctx:
                ctx.append(c)
        if len(ctx) != len(s.context_idx):
            actions.append(f"segment {k}: removed {len(s.context_idx) - len(ctx)} invalid/redundant context indices")
        out.append((lo, hi, k, Segment(s.subtitle, lo, hi, tuple(sorted(ctx)))))
    ordered = [t[3] for t in sorted(out, key=lambda t: (t[0], t[1], t[2]))]
    if [t[3] for t in out] != ordered:
        actions.append("reordered segments into source order")
    return ordered, actions


def repair_coverage(segments: Sequence[Segment], n: int) -> tuple[list[Segment], list[int]]:
    """The paper's gap fallback on valid-range segments (see :func:`sanitize_segments`).

    Each maximal run of sentences covered by no main range is appended to its *left-adjacent*
    segment in source order – the segment ending right before the gap (the last one in source
    order when several end there) – or, for a gap at the start of the unit, prepended to the
    *right-adjacent* segment (the first one starting right after the gap). Context indices that end
    up inside the extended main range are dropped (they are no longer context). Returns the
    repaired segments in source order and the sentence indices that were added.

    ``segments`` must be non-empty and every range inside ``1..n``; raises ``ValueError`` otherwise.
    """
    segs = list(segments)
    if not segs:
        raise ValueError("repair_coverage needs at least one segment (use the whole-unit fallback)")
    for s in segs:
        if not 1 <= s.from_idx <= s.to_idx <= n:
            raise ValueError(f"repair_coverage: invalid range {s.from_idx}-{s.to_idx} for n={n}; sanitize first")
    order = sorted(range(len(segs)), key=lambda i: (segs[i].from_idx, segs[i].to_idx, i))
    segs = [segs[i] for i in order]
    lo = [s.from_idx for s in segs]
    hi = [s.to_idx for s in segs]
    covered = _covered(segs, n)
    repaired: list[int] = []
    i = 1
    while i <= n:
        if covered[i]:
            i += 1
            continue
        a = i
        while i + 1 <= n and not covered[i + 1]:
            i += 1
        b = i
        repaired.extend(range(a, b + 1))
        left = [k for k in range(len(segs)) if hi[k] == a - 1]
        if left:
            k = left[-1]  # last in source order among the segments ending right before the gap
            hi[k] = b
        else:
            right = [k for k in range(len(segs)) if lo[k] == b + 1]
            k = right[0]  # a gap with no segment to its left starts at 1: extend the first one after it
            lo[k] = a
        for j in range(a, b + 1):
            covered[j] = True
        i = b + 1
    out = []
    for k, s in enumerate(segs):
        ctx = tuple(c for c in s.context_idx if not lo[k] <= c <= hi[k])
        out.append(Segment(s.subtitle, lo[k], hi[k], ctx))
    return out, repaired


@dataclass
class FinalSegmentation:
    """Segments after the full fallback chain: always a full cover of ``1..n``."""

    segments: list[Segment]
    fallback: str  # most severe of fallback_types
    fallback_types: list[str]
    actions: list[str]
    repaired_indices: list[int]

    def to_json(self) -> dict[str, Any]:
        return {"segments": [s.to_json() for s in self.segments], "fallback": self.fallback,
                "fallback_types": list(self.fallback_types), "actions": list(self.actions),
                "repaired_indices": list(self.repaired_indices)}


def whole_unit_segment(n: int, subtitle: str = "") -> Segment:
    return Segment(subtitle, 1, n, ())


def finalize_segments(result: ValidationResult | None, n: int) -> FinalSegmentation:
    """Apply the fallback chain to the last (or best) validation result of a unit.

    valid → used as is; usable segments → sanitise indices, then left-adjacent gap repair;
    nothing usable (unparsable, schema broken without any readable segment, all ranges outside the
    unit) → the whole unit as one segment.
    """
    if n < 1:
        raise ValueError(f"a unit needs at least one sentence, got n={n}")
    if result is not None and result.ok:
        return FinalSegmentation(list(result.segments), "none", ["none"], [], [])
    segs = list(result.segments) if result is not None else []
    actions: list[str] = []
    if segs:
        segs, actions = sanitize_segments(segs, n)
    if not segs:
        why = "no usable segment" if result is not None and result.syntax_ok else "unparsable output"
        return FinalSegmentation([whole_unit_segment(n)], "whole_unit", ["whole_unit"], [why], [])
    types = ["index_repair"] if actions else []
    segs, repaired = repair_coverage(segs, n)
    if repaired:
        types.append("coverage_repair")
        actions.append(f"appended uncovered sentences {_runs(repaired)} to adjacent segments")
    if not types:
        assert result is not None
        if not result.syntax_ok:  # malformed entries were skipped; the readable ones cover the unit
            types = ["schema_repair"]
            actions.append("skipped malformed segment entries")
        else:  # e.g. indices given as digit strings, read as integers
            types = ["index_repair"]
            actions.append("coerced non-integer indices")
    primary = max(types, key=FALLBACK_ORDER.index)
    return FinalSegmentation(segs, primary, types, actions, repaired)
