#!/usr/bin/env bash
# Here: downloads into .whl/ (git-ignored) the wheels that the Python
# package's GPU tests need on the GPU machine, which reaches no package
# registry: python/requirements-test.txt (numpy, protobuf, pytest, pydot and
# what they need) for the Python version there (PY, default 3.10; `python3
# --version` on that machine tells).  There:
#   python3 -m pip install --no-index --find-links .whl -r python/requirements-test.txt
# The extension also needs that Python's headers (python3-dev) for CMake to
# build it (CORTADO_PYTHON=AUTO leaves the package out without them).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-3.10}
mkdir -p .whl
python3 -m pip download -q -d .whl --only-binary=:all: --python-version "$PY" \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
  -r python/requirements-test.txt
du -sh .whl
