"""The one profile table (litseg_nb.config.PROFILES_TABLE) covers every stage config in every profile."""
import copy
import importlib

import pytest

from litseg_nb.config import PROFILES, ConfigError, StageConfig
from litseg_nb.config import PROFILES_TABLE

STAGE_MODULES = ("litseg_nb.corpus", "litseg_nb.evaluation.efficiency", "litseg_nb.rag.config", "litseg_nb.evaluation.segment_quality",
                 "litseg_nb.evaluation.boundaries", "litseg_nb.lite.config", "litseg_nb.litseg.config",
                 "litseg_nb.chunkers.config", "litseg_nb.chunkers.library")


def _stage_classes():
    for m in STAGE_MODULES:
        importlib.import_module(m)
    return {c.__name__: c for c in StageConfig.__subclasses__() if c.__module__.startswith("litseg_nb.")}


def test_every_stage_has_a_row_in_every_profile_and_no_row_is_stray():
    stages = _stage_classes()
    assert len(stages) == 9, sorted(stages)
    for profile in PROFILES:
        rows = set(PROFILES_TABLE[profile]) - {"shared"}
        assert rows == set(stages), (profile, rows ^ set(stages))
        assert set(PROFILES_TABLE[profile]["shared"]) == {"llm", "embedding", "corpus", "selection"}


def test_no_stage_keeps_its_own_profile_method():
    # the values live in the table only: no stage overrides StageConfig.profile_defaults again
    for name, cls in _stage_classes().items():
        assert "profile_defaults" not in vars(cls), name


@pytest.mark.parametrize("name", ["LitSegConfig", "RagConfig", "BoundaryConfig"])
def test_unknown_profile_is_a_config_error(name):
    cls = _stage_classes()[name]
    with pytest.raises(ConfigError, match="unknown profile 'huge'"):
        cls.for_profile("huge")
    with pytest.raises(ConfigError, match="unknown profile 'huge'"):
        cls.profile_defaults("huge")


def test_building_configs_never_writes_into_the_table():
    before = copy.deepcopy(PROFILES_TABLE)
    for cls in _stage_classes().values():
        cls.for_profile("test", llm={"batch_size": 3}).replace(corpus={"max_books": 1})
    assert PROFILES_TABLE == before


@pytest.mark.parametrize("sets", [[], [("LiteConfig.llm.model", "student-x")], [("llm.model", "any-y")],
                                  [("LitSegConfig.llm.model", "teacher-z")]])
def test_litseg_names_the_student_lite_builds(sets):
    # LitSegConfig.student_model reads the profile table (litseg.config no longer imports lite.config):
    # it must name the model LiteConfig.for_profile builds, --set overrides included
    from litseg_nb.config import config_sets
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.litseg.config import LitSegConfig

    with config_sets(sets):
        for profile in PROFILES:
            assert LitSegConfig.for_profile(profile).student_model() == LiteConfig.for_profile(profile).llm.model
