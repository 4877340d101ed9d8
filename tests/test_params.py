"""Notebook parameters: typed by the parameters cell, converted and checked before any kernel starts."""
from __future__ import annotations

import pytest

from litseg_nb.front import params
from litseg_nb.config import PROFILES, ConfigError
from litseg_nb.core.paths import NOTEBOOKS_DIR
from litseg_nb.front.runner import run_notebooks

NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.glob("0*.ipynb"))


def _nb(stem: str):
    return NOTEBOOKS_DIR / f"{stem}.ipynb"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_declares_typed_parameters_with_none_sentinel(nb, monkeypatch):
    # full's judge needs a server address (without one, full is refused: tests/test_full_profile.py)
    for var in ("LITSEG_JUDGE_URLS", "LITSEG_RATER_URLS", "LITSEG_RATER2_URLS"):  # 05's judge, 06's raters
        monkeypatch.setenv(var, "http://127.0.0.1:9/v1")
    declared = params.parameters_cell(nb)
    assert list(declared)[:2] == ["profile", "seed"]
    for name, p in declared.items():
        if name not in ("profile", "seed"):
            optional = params._parse_annotation(p.annotation, name)[1]
            assert p.default is None and optional, f"{nb.name}: {name} must default to None (the profile's value)"
    assert nb.stem in params.NOTEBOOK_CONFIGS
    for profile in PROFILES:  # the defaults build every profile's config
        assert params.check_parameters(nb, {"profile": profile, "seed": 0})["profile"] == profile


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameter_annotations_match_their_config_fields(nb):
    """A parameter is typed like the config field it overrides (so conversion and config agree)."""
    import typing

    spec = params.NOTEBOOK_CONFIGS[nb.stem]
    cls = spec.config_class()
    for name, p in params.parameters_cell(nb).items():
        if name == "profile":
            continue
        path = "seed" if name == "seed" else params._target(cls, name, spec)
        owner = params.field_owner(cls, path)
        hint = typing.get_type_hints(owner)[path.split(".")[-1]]
        base = p.annotation.replace(" | None", "")
        # a field that takes None itself (corpus.max_unit_words: never split) keeps the parameter's
        # None for "the profile's value"
        field_base = (hint.__name__ if isinstance(hint, type) else str(hint)).replace(" | None", "")
        assert base == field_base, (name, p.annotation, hint)


@pytest.mark.parametrize("raw, expected", [("true", True), ("False", False), ("1", True), ("0", False),
                                           ("YES", True), ("no", False), (True, True), (0, False)])
def test_bool_conversion(raw, expected):
    assert params.convert("calibrate", raw, "bool | None") is expected


@pytest.mark.parametrize("raw", ["maybe", 2, 1.0, ""])
def test_bool_rejects(raw):
    with pytest.raises(ConfigError, match=r"parameter 'calibrate'.*true/false"):
        params.convert("calibrate", raw, "bool | None")


def test_int_float_none_and_lists():
    assert params.convert("k", "12", "int | None") == 12
    assert params.convert("k", "none", "int | None") is None
    assert params.convert("k", "NULL", "int | None") is None
    for bad in ("abc", 1.5, "1.5", True):
        with pytest.raises(ConfigError, match=r"parameter 'k': .* expected an integer"):
            params.convert("k", bad, "int | None")
    with pytest.raises(ConfigError, match="None is not accepted"):
        params.convert("seed", None, "int")
    assert params.convert("x", "0.5", "float") == 0.5
    assert params.convert("c", "litseg, token,", "tuple[str, ...] | None") == ("litseg", "token")
    assert params.convert("c", ["a"], "tuple[str, ...] | None") == ("a",)
    assert params.convert("s", 46, "str | None") == "46"
    with pytest.raises(ConfigError, match="unsupported annotation"):
        params.parse_parameters("x: dict = {}")
    with pytest.raises(ConfigError, match="not a typed parameter"):
        params.parse_parameters("x = 3")


@pytest.mark.parametrize("stem, values, message", [
    ("02_litseg_annotation", {"calibrate": "maybe"}, r"'calibrate'.*true/false"),
    ("01_preprocessing", {"max_books": -1}, r"'max_books': -1 .*>= 1"),
    ("01_preprocessing", {"max_books": "abc"}, r"'max_books': 'abc' .*integer"),
    ("01_preprocessing", {"max_unit_words": 1.5}, r"'max_unit_words': 1.5 .*integer"),
    ("08_efficiency", {"reference": "nosuch"}, r"'reference': 'nosuch' .*accepted values: .*litseg-lite"),
    ("05_rag_evaluation", {"fusion": "rff"}, r"'fusion': 'rff' .*rrf, weighted"),
    ("05_rag_evaluation", {"question_scope": "everything"}, r"'question_scope'.*common-units"),
    ("07_ablations", {"variants": "lite,wo-x"}, r"'variants': 'wo-x' .*wo-grpo"),
    ("03_lite_distillation", {"annotations_profile": "huge"}, r"'annotations_profile'.*smoke"),
    ("04_baselines", {"llm_max_units": -2}, r"'llm_max_units': -2 .*>= 0"),
    ("02_litseg_annotation", {"max_units": "1.0"}, r"'max_units': '1.0' .*integer"),
])
def test_bad_values_are_named_before_any_kernel_starts(stem, values, message, monkeypatch):
    import papermill

    def boom(*a, **k):  # pragma: no cover - reached only if validation failed to stop the run
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(papermill, "execute_notebook", boom)
    with pytest.raises(ConfigError, match=message):
        run_notebooks("test", only=(stem[:2],), parameters=values)


def test_good_values_are_converted_for_injection():
    out = params.check_parameters(_nb("02_litseg_annotation"), {"profile": "test", "seed": 0, "calibrate": "false",
                                                                "max_units": "3"})
    assert out["calibrate"] is False and out["max_units"] == 3
    out = params.check_parameters(_nb("05_rag_evaluation"), {"profile": "test", "seed": 0, "chunkers": "litseg,token"})
    assert out["chunkers"] == ["litseg", "token"]  # papermill injects lists


def test_notebook_config_applies_parameters_and_none_keeps_the_profile():
    default = params.notebook_config("01_preprocessing", profile="smoke", seed=0, max_books=None, max_unit_words=None)
    assert default.corpus.max_unit_words == 900
    cfg = params.notebook_config("01_preprocessing", profile="smoke", seed=3, max_books=1, max_unit_words="500")
    assert (cfg.seed, cfg.corpus.max_books, cfg.corpus.max_unit_words) == (3, 1, 500)
    cfg = params.notebook_config("07_ablations", profile="test", seed=0, variants="lite, wo-ft", max_units=0)
    assert cfg.ablation_variants == ("lite", "wo-ft") and cfg.ablation_max_units == 0
    cfg = params.notebook_config("02_litseg_annotation", profile="test", seed=0, max_units=None, max_retries=None,
                                 calibrate="false", compare_structured=None, ray_address=None)
    assert cfg.calibrate is False and cfg.compare_structured is True and cfg.ray.address == ""
    cfg = params.notebook_config("02_litseg_annotation", profile="test", seed=0, max_units=None, max_retries=None,
                                 calibrate=None, compare_structured=None, ray_address="local")
    assert cfg.ray.address == "local"
    with pytest.raises(ConfigError, match="missing"):  # a parameter left out would be silently ignored
        params.notebook_config("01_preprocessing", profile="test", seed=0, max_books=1)


def test_ablation_variant_keys_match_the_config_choices():
    from litseg_nb.evaluation import ablation
    from litseg_nb.lite.config import ABLATION_VARIANTS

    assert tuple(v.key for v in ablation.VARIANTS) == ABLATION_VARIANTS
