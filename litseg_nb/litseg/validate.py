"""Validation and fallback of LitSeg outputs (paper section 3.1.2), shared by LitSeg and LitSeg-Lite.

After the last retry :func:`finalize_segments` applies the fallback chain ``schema_repair`` < ``index_repair``
< ``coverage_repair`` (the paper's left-adjacent gap rule) < ``whole_unit`` (the paper's last resort)."""
from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..llm.replies import extract_json, is_json_int, parse_json_reply, read_int  # noqa: F401 (re-exported)
from .prompting import normalize_words, reply_placeholders

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


@dataclass
class ValidationResult:
    """Outcome of validating one stage-3 reply; ``segments`` are as read (not repaired), for the fallback."""

    syntax_ok: bool
    semantic_ok: bool
    errors: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    item_ok: list[bool] = field(default_factory=list)  # per entry of the reply's 'segments' list
    schema_fixes: list[str] = field(default_factory=list)
    index_fixes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.syntax_ok and self.semantic_ok

    def to_json(self) -> dict[str, Any]:
        return {"syntax_ok": self.syntax_ok, "semantic_ok": self.semantic_ok, "errors": list(self.errors),
                "warnings": list(self.warnings), "segments": [s.to_json() for s in self.segments],
                "schema_fixes": list(self.schema_fixes), "index_fixes": list(self.index_fixes)}


# ------------------------------------------------------------------------------ template echoes
ECHO = "template echo"  # how an error about a copied placeholder starts (notebooks show it as the verdict)
_ECHO_MIN_WORDS = 4  # a shorter piece of a placeholder may be a real answer ("The letter")


def template_echo(value: Any) -> str | None:
    """The prompt's placeholder that ``value`` copies, else ``None``: the same words; or mostly (three quarters,
    at least four words) the placeholder's opening words, as a copy cut short; or the whole placeholder inside.

    The placeholders are the description strings of the verbatim templates' reply formats
    (:func:`~litseg_nb.litseg.prompting.reply_placeholders`): a reply repeating one answers nothing."""
    if not isinstance(value, str):
        return None
    v = normalize_words(value)
    words = v.split()
    for p in reply_placeholders() if words else ():
        same = len(list(itertools.takewhile(lambda t: t[0] == t[1], zip(words, p.split()))))
        if v == p or (same >= _ECHO_MIN_WORDS and 4 * same >= 3 * len(words)):
            return p
        if len(p.split()) >= _ECHO_MIN_WORDS and f" {p} " in f" {v} ":
            return p
    return None


def echo_error(where: str, value: Any) -> str | None:
    """``"template echo: <where> copies the prompt's placeholder ..."`` when ``value`` is one, else ``None``."""
    p = template_echo(value)
    return None if p is None else f"{ECHO}: {where} copies the prompt's placeholder text ({short_repr(p, 60)})"


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
    echo = echo_error(repr(key), obj[key])
    return [echo] if echo else []


validate_stage1 = functools.partial(_validate_string_field, key="step_1_events")
validate_stage2 = functools.partial(_validate_string_field, key="step_2_threads")


# ------------------------------------------------------------------------------------ stage 3
def segmentation_object(obj: Any) -> Any:
    """The object holding ``segments``: top level (LitSeg), ``step3`` (Lite's E.2) or the last step (E.4)."""
    if isinstance(obj, dict) and "segments" not in obj:
        for key in ("step3", "step2", "step1"):
            if isinstance(obj.get(key), dict) and "segments" in obj[key]:
                return obj[key]
        if isinstance(obj.get("step3"), dict):
            return obj["step3"]
    return obj


def short_repr(value: Any, limit: int = 40) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)[:200]
    except (ValueError, RecursionError, TypeError):
        return ""


def nested_ranges(segments: Sequence[Segment], which: Sequence[int]) -> list[tuple[int, int]]:
    """``(i, j)`` for every segment ``i`` (of ``which``) whose main range lies inside segment ``j``'s."""
    order = sorted(which, key=lambda i: (segments[i].from_idx, -segments[i].to_idx, i))
    out: list[tuple[int, int]] = []
    best = -1
    for i in order:
        if best >= 0 and segments[best].to_idx >= segments[i].to_idx:
            out.append((i, best))
        else:
            best = i
    return out


def validate_segments(obj: Any, n_sentences: int) -> ValidationResult:
    """Syntax and semantic validation of a parsed stage-3 reply (``None``: unparsable)."""
    n = int(n_sentences)
    if obj is None:
        return ValidationResult(False, False, ["reply is not parsable JSON"])
    if not isinstance(obj, dict):
        return ValidationResult(False, False, ["reply is not a JSON object"])
    warnings = [f"missing key {k!r}" for k in ("chapter_title", "step_3_turning_points") if k not in obj]
    raw = obj.get("segments")
    if not isinstance(raw, list):
        return ValidationResult(False, False, ["'segments' missing or not a list"], warnings=warnings)
    # the per-segment checks: THE definition of a valid entry (``item_ok``, also Lite's format reward);
    # ``segments``: every entry whose indices could be read (possibly invalid), as read (the fallback repairs)
    res = ValidationResult(False, False, warnings=warnings)
    syntax, semantic, segments, seg_item, item_ok = res.errors, [], res.segments, [], res.item_ok
    for k, item in enumerate(raw, 1):
        missing = ([key for key in ("subtitle", "from_idx", "to_idx") if key not in item]
                   if isinstance(item, dict) else None)
        if missing is None or missing:
            why = "not an object" if missing is None else f"missing {', '.join(missing)}"
            syntax.append(f"segment {k}: {why}")
            res.schema_fixes.append(f"segment {k}: skipped ({why})")
            item_ok.append(False)
            continue
        ok = True
        subtitle = item["subtitle"]
        if not isinstance(subtitle, str):
            syntax.append(f"segment {k}: subtitle is not a string")
            subtitle = _as_text(subtitle)
            res.schema_fixes.append(f"segment {k}: subtitle {short_repr(item['subtitle'])} read as text")
            ok = False
        echo = echo_error(f"segment {k}: subtitle", subtitle)
        if echo:  # the range may be real: the repair keeps it, without the copied subtitle
            semantic.append(echo)
            res.schema_fixes.append(f"segment {k}: subtitle dropped ({ECHO})")
            subtitle = ""
            ok = False
        lo, hi = read_int(item["from_idx"]), read_int(item["to_idx"])
        for name, val, conv in (("from_idx", item["from_idx"], lo), ("to_idx", item["to_idx"], hi)):
            if conv is None:
                semantic.append(f"segment {k}: {name} {short_repr(val)} is not an integer")
                ok = False
            elif not is_json_int(val):
                semantic.append(f"segment {k}: {name} {short_repr(val)} is not a JSON integer")
                res.index_fixes.append(f"segment {k}: {name} {short_repr(val)} read as {conv}")
                ok = False
        ctx_raw = [] if item.get("context_idx") is None else item["context_idx"]  # absent or null: no context
        if not isinstance(ctx_raw, list):
            syntax.append(f"segment {k}: context_idx is not a list")
            res.schema_fixes.append(f"segment {k}: context_idx {short_repr(ctx_raw)} ignored (not a list)")
            ctx_raw = []
            ok = False
        ctx: list[int] = []
        for c in ctx_raw:
            ci = read_int(c)
            if ci is None or not is_json_int(c):
                semantic.append(f"segment {k}: context index {short_repr(c)} is not an integer")
                res.index_fixes.append(f"segment {k}: dropped context index {short_repr(c)} (not an integer)"
                                       if ci is None else f"segment {k}: context index {short_repr(c)} read as {ci}")
                ok = False
            if ci is not None:
                ctx.append(ci)
        if lo is None or hi is None:
            res.index_fixes.append(f"segment {k}: skipped (an index is not an integer)")
            item_ok.append(False)
            continue
        if not (1 <= lo <= n and 1 <= hi <= n):
            semantic.append(f"segment {k}: range {lo}-{hi} outside 1..{n}")
            ok = False
        if lo > hi:
            semantic.append(f"segment {k}: from_idx {lo} > to_idx {hi}")
            ok = False
        bad_ctx = [c for c in ctx if not 1 <= c <= n]
        if bad_ctx:
            semantic.append(f"segment {k}: context indices {bad_ctx[:10]} outside 1..{n}")
            ok = False
        segments.append(Segment(subtitle, lo, hi, tuple(ctx)))
        seg_item.append(len(item_ok))
        item_ok.append(ok)
    # a main range inside another one (exact duplicates included) repeats text: the later one is invalid
    valid_range = [i for i, s in enumerate(segments) if 1 <= s.from_idx <= s.to_idx <= n]
    for i, j in nested_ranges(segments, valid_range):
        s, t = segments[i], segments[j]
        what = "duplicates the range of" if (s.from_idx, s.to_idx) == (t.from_idx, t.to_idx) else "lies inside"
        semantic.append(f"segment {seg_item[i] + 1}: range {s.from_idx}-{s.to_idx} {what} "
                        f"segment {seg_item[j] + 1} ({t.from_idx}-{t.to_idx})")
        item_ok[seg_item[i]] = False
    if not raw:
        semantic.append("no segments")
    if segments:
        if segments[0].from_idx != 1:
            semantic.append(f"first segment starts at {segments[0].from_idx}, not 1")
        if segments[-1].to_idx != n:
            semantic.append(f"last segment ends at {segments[-1].to_idx}, not {n}")
        if any(a.from_idx > b.from_idx for a, b in zip(segments, segments[1:])):
            semantic.append("segments are not in source order")
        covered = coverage_mask([s for s in segments if 1 <= s.from_idx <= s.to_idx <= n], n)
        missing = [i for i in range(1, n + 1) if not covered[i]]
        if missing:
            semantic.append(f"sentences in no main range: {_runs(missing)}")
        ctx_only = sorted({c for s in segments for c in s.context_idx if 1 <= c <= n and not covered[c]})
        if ctx_only:
            semantic.append(f"sentences only in context_idx: {_runs(ctx_only)}")
    res.syntax_ok = not res.errors
    res.semantic_ok = res.syntax_ok and not semantic
    res.errors += semantic
    return res


def coverage_mask(segments: Sequence[Segment], n: int) -> list[bool]:
    """``mask[i]`` (1-based, ``len = n + 2``): sentence ``i`` lies in some main range (clamped to 1..n)."""
    diff = [0] * (n + 2)
    for s in segments:
        a, b = max(1, s.from_idx), min(n, s.to_idx)
        if a <= b:
            diff[a] += 1
            diff[b + 1] -= 1
    return [False] + [run > 0 for run in itertools.accumulate(diff[1:n + 1])] + [False]


def _runs(indices: Sequence[int]) -> str:
    runs = [[i for _, i in g] for _, g in itertools.groupby(enumerate(sorted(indices)), lambda t: t[1] - t[0])]
    out = [str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs]
    return ", ".join(out[:20]) + (" ..." if len(out) > 20 else "")


# ------------------------------------------------------------------------------- fallbacks
def sanitize_segments(segments: Sequence[Segment], n: int) -> tuple[list[Segment], list[str]]:
    """Make every segment a valid, non-nested range in ``1..n`` in source order; returns the actions taken."""
    actions: list[str] = []
    out: list[tuple[int, Segment]] = []
    for k, s in enumerate(segments, 1):
        lo, hi = s.from_idx, s.to_idx
        if lo > hi:
            lo, hi = hi, lo
            actions.append(f"segment {k}: swapped reversed range {s.from_idx}-{s.to_idx}")
        if hi < 1 or lo > n:
            actions.append(f"segment {k}: dropped range {s.from_idx}-{s.to_idx} outside 1..{n}")
            continue
        if lo < 1 or hi > n:
            actions.append(f"segment {k}: clamped range {lo}-{hi} to 1..{n}")
            lo, hi = max(1, lo), min(n, hi)
        ctx = {c for c in s.context_idx if 1 <= c <= n and not lo <= c <= hi}
        if len(ctx) != len(s.context_idx):
            actions.append(f"segment {k}: removed {len(s.context_idx) - len(ctx)} invalid/redundant context indices")
        out.append((k, Segment(s.subtitle, lo, hi, tuple(sorted(ctx)))))
    segs = [t[1] for t in out]
    drop = set()
    for i, j in nested_ranges(segs, range(len(segs))):
        s, t = segs[i], segs[j]
        what = "duplicate of" if (s.from_idx, s.to_idx) == (t.from_idx, t.to_idx) else "inside"
        actions.append(f"segment {out[i][0]}: dropped range {s.from_idx}-{s.to_idx} ({what} segment "
                       f"{out[j][0]}, {t.from_idx}-{t.to_idx})")
        drop.add(i)
    kept = [(s.from_idx, s.to_idx, i, s) for i, s in enumerate(segs) if i not in drop]
    ordered = [t[3] for t in sorted(kept, key=lambda t: (t[0], t[1], t[2]))]
    if [t[3] for t in kept] != ordered:
        actions.append("reordered segments into source order")
    return ordered, actions


def repair_coverage(segments: Sequence[Segment], n: int) -> tuple[list[Segment], list[int]]:
    """The paper's gap fallback on sanitised ``segments`` (at least one): an uncovered run joins its left-adjacent
    segment (right-adjacent at the start). Returns the segments in source order and the indices added."""
    segs = sorted(segments, key=lambda s: (s.from_idx, s.to_idx))
    lo = [s.from_idx for s in segs]
    hi = [s.to_idx for s in segs]
    last_ending = {h: k for k, h in enumerate(hi)}  # the last one in source order ending there
    first_starting = {x: k for k, x in reversed(list(enumerate(lo)))}
    covered = coverage_mask(segs, n)
    repaired: list[int] = []
    for is_covered, run in itertools.groupby(range(1, n + 1), key=lambda i: covered[i]):
        if is_covered:
            continue
        gap = list(run)
        repaired.extend(gap)
        k = last_ending.get(gap[0] - 1)
        if k is not None:
            hi[k] = gap[-1]
        else:  # a gap with no segment to its left starts at 1: extend the first one after it
            lo[first_starting[gap[-1] + 1]] = gap[0]
    out = [Segment(s.subtitle, lo[k], hi[k], tuple(c for c in s.context_idx if not lo[k] <= c <= hi[k]))
           for k, s in enumerate(segs)]
    return out, repaired


@dataclass
class FinalSegmentation:
    """Segments after the full fallback chain: always a full cover of ``1..n``."""

    segments: list[Segment]
    fallback: str  # most severe of fallback_types
    fallback_types: list[str]
    actions: list[str]
    repaired_indices: list[int]


def finalize_segments(result: ValidationResult | None, n: int) -> FinalSegmentation:
    """The fallback chain on a unit's last validation result: sanitise, gap repair, else the whole unit."""
    if n < 1:
        raise ValueError(f"a unit needs at least one sentence, got n={n}")
    result = result or ValidationResult(False, False)
    if result.ok:
        return FinalSegmentation(list(result.segments), "none", ["none"], [], [])
    segs, schema_actions, index_actions = list(result.segments), list(result.schema_fixes), list(result.index_fixes)
    if segs:
        segs, sanitized = sanitize_segments(segs, n)
        index_actions += sanitized
    if not segs:
        if not result.errors:
            why = "unparsable output"
        elif result.errors[0] in ("reply is not parsable JSON", "reply is not a JSON object"):
            why = result.errors[0]
        else:
            why = "no usable segment: " + "; ".join(result.errors[:3])
        return FinalSegmentation([Segment("", 1, n, ())], "whole_unit", ["whole_unit"], [why], [])
    types = []
    if schema_actions:
        types.append("schema_repair")
    if index_actions:
        types.append("index_repair")
    segs, repaired = repair_coverage(segs, n)
    actions = schema_actions + index_actions
    if repaired:
        types.append("coverage_repair")
        actions.append(f"appended uncovered sentences {_runs(repaired)} to adjacent segments")
    if not types:  # not expected: every validation error above maps to an action; say so if not
        types = ["index_repair"]
        actions.append("used the segments as read although validation failed: "
                       + "; ".join(result.errors[:3]))
    primary = max(types, key=FALLBACK_ORDER.index)
    return FinalSegmentation(segs, primary, types, actions, repaired)
