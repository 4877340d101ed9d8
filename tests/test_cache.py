from litseg_nb.core.cache import StepCache, hash_obj
from litseg_nb.config import StageConfig

from fakes import cached


def test_step_cache_skips_finished_work_and_tracks_inputs(tmp_path):
    cfg = StageConfig.for_profile("test")
    calls = []

    def compute():
        calls.append(1)
        return {"value": 42}

    c1 = StepCache("demo", cfg, inputs={"text": "abc"}, root=tmp_path)
    assert cached(c1, compute) == {"value": 42}
    assert cached(StepCache("demo", cfg, inputs={"text": "abc"}, root=tmp_path), compute) == {"value": 42}
    assert len(calls) == 1  # second call served from disk
    cached(StepCache("demo", cfg, inputs={"text": "abd"}, root=tmp_path), compute)
    cached(StepCache("demo", cfg.replace(seed=1), inputs={"text": "abc"}, root=tmp_path), compute)
    assert len(calls) == 3  # changed input and changed config both recompute


def test_hash_obj_hashes_file_contents(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("one")
    h1 = hash_obj({"f": p})
    p.write_text("two")
    assert hash_obj({"f": p}) != h1


def test_code_version_is_part_of_the_key(tmp_path, monkeypatch):
    from litseg_nb.core import cache

    a = StepCache("demo", None, inputs=1, root=tmp_path).key
    monkeypatch.setattr(cache, "code_version", lambda: "other-code")
    assert StepCache("demo", None, inputs=1, root=tmp_path).key != a
