"""Where a config value comes from: four layers and `config --explain KEY`."""
from __future__ import annotations

import pytest

from litseg_nb import config
from litseg_nb.cli import main
from litseg_nb.config import LAYERS, ConfigError, config_sets, explain
from litseg_nb.lite.config import LiteConfig
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.rag.config import RagConfig


@pytest.fixture(autouse=True)
def _no_server_env(monkeypatch):
    for name in ("LITSEG_JUDGE_URLS", "LITSEG_LLM_URLS", "LITSEG_TEACHER_URLS"):
        monkeypatch.delenv(name, raising=False)


def _one(cls, profile, key, overrides=None):
    (e,) = explain(cls, profile, key, overrides)
    return e.value, e.layer, e.source


def test_the_layers_are_documented_in_one_place():
    assert LAYERS == ("default", "profile", "run", "explicit")
    doc = config.__doc__
    assert all(f"``{layer}``" in doc for layer in LAYERS) and "--explain" in doc


def test_each_layer_is_named(monkeypatch):
    assert _one(RagConfig, "full", "llm.temperature") == (0.0, "default", "the default of RagConfig")
    assert _one(RagConfig, "test", "llm.model")[:2] == ("tiny-random", "profile")
    assert "['shared']" in _one(RagConfig, "test", "llm.model")[2]
    assert _one(LitSegConfig, "test", "max_retries") == (1, "profile", "profile table: PROFILES_TABLE['test']['LitSegConfig']")
    with config_sets([("llm.model", "m1"), ("LitSegConfig.llm.model", "m2")]):
        assert _one(RagConfig, "test", "llm.model") == ("m1", "run", "--set llm.model='m1'")
        assert _one(LitSegConfig, "test", "llm.model") == ("m2", "run", "--set LitSegConfig.llm.model='m2'")
    monkeypatch.setenv("LITSEG_JUDGE_URLS", "http://j:1/v1")
    assert _one(LiteConfig, "full", "judge_llm.base_urls") == (("http://j:1/v1",), "run", "$LITSEG_JUDGE_URLS")
    with config_sets([("judge_llm.base_urls", "http://s:1/v1")]):  # --set beats the variable
        assert _one(LiteConfig, "full", "judge_llm.base_urls")[1:] == ("run", "--set judge_llm.base_urls='http://s:1/v1'")
    assert _one(RagConfig, "test", "reranker", {"reranker": "none"})[:2] == ("none", "explicit")
    # Lite's corpus is LitSeg's (LiteConfig.for_profile): not a layer of its own, said as such
    value, layer, source = _one(LiteConfig, "test", "corpus.max_books")
    assert (value, layer) == (LitSegConfig.for_profile("test").corpus.max_books, "explicit") and "derived" in source
    assert [e.key for e in explain(RagConfig, "test", "embedding")][:2] == ["embedding.backend", "embedding.model"]
    for bad in ("nope", "llm.engine.nope", "LiteConfig.llm.model"):
        with pytest.raises(ConfigError, match="has no field"):
            explain(RagConfig, "test", bad)


def test_explain_is_what_for_profile_builds():
    """explain reports the value for_profile builds, whatever the layers say."""
    for cls in (RagConfig, LiteConfig, LitSegConfig):
        for profile in ("test", "smoke", "full"):
            cfg = cls.for_profile(profile).to_dict()
            for e in explain(cls, profile, "llm") + explain(cls, profile, "corpus"):
                section, name = e.key.split(".", 1)
                node = cfg[section]
                for part in name.split("."):
                    node = node[part]
                assert node == (list(e.value) if isinstance(e.value, tuple) and isinstance(node, list) else e.value)
                assert e.layer in LAYERS


def test_config_explain_command(capsys):
    assert main(["config", "--profile", "test", "--notebook", "04", "-p", "llm_max_units=3",
                 "--explain", "selection.max_units"]) == 0
    assert capsys.readouterr().out.strip() == ("04_baselines: BaselinesConfig.selection.max_units = 3  <- explicit: "
                                               "the notebook's parameter (or a keyword override)")
    assert main(["config", "--profile", "smoke", "--explain", "llm.model", "--set", "RagConfig.llm.model=x"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 8 and "05_rag_evaluation: RagConfig.llm.model = 'x'  <- run: --set RagConfig.llm.model='x'" in out
    assert main(["config", "--profile", "test", "--explain", "selection.max_unit_words"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(renamed: selection.skip_units_over_words)" in err

    assert main(["config", "--profile", "test", "--notebook", "05", "-p", "reranker=bogus", "--explain", "llm.model"]) == 2
    assert "parameter 'reranker': 'bogus' is not accepted" in capsys.readouterr().err
    assert main(["config", "--profile", "test", "--notebook", "05", "-p", "nope=1", "--explain", "llm.model"]) == 2
    assert "nope not declared by any selected notebook" in capsys.readouterr().err


def test_config_explain_of_nothing_or_of_a_bad_value_says_so(capsys):
    assert main(["config", "--profile", "test", "--notebook", "02", "--explain", ""]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "--explain ''" in err
    assert main(["config", "--profile", "test", "--notebook", "02", "--set", "llm.temperature=abc",
                 "--explain", "llm.temperature"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'abc' is not accepted" in err and "no field" not in err
