#!/usr/bin/env bash
# The C/C++ toolchain pip needs to build llama-cpp-python from source (the `realmodel` extra:
# the real model server of the test suite). PyPI has no prebuilt wheel of it for Linux, so pip
# compiles llama.cpp with CMake: Debian's `cmake` and `build-essential` (g++, make). Installed
# from Debian when missing and we are root; otherwise named, and the install stops.
set -uo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
{ command -v g++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1; } || missing+=(build-essential)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ]; then
  echo "ensure-build-tools: installing ${missing[*]} from Debian (to build llama-cpp-python)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null || exit 1
else
  echo "ensure-build-tools: missing ${missing[*]}; install Debian's ${missing[*]} (as root): pip builds llama-cpp-python with them" >&2
  exit 1
fi
