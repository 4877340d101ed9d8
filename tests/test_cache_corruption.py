"""Corrupt caches are recovered from with a warning naming the file(s); the run continues."""
from __future__ import annotations

import sqlite3

import pytest

from litseg_nb.core.cache import CacheWarning, StepCache
from litseg_nb.llm.request_cache import RequestCache

from fakes import cached


def test_truncated_step_cache_entry_is_a_miss_and_is_replaced(tmp_path):
    c = StepCache("demo", None, inputs={"x": 1}, root=tmp_path)
    c.save({"value": list(range(50))})
    c.path.write_text(c.path.read_text()[:17], encoding="utf-8")  # truncated JSON
    calls = []

    def compute():
        calls.append(1)
        return {"value": 7}

    with pytest.warns(CacheWarning, match=str(c.path)):
        assert cached(StepCache("demo", None, inputs={"x": 1}, root=tmp_path), compute) == {"value": 7}
    assert calls == [1]
    # the entry was replaced: the next run is a hit
    assert cached(StepCache("demo", None, inputs={"x": 1}, root=tmp_path), compute) == {"value": 7}
    assert calls == [1]


def test_corrupt_step_cache_entry_via_exists_and_load(tmp_path):
    """Callers that use ``exists()`` then ``load()`` also see a corrupt entry as a miss."""
    c = StepCache("demo", None, inputs=2, root=tmp_path)
    c.dir.mkdir(parents=True)
    c.path.write_bytes(b"\xff\xfe not json")
    with pytest.warns(CacheWarning, match="corrupt"):
        assert not StepCache("demo", None, inputs=2, root=tmp_path).exists()
    c.save([1, 2])
    fresh = StepCache("demo", None, inputs=2, root=tmp_path)
    assert fresh.exists() and fresh.load() == [1, 2]


def test_corrupt_request_cache_is_moved_aside_and_the_run_continues(tmp_path):
    db = tmp_path / "llm_requests.sqlite"
    cache = RequestCache(db)
    cache.put_many([("k1", "chat", "m", {"v": 1})])
    cache.close()
    db.write_bytes(b"this is not a database" * 100)
    with pytest.warns(CacheWarning) as rec:
        cache = RequestCache(db)
    msg = str(rec[0].message)
    assert str(db) in msg and cache.moved_aside is not None and str(cache.moved_aside) in msg
    assert cache.moved_aside.read_bytes().startswith(b"this is not a database")
    assert len(cache) == 0
    cache.put_many([("k2", "chat", "m", {"v": 2})])
    assert cache.get_many(["k2"]) == {"k2": {"v": 2}}
    cache.close()


def test_unreadable_request_cache_row_is_a_miss(tmp_path):
    db = tmp_path / "c.sqlite"
    cache = RequestCache(db)
    cache.put_many([("k1", "chat", "m", {"v": 1}), ("k2", "chat", "m", {"v": 2})])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE requests SET value = '{\"v\": ' WHERE key = 'k1'")
    with pytest.warns(CacheWarning, match="unreadable entry"):
        assert cache.get_many(["k1", "k2"]) == {"k2": {"v": 2}}
    cache.close()
