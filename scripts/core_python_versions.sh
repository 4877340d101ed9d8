#!/usr/bin/env bash
# The core install check (scripts/core_install_check.sh: `pip install .` alone in a fresh venv, a book
# segmented, tests/test_core_install.py) on each newer Python the machine has, so that requires-python's
# ">=3.11" is tested on them rather than assumed. The python machine image ships pyenv's 3.12 and 3.13
# beside the 3.11 of the research stack; a version the machine lacks is reported and skipped (exit 0).
#
#   bash scripts/core_python_versions.sh                    # every 3.12.x / 3.13.x under $PYENV_ROOT/versions
#   LITSEG_EXTRA_PYTHONS="/opt/py312/bin/python3 python3.13" bash scripts/core_python_versions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="${PYENV_ROOT:-$HOME/.pyenv}"
pys=()
if [ -n "${LITSEG_EXTRA_PYTHONS:-}" ]; then
  read -r -a pys <<< "$LITSEG_EXTRA_PYTHONS"
else
  for v in 3.12 3.13; do
    py=$(ls -d "$root"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -1 || true)
    if [ -n "$py" ]; then
      pys+=("$py")
    else
      echo "[python] no Python $v under $root/versions: the core is not checked on $v here"
    fi
  done
fi
for py in "${pys[@]}"; do
  "$py" -V >/dev/null 2>&1 || { echo "[python] $py does not run"; exit 1; }
  LITSEG_PYTHON="$py" bash scripts/core_install_check.sh
done
