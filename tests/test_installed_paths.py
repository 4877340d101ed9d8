"""No command writes inside the installed package: from an installation (no checkout around the package) the
outputs go to the working directory and the cache to the user's cache folder; the ``segment`` command writes to
the working directory, checkout or not; in a checkout the notebooks' outputs stay resolved from the package."""
from __future__ import annotations

from pathlib import Path

import pytest

from litseg_nb.core import paths


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package as pip installs it: ``REPO_ROOT`` is a site-packages folder (no pyproject, no notebooks)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(paths, "REPO_ROOT", site)
    for var in ("LITSEG_OUTPUTS_DIR", "LITSEG_CACHE_DIR", "LITSEG_MODELS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return site, work


def test_an_installed_package_writes_to_the_working_directory_and_the_user_cache(installed, tmp_path):
    from litseg_nb.llm.models import models_dir

    site, work = installed
    assert not paths.in_checkout(site) and paths.in_checkout(Path(paths.PACKAGE_DIR).parent)
    assert paths.outputs_root() == work.resolve() / "outputs"
    assert paths.outputs_dir("smoke").is_dir() and not (site / "outputs").exists()
    assert paths.cache_dir() == (tmp_path / "xdg").resolve() / "litseg_nb"
    assert models_dir() == (tmp_path / "xdg").resolve() / "litseg_nb" / "models"
    assert not any(site.iterdir())


def test_segment_without_o_writes_to_the_working_directory(tmp_path, monkeypatch):
    from litseg_nb.cli import main

    monkeypatch.delenv("LITSEG_OUTPUTS_DIR", raising=False)
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    book = tmp_path / "story.txt"
    book.write_text("It was a cold morning. The wind came down the hill.\n\nLater the rain stopped.\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["segment", str(book), "--method", "paragraph", "--profile", "test"]) == 0
    assert len(list((work / "outputs" / "test" / "segment").glob("story-*.paragraph.jsonl"))) == 1


def test_the_gallery_of_an_installed_package_goes_to_the_working_directory(installed, monkeypatch):
    from litseg_nb.front import gallery

    site, work = installed
    monkeypatch.setattr(gallery, "REPO_ROOT", site)
    (work / "outputs" / "smoke" / "tables").mkdir(parents=True)
    (work / "outputs" / "smoke" / "tables" / "t.md").write_text("| a |\n|---|\n| 1 |\n")
    pytest.importorskip("nbformat")
    page = gallery.write_gallery("smoke")
    assert page.resolve().is_relative_to(work.resolve()) and not any(site.iterdir())
