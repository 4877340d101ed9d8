"""The rehearsal reaches every configuration ``full`` builds (litseg_nb.front.rehearse's config audit).

* every stage config class of the package is known to the rehearsal's overrides;
* with those overrides, no stage config in ``full`` keeps a real model, split, device, engine or server;
* the audit names the notebook and field of a planted uncovered config (a class the overrides do
  not know, and a package class left out of them: notebook 06's BoundaryConfig).
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from litseg_nb.front import rehearse as ra
from litseg_nb.config import StageConfig, config_sets
from litseg_nb.front.rehearse import notebook_sets
from litseg_nb.front.params import stage_config_classes

ROOT = Path(__file__).resolve().parents[1] / "litseg_nb"
NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07", "08")


def SETS(number):  # noqa: N802 - the rehearsal's overrides with placeholder model folders
    return notebook_sets(number, "/m3", "/rr")


@dataclasses.dataclass(frozen=True)
class PlantedConfig(StageConfig):
    """A stage config the rehearsal's overrides do not know (defined here, not in the package)."""

    rounds: int = 3


def _subclass_names_in_source() -> set[str]:
    """Classes of the package deriving from StageConfig (directly or through one of them), by ast."""
    bases: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
    found, grew = {"StageConfig"}, True
    while grew:
        new = {n for n, b in bases.items() if b & found} - found
        found |= new
        grew = bool(new)
    return found - {"StageConfig"}


def test_every_stage_config_class_of_the_package_is_known():
    assert {c.__name__ for c in stage_config_classes()} == _subclass_names_in_source()


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_rehearsal_sets_reach_every_stage_config_in_full(number, monkeypatch):
    monkeypatch.setenv("LITSEG_JUDGE_URLS", "http://127.0.0.1:8100/v1")
    with config_sets(notebook_sets(number, "/m3", "/rr")):
        bad = {c.__name__: ra.real_targets(c.for_profile("full")) for c in stage_config_classes()}
    assert not {k: v for k, v in bad.items() if v}
    # and without them every class points at full's real models (the check is not vacuous)
    for c in stage_config_classes():
        assert any("full's model" in x for x in ra.real_targets(c.for_profile("full"))), c.__name__


def test_real_targets_names_each_kind_of_field():
    from litseg_nb.config import CorpusConfig, LLMConfig

    issues = ra.real_targets(LLMConfig(backend="vllm", model="Qwen/Qwen3-8B", device="cuda",
                                       base_urls=("http://10.0.0.5:8000/v1", "http://127.0.0.1:8001/v1")))
    assert [i.split(":")[0] for i in issues] == ["model", "device", "engine", "base_urls"]
    assert "10.0.0.5" in issues[-1] and "127.0.0.1" not in issues[-1]
    assert ra.real_targets(LLMConfig(backend="vllm", model="smollm2-135m-instruct", device="cpu",
                                     engine={"enforce_eager": True})) == []
    assert ra.real_targets(CorpusConfig(datasets=("literaryqa",), literaryqa_split="test", max_books=2)) == [
        "literaryqa_split: 'test' is full's LiteraryQA split (held locally: validation)"]
    assert ra.real_targets(CorpusConfig(datasets=("gutenqa",)))[0].startswith("max_books: 0")


@pytest.fixture
def audit(tmp_path, monkeypatch):
    """The audit installed as in a rehearsal kernel of notebook 06; returns the uncovered lines read back."""
    sink = tmp_path / "audit.jsonl"
    monkeypatch.setenv(ra.AUDIT_ENV, str(sink))
    monkeypatch.setenv(ra.NOTEBOOK_ENV, "06")
    monkeypatch.setattr(ra, "_sink", None)
    ra.install_from_env()
    return lambda: ra.read_sink(sink, "06")


def _sets():
    with ra.suspended():  # the overrides' own look-ups are not the notebook's configs
        return SETS("06")


def test_audit_fails_on_a_planted_uncovered_config(audit, fresh_dirs):
    """A config the overrides do not know: the audit names the notebook and field."""
    from litseg_nb.litseg.config import LitSegConfig

    with config_sets(_sets()):
        LitSegConfig.for_profile("full")
        assert audit() == []  # LitSegConfig is covered
        planted = PlantedConfig.for_profile("full")
        planted.llm.replace(max_new_tokens=8)
    lines = audit()
    assert lines[0].startswith("notebook 06 cell None: PlantedConfig.llm.model: 'Qwen/Qwen3-8B' is full's model")
    assert any(x.startswith("notebook 06 cell None: PlantedConfig.corpus.literaryqa_split: 'test'") for x in lines)
    assert any(x.startswith("notebook 06 cell None: PlantedConfig.embedding.model: 'BAAI/bge-m3'") for x in lines)
    assert any(x.startswith("notebook 06 cell None: LLMConfig.model: 'Qwen/Qwen3-8B'") for x in lines)  # .replace


def test_audit_catches_a_package_config_left_out_of_the_overrides(audit, monkeypatch, fresh_dirs):
    """Notebook 06 builds the boundary benchmark's BoundaryConfig inside; left out of the overrides, the
    audit finds it."""
    import litseg_nb.front.params as sc
    from litseg_nb.evaluation.boundaries import BoundaryConfig

    with config_sets(_sets()):
        BoundaryConfig.for_profile("full")
    assert audit() == []
    real = sc.stage_config_classes
    monkeypatch.setattr(sc, "stage_config_classes", lambda: [c for c in real() if c.__name__ != "BoundaryConfig"])
    with config_sets(_sets()):
        BoundaryConfig.for_profile("full")
    lines = audit()
    assert "notebook 06 cell None: BoundaryConfig.llm.model: 'Qwen/Qwen3-8B' is full's model" in lines[0]
    assert any("BoundaryConfig.corpus.literaryqa_split: 'test'" in x for x in lines)
