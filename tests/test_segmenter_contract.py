"""The one segmenter contract (litseg_nb.segmenters): every registered method — each baseline, LitSeg,
LitSeg-Lite, each ``lib:`` preset — has an options class (frozen, rejects unknown keys), a cache key
derived from its options (any change of an option changes it; equal options of two methods do not
collide), and one segment entry returning a typed Segmentation with exact spans covering every
sentence of a small book."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest

from litseg_nb.chunkers.base import ChunkerError
from litseg_nb.chunkers.config import ALL_METHODS, BASELINES, BaselinesConfig
from litseg_nb.chunkers.library import PRESET_NAMES, LibraryConfig
from fakes import TEST_PRESETS, toy_book
from litseg_nb.config import ConfigError, Options
from litseg_nb.lite.config import LiteConfig
from litseg_nb.litseg.config import LitSegConfig
from fakes import ScriptedBackend
from litseg_nb.core.schema import check_coverage
from litseg_nb.segmenters import Method, Models, Segmentation, registry

REGISTERED = [n for n, m in registry.REGISTRY.items() if not m.internal]
EVERY = REGISTERED + list(PRESET_NAMES)


def key(method: Method, cfg, models: Models | None = None) -> str:
    """A short hash of the method's cache-key parts."""
    blob = json.dumps(method.key_parts(cfg, models), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _cfg(method: Method):
    return method.config.for_profile("test")


def test_every_method_is_registered_once_with_the_declared_needs():
    assert tuple(n for n in REGISTERED if registry.REGISTRY[n].baseline) == ALL_METHODS
    assert {n: registry.REGISTRY[n].needs for n in ALL_METHODS} == BASELINES
    assert registry.METHOD_NAMES == ALL_METHODS + registry.SEGMENTERS
    assert set(REGISTERED) == set(registry.METHOD_NAMES)


@pytest.mark.parametrize("name", EVERY)
def test_options_class_is_frozen_rejects_unknown_keys_and_is_held_by_the_config(name):
    m = registry.get_method(name)
    assert issubclass(m.options, Options) and dataclasses.is_dataclass(m.options)
    assert m.options.__dataclass_params__.frozen
    cfg = _cfg(m)
    assert isinstance(cfg, m.config)
    opts = m.options_of(cfg)
    assert isinstance(opts, m.options)
    with pytest.raises(ConfigError, match="nosuch"):
        opts.replace(nosuch=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(opts, "x", 1)
    assert key(m, cfg) == key(m, m.config.for_profile("test"))  # deterministic


def _changed(value, meta):
    """A different valid value of a field (bool flipped, numbers moved inside their bounds, ...)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if meta.get("le") is None or value + 1 <= meta["le"] else value - 1
    if isinstance(value, float):
        lo, hi = meta.get("ge", -math.inf), meta.get("le", math.inf)
        return value + 0.05 if value + 0.05 <= hi else max(lo, value - 0.05)
    if isinstance(value, str):
        return "llm" if value != "llm" else "all-MiniLM-L6-v2"
    if isinstance(value, tuple):
        return value[:-1] if value else (("chunk_size", 7),)
    raise AssertionError(f"no change rule for {value!r}")


def _chain(method: Method) -> list[Method]:
    """``method`` and every method it builds on (a merge variant's base, completion's perplexity+merge)."""
    out = [method]
    for dep in ([method.base] if method.base else []) + list(method.uses):
        out += _chain(dep)
    return out


def _other_valid(cfg, f):
    """``cfg`` with field ``f`` changed to another valid value (an int also by 2: C99's odd mask), or None."""
    value = getattr(cfg, f.name)
    candidates = [_changed(value, dict(f.metadata))] if not isinstance(value, (dict, list)) else []
    if isinstance(value, int) and not isinstance(value, bool):
        candidates.append(value + 2)
    for c in candidates:
        try:
            return cfg.replace(**{f.name: c})
        except (ConfigError, AssertionError):
            continue
    return None


def _stage_knobs(method: Method, cfg) -> list[str]:
    """The stage config's fields that feed the options of ``method`` or of a method it builds on."""
    out = []
    for f in dataclasses.fields(cfg):
        if not f.init or dataclasses.is_dataclass(getattr(cfg, f.name)) or f.name == "profile":
            continue
        other = _other_valid(cfg, f)
        if other is None:
            continue
        if any(m.options_of(other) != m.options_of(cfg) for m in _chain(method)):
            out.append(f.name)
    return out


@pytest.mark.parametrize("name", REGISTERED + list(TEST_PRESETS))
def test_changing_any_option_changes_the_key(name):
    m = registry.get_method(name)
    cfg = _cfg(m)
    own = {f.name for f in dataclasses.fields(m.options)}
    knobs = _stage_knobs(m, cfg)
    if m.build is None and m.options.of.__func__ is Options.of.__func__:
        assert own <= set(knobs), (own, knobs)  # every field of a projected options class is a knob
    assert knobs or not own, name  # paragraph has no knob: its key is its name
    base = key(m, cfg)
    for knob in knobs:
        f = next(f for f in dataclasses.fields(cfg) if f.name == knob)
        other = _other_valid(cfg, f)
        assert key(m, other) != base, f"{name}: changing {knob} left the key unchanged"


def test_the_key_holds_what_else_decides_the_chunks():
    b = BaselinesConfig.for_profile("test")
    ppl = registry.get_method("perplexity")
    # perplexity_max_context 0 = the LLM's context: the key holds the value used
    assert key(ppl, b) != key(ppl, b.replace(llm={"max_model_len": 1024}))
    assert key(ppl, b) == key(ppl, b.replace(perplexity_max_context=b.llm.max_model_len))
    # the models it is given
    assert key(ppl, b, Models(ScriptedBackend(model_id="a"))) != key(ppl, b, Models(ScriptedBackend(model_id="b")))
    # the merge variants' bases and completion's perplexity+merge chunks
    pm = registry.get_method("perplexity+merge")
    assert key(pm, b) != key(pm, b.replace(perplexity_merge_threshold=0.3))
    assert key(pm, b) == key(pm, b.replace(perplexity_threshold=0.9))  # the merge base splits at its own θ
    comp = registry.get_method("perplexity+merge+completion")
    assert key(comp, b) != key(comp, b.replace(merge_target_tokens=100))
    # LitSeg: its whole configuration and the length reference in force; Lite: its inference knobs
    ls = registry.get_method("litseg")
    c = LitSegConfig.for_profile("test")
    assert key(ls, c) != key(ls, c.replace(max_retries=c.max_retries + 1))
    assert key(ls, c) != key(ls, c.replace(length_reference=77))
    lite = registry.get_method("litseg-lite")
    lc = LiteConfig.for_profile("test")
    for knob in ("infer_max_new_tokens", "infer_retries", "seed"):
        assert key(lite, lc) != key(lite, lc.replace(**{knob: getattr(lc, knob) + 1})), knob


def test_equal_options_of_two_methods_do_not_collide():
    b = BaselinesConfig.for_profile("test")
    mm, lm = registry.get_method("margin+merge"), registry.get_method("lumber+merge")
    assert mm.options_of(b) == lm.options_of(b) and key(mm, b) != key(lm, b)
    b0 = b.replace(perplexity_threshold=0.0, perplexity_merge_threshold=0.0)
    ppl, base = registry.REGISTRY["perplexity"], registry.PERPLEXITY_MERGE_BASE
    assert ppl.options_of(b0) == base.options_of(b0) and key(ppl, b0) != key(base, b0)
    presets = [registry.get_method(p) for p in TEST_PRESETS]
    lc = LibraryConfig.for_profile("test")
    assert len({key(p, lc) for p in presets}) == len(presets)


# ------------------------------------------------------------------ the segment entry, on a small book
STORY = " ".join(f"Sentence number {i} tells of event {i}." for i in range(1, 13))
BOOK = toy_book(STORY + "\n\nA second paragraph starts here. It ends here.\n\nA third one, short.")


def _reply(conv):
    text = conv[-1]["content"]
    if "ID " in text:  # LumberChunker: the first ID after the first one
        import re

        ids = [int(x) for x in re.findall(r"ID (\d+)", text)]
        return f"Answer: ID {ids[1] if len(ids) > 1 else ids[0]}"
    return "- A fact about the story."  # propositions; LitSeg / Lite: invalid, they fall back (counted)


@pytest.fixture(scope="module")
def models():
    from litseg_nb.llm.embeddings import load_embedder
    from litseg_nb.config import EmbeddingConfig

    return Models(ScriptedBackend(reply_fn=_reply, logprob_fn=lambda conv, c: {"1": -1.2, "2": -0.4}),
                  load_embedder(EmbeddingConfig()))


CHEAP = ["token", "recursive", "semantic", "paragraph", "margin", "lumber", "margin+merge", "lumber+merge",
         "proposition", "litseg", "litseg-lite", *TEST_PRESETS]


@pytest.mark.parametrize("name", CHEAP)
def test_segment_entry_returns_typed_exact_covering_chunks(name, models, fresh_dirs):
    m = registry.get_method(name)
    cfg = _cfg(m)
    items = [(BOOK, u) for u in BOOK.units]
    result = registry.segment_units(m, items, cfg, models)
    assert isinstance(result, Segmentation) and len(result.per_unit) == len(items)
    assert isinstance(result.fallbacks, int) and isinstance(result.invalid_replies, int)
    for (b, u), cs in zip(items, result.per_unit):
        assert cs and all(c.unit_id == u.unit_id and c.method == name for c in cs)
        assert check_coverage(u, cs).ok, name
        for c in cs:
            if c.is_source_span:  # exact character spans into the book text
                assert "".join(b.text[x:y] for x, y in c.spans).strip() == c.main_text.strip()
                assert all(u.start <= x < y <= u.end for x, y in c.spans)
    if name in ("litseg", "litseg-lite"):  # the scripted replies are invalid: every unit fell back, counted
        assert result.fallbacks == len(items)
    chunks, counters = registry.chunk_units(name, items, cfg, models.backend, models.embedder)
    assert [c.to_json() for c in chunks] == [c.to_json() for c in result.chunks]
    assert counters["fallbacks"] == result.fallbacks


def test_a_method_without_its_model_is_refused_before_it_runs():
    items = [(BOOK, BOOK.units[0])]
    with pytest.raises(ChunkerError, match="needs an LLM backend"):
        registry.segment_units("lumber+merge", items, BaselinesConfig.for_profile("test"))
    with pytest.raises(ChunkerError, match="takes a LitSegConfig"):
        registry.segment_units("litseg", items, BaselinesConfig.for_profile("test"), Models(ScriptedBackend()))
