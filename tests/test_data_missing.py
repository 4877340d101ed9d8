"""A missing dataset is an immediate error naming the files and how to get them; downloading is
opt-in (`python -m litseg_nb download-data`), never a silent fallback at run time."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from litseg_nb import corpus
from litseg_nb.config import CorpusConfig
from litseg_nb.core.paths import DataNotFoundError


@pytest.fixture
def no_hub(monkeypatch):
    """Any hub call fails the test (the loader must not try the network)."""
    import huggingface_hub

    def boom(*a, **k):
        raise AssertionError("the corpus loader tried to download from the hub")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", boom)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", boom)


def test_missing_gutenqa_folder_is_an_immediate_error_with_instructions(tmp_path, no_hub):
    (tmp_path / "gutenberg").mkdir()
    cfg = CorpusConfig(datasets=("gutenqa",))
    t0 = time.perf_counter()
    with pytest.raises(DataNotFoundError) as info:
        corpus.load_corpus(cfg, use_cache=False, root=tmp_path)
    assert time.perf_counter() - t0 < 5
    msg = str(info.value)
    for needed in (str(tmp_path / "gutenqa" / "GutenQA_paragraphs.parquet"), "questions.parquet",
                   "LumberChunker/GutenQA_Paragraphs", "LumberChunker/GutenQA",
                   "python -m litseg_nb download-data", "LITSEG_DATA_DIR"):
        assert needed in msg, needed


def test_missing_literaryqa_folder_is_an_error(tmp_path, no_hub):
    with pytest.raises(DataNotFoundError, match="sapienzanlp/LiteraryQA.*download-data"):
        corpus.load_corpus(CorpusConfig(datasets=("literaryqa",)), use_cache=False, root=tmp_path)


def test_gutenqa_folder_without_files_names_them(tmp_path, no_hub):
    (tmp_path / "gutenqa").mkdir()
    with pytest.raises(DataNotFoundError, match="GutenQA_paragraphs.parquet.*download-data"):
        corpus.load_corpus(CorpusConfig(datasets=("gutenqa",)), use_cache=False, root=tmp_path)


def test_download_data_writes_the_layout_the_loaders_read(tmp_path, monkeypatch, data_dir):
    """The opt-in command fetches the hub files into <dest>/gutenqa/ (hub faked with the local copy)."""
    import shutil

    import huggingface_hub

    from litseg_nb.cli import main

    calls = []

    def fake_download(repo_id, filename, repo_type=None, local_dir=None, **kw):
        calls.append((repo_id, filename, repo_type))
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        return shutil.copy(data_dir / "gutenqa" / filename, Path(local_dir) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    dest = tmp_path / "data"
    assert main(["download-data", "--datasets", "gutenqa", "--dest", str(dest)]) == 0
    assert calls == [("LumberChunker/GutenQA_Paragraphs", "GutenQA_paragraphs.parquet", "dataset"),
                     ("LumberChunker/GutenQA", "questions.parquet", "dataset")]
    books = corpus.load_corpus(CorpusConfig(datasets=("gutenqa",), max_units_per_book=1), use_cache=False,
                               root=dest)
    assert [b.book_id for b in books] == ["gutenqa:Emma_-_Jane_Austen"]


def test_download_data_without_network_is_one_line(tmp_path, capsys, monkeypatch):
    import huggingface_hub

    from litseg_nb.cli import main

    def offline(*a, **k):
        raise OSError("We couldn't connect to 'https://huggingface.co'\nmore detail")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    assert main(["download-data", "--datasets", "gutenqa", "--dest", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "download failed" in err[0]
