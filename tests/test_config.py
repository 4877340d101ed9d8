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
