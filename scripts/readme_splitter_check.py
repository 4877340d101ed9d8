"""Run the README's splitter examples (between ``<!-- splitter-example:start -->`` and ``-end -->``) as written
on a raw Project Gutenberg book copied to ``my_book.txt``, and check that every word of the story is in a chunk,
that no chunk holds licence text and that no chunk is over the example's ``chunk_size`` tokens.

    python scripts/readme_splitter_check.py BOOK.txt     # with the python whose litseg_nb is to be checked

An example whose host library is not installed is skipped (said so); at least one must run. Exit 1 on a failure.
"""
from __future__ import annotations

import collections
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- splitter-example:start -->", "<!-- splitter-example:end -->"
CHECK = """
chunks = [(d.page_content, d.metadata) for d in docs] if "docs" in dir() else [(n.text, n.metadata) for n in nodes]
import json
print(json.dumps([[t, m["token_count"]] for t, m in chunks]))
"""


def blocks(readme: str) -> list[str]:
    """The python code blocks of the README's splitter section."""
    section = readme.split(START, 1)[1].split(END, 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def story_words(raw: str) -> collections.Counter:
    """The words between Project Gutenberg's START and END lines, less the producer's credit and the epilogue."""
    a = re.search(r"^\*\*\* ?START OF.*$", raw, re.M).end()
    b = re.search(r"^\*\*\* ?END OF", raw, re.M).start()
    lines = [ln for ln in raw[a:b].splitlines()
             if not re.match(r"\s*(Produced by|End of (the )?Project Gutenberg)", ln)]
    return collections.Counter(" ".join(lines).split())


def host(code: str) -> str | None:
    """The host library a block imports (None: none beyond litseg_nb)."""
    for mod in re.findall(r"^(?:from|import) (\w+)", code, re.M):
        if mod in ("llama_index", "langchain_core", "chonkie"):
            return mod
    return None


def check(code: str, book: Path, env: dict[str, str] | None = None) -> list[list]:
    """Run one example on a copy of ``book`` and return its ``[text, token_count]`` pairs; AssertionError on a
    lost story word, licence text or a chunk over the example's chunk_size."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(book, Path(d) / "my_book.txt")
        r = subprocess.run([sys.executable, "-c", "import warnings; warnings.simplefilter('error')\n" + code + CHECK],
                           cwd=d, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    chunks = json.loads(r.stdout.strip().splitlines()[-1])
    texts = [t for t, _ in chunks]
    lost = story_words(book.read_text(encoding="utf-8-sig")) - collections.Counter(" ".join(texts).split())
    assert not lost, f"{sum(lost.values())} story word(s) lost, e.g. {list(lost)[:10]}"
    licence = [t[:80] for t in texts if "Gutenberg" in t]
    assert not licence, f"{len(licence)} chunk(s) with licence text, e.g. {licence[:2]}"
    size = re.search(r"chunk_size=(\d+)", code)
    if size:
        assert max(n for _, n in chunks) <= int(size.group(1)), f"a chunk over chunk_size={size.group(1)} tokens"
    return chunks


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    book, ran = Path(argv[0]).resolve(), 0
    for code in blocks(README.read_text(encoding="utf-8")):
        name = code.splitlines()[0].lstrip("# ")
        mod = host(code)
        if mod is not None and importlib.util.find_spec(mod) is None:
            print(f"[readme] {name}: skipped ({mod} is not installed)")
            continue
        try:
            chunks = check(code, book)
        except AssertionError as exc:
            print(f"[readme] {name}: FAILED: {exc}")
            return 1
        ran += 1
        print(f"[readme] {name}: {len(chunks)} chunks of {book.name}: every story word kept, no licence text")
    if not ran:
        print("[readme] no splitter example ran")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
