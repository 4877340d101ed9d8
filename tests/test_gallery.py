"""The gallery page is built from an outputs folder: tables' Markdown, figures copied; an earlier gallery never shrinks."""
from __future__ import annotations


import pytest

from litseg_nb import cli
from litseg_nb.front import gallery
from litseg_nb.config import ConfigError


def _fake_outputs(root):
    (root / "tables").mkdir(parents=True)
    (root / "figures").mkdir()
    (root / "tables" / "05_latency.md").write_text("**05_latency** — profile=test | LLM=tiny\n\n| a |\n|---|\n| 1 |\n")
    (root / "tables" / "05_latency.csv").write_text("a\n1\n")
    (root / "tables" / "01_corpus_statistics.md").write_text("**01_corpus_statistics** — profile=test\n\n| b |\n")
    (root / "tables" / "boundaries.md").write_text("**boundaries** — profile=test\n")
    (root / "figures" / "05_case_study.png").write_bytes(b"\x89PNG fake 1")
    (root / "figures" / "05_case_study.pdf").write_bytes(b"%PDF")
    return root


def test_gallery_page_from_a_fake_outputs_folder(tmp_path):
    src = _fake_outputs(tmp_path / "outputs" / "test")
    dest = tmp_path / "docs" / "gallery" / "test"
    (dest / "figures").mkdir(parents=True)
    (dest / "README.md").write_text("# Gallery: what the notebooks produce (profile `test`)\n")  # an earlier page
    page = gallery.write_gallery("test", outputs=src, dest=dest)
    text = page.read_text()
    assert page == dest / "README.md"
    assert (dest / "figures" / "05_case_study.png").read_bytes() == b"\x89PNG fake 1"
    assert not (dest / "figures" / "05_case_study.pdf").exists()
    assert "small-model numbers" in text and "not the paper's results" in text
    # one section per notebook, titled by the notebook's own heading, in notebook order; unknown names last
    h01 = text.index("## 01 · Preprocessing")
    h05 = text.index("## 05 · RAG evaluation")
    other = text.index("## Other outputs")
    assert h01 < h05 < other
    assert "**05_latency** — profile=test | LLM=tiny" in text[h05:other] and "| 1 |" in text
    assert "![05_case_study](figures/05_case_study.png)" in text[h05:other]
    assert "**boundaries**" in text[other:]


def test_gallery_errors_and_cli_hooks(tmp_path, capsys, monkeypatch):
    with pytest.raises(gallery.GalleryError, match="no tables or figures under .*run --profile test"):
        gallery.write_gallery("test", outputs=tmp_path / "nothing", dest=tmp_path / "g")
    with pytest.raises(ConfigError, match="unknown profile"):
        gallery.write_gallery("tset", outputs=tmp_path)
    src = _fake_outputs(tmp_path / "outputs" / "test")
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    assert cli.main(["gallery", "--profile", "test", "--out", str(tmp_path / "g")]) == 0
    assert "1 figure(s) copied" in capsys.readouterr().out
    assert (tmp_path / "g" / "README.md").read_text().count("## ") >= 2
    # nothing to show: one line from the CLI, usage exit code
    assert cli.main(["gallery", "--profile", "full", "--out", str(tmp_path / "g2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no tables or figures" in err[0]
    assert src.is_dir()
