import dataclasses

import pytest

from litseg_nb.config import PROFILES, ConfigError, LLMConfig, StageConfig


@dataclasses.dataclass(frozen=True)
class _DemoConfig(StageConfig):
    window: int = 10

    @classmethod
    def profile_defaults(cls, profile):
        return {"window": {"test": 2, "smoke": 5, "full": 50}[profile]}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_builds(profile):
    cfg = _DemoConfig.for_profile(profile)
    assert cfg.profile == profile
    assert cfg.window == {"test": 2, "smoke": 5, "full": 50}[profile]
    assert profile in cfg.describe() and cfg.llm.model in cfg.describe()


def test_overrides_merge_into_nested_configs():
    cfg = _DemoConfig.for_profile("smoke", window=7, llm={"batch_size": 3})
    assert cfg.window == 7
    assert cfg.llm.batch_size == 3
    assert cfg.llm.model == "smollm2-135m-instruct"  # untouched nested values keep the profile's
    assert isinstance(cfg.llm, LLMConfig)


def test_unknown_top_level_key_is_named():
    with pytest.raises(ConfigError, match="'windw'"):
        _DemoConfig.for_profile("test", windw=3)


def test_unknown_nested_key_is_named():
    with pytest.raises(ConfigError, match=r"\.llm: unknown key\(s\) 'bach_size'"):
        _DemoConfig.for_profile("test", llm={"bach_size": 3})


def test_unknown_profile():
    with pytest.raises(ConfigError, match="unknown profile 'huge'"):
        _DemoConfig.for_profile("huge")


def test_configs_are_frozen_and_fingerprints_track_values():
    a = _DemoConfig.for_profile("test")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.window = 3  # type: ignore[misc]
    b = a.replace(window=3)
    assert b.window == 3 and a.window == 2
    assert a.fingerprint() == _DemoConfig.for_profile("test").fingerprint()
    assert a.fingerprint() != b.fingerprint()


def test_lists_become_tuples():
    cfg = _DemoConfig.for_profile("test", corpus={"books": ["a", "b"]})
    assert cfg.corpus.books == ("a", "b")


def test_closed_value_sets_and_types_are_checked_when_built():
    from litseg_nb.chunkers.config import BaselinesConfig
    from litseg_nb.config import EmbeddingConfig
    from litseg_nb.rag.config import RagConfig

    cases = [
        (lambda: _DemoConfig.for_profile("test", corpus={"unit_selection": "random"}),
         r"CorpusConfig.unit_selection: 'random' .*first, questions"),
        (lambda: _DemoConfig.for_profile("test", llm={"backend": "nope"}), r"LLMConfig.backend.*hf, vllm, openai"),
        (lambda: _DemoConfig.for_profile("test", llm={"dtype": "fp8"}), r"LLMConfig.dtype"),
        (lambda: _DemoConfig.for_profile("test", llm={"device": "gpu"}), r"LLMConfig.device"),
        (lambda: EmbeddingConfig(backend="nope"), r"EmbeddingConfig.backend"),
        (lambda: _DemoConfig.for_profile("test", corpus={"datasets": ("gutenqa", "imdb")}), r"'imdb'"),
        (lambda: _DemoConfig.for_profile("test", corpus={"max_books": -1}), r"max_books: -1 is below the minimum 0"),
        (lambda: _DemoConfig.for_profile("test", llm={"batch_size": 1.5}), r"batch_size: expected int, got 1.5"),
        (lambda: _DemoConfig.for_profile("test", window="3"), r"window: expected int"),
        (lambda: RagConfig.for_profile("test", fusion="rff"), r"RagConfig.fusion.*rrf, weighted"),
        (lambda: RagConfig.for_profile("test", question_scope="x"), r"question_scope"),
        (lambda: BaselinesConfig.for_profile("test", methods=("token", "nosuch")), r"'nosuch'"),
    ]
    for build, message in cases:
        with pytest.raises(ConfigError, match=message):
            build()
    assert _DemoConfig.for_profile("test", llm={"temperature": 1}).llm.temperature == 1  # int for float is fine


@pytest.mark.parametrize("profile", PROFILES)
def test_every_stage_config_builds_in_every_profile(profile):
    from litseg_nb.front.params import NOTEBOOK_CONFIGS

    for spec in NOTEBOOK_CONFIGS.values():
        cls = spec.config_class()
        assert cls.for_profile(profile).profile == profile
        assert not hasattr(cls, "STAGE")


def test_baselines_label_names_a_shortened_proposition_cap():
    from litseg_nb.chunkers import BaselinesConfig

    assert "proposition replies capped at 128 tokens" in BaselinesConfig.for_profile("smoke").describe()
    assert "proposition replies capped" not in BaselinesConfig.for_profile("full").describe()
