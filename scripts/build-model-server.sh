#!/usr/bin/env bash
# Builds llama-cpp-python (the real model server of the test suite, the `realmodel` extra) once
# per machine as a portable wheel, and prints the directory holding it for `pip --find-links`.
#
# Why not let pip build it: pip compiles llama.cpp with GGML_NATIVE (-march=native), which uses
# every instruction the CPU advertises. Virtual machines can advertise AMX without enabling its
# register state for the guest (Firecracker does), and the server then dies of SIGILL (a
# `tilezero`) at its first completion, after loading fine. pip's wheel cache keys a built wheel
# by the source alone, so such a wheel would be reused by every later install. Here llama.cpp is
# built without -march=native, with the x86-64 extensions every AVX2 machine of the last decade
# runs (AVX, AVX2, FMA, F16C); on other architectures, llama.cpp's generic build.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# The version pinned by the `realmodel` extra of pyproject.toml, the one place it is written.
VERSION=$("$PYTHON" - <<'PY'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["realmodel"]
print(next(re.search(r"==(\S+)", req).group(1) for req in extra if req.startswith("llama-cpp-python")))
PY
)
case "$(uname -m)" in
  x86_64 | amd64)
    TAG=x86-64-avx2
    FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
    ;;
  *)
    TAG=generic
    FLAGS="-DGGML_NATIVE=OFF"
    ;;
esac
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/casewatch/wheels/llama-cpp-python-$VERSION-$TAG"

if ! ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "build-model-server: building llama-cpp-python $VERSION ($TAG) into $DIR; the first build takes minutes (docs/real-model.md)" >&2
  mkdir -p "$DIR.partial"
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$PYTHON" -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -w "$DIR.partial" >&2
  rm -rf "$DIR" && mv "$DIR.partial" "$DIR"  # a build cut short never passes for a wheel
fi
echo "$DIR"
