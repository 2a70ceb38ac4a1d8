#!/usr/bin/env bash
# Label Studio (the annotation server of the review queue, docs/review-queue.md) from PyPI into
# its OWN virtualenv, never casewatch's: it pins its own Django, DRF and many more that must not
# meet casewatch's dependencies. One venv per version, kept under the machine's cache
# (${XDG_CACHE_HOME:-~/.cache}/casewatch/label-studio-VERSION), so later runs find it at once.
# Prints the venv's directory; `label-studio` is its bin/label-studio. The test fixture and
# `casewatch`'s docs start it as a local service on a free loopback port (never as a system
# service). Also Debian's `chromium`: one test opens a task's page in headless Chromium and checks
# it renders. `--plan` only says what would be installed.
set -euo pipefail

VERSION=1.23.2
PYTHON=${PYTHON:-python3}
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/casewatch/label-studio-$VERSION"

if [ "${1:-}" = "--plan" ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      echo "ensure-label-studio: make test will install from Debian with apt-get: chromium (the review queue's page test)" >&2
    else
      echo "ensure-label-studio: missing Debian package: chromium; not root, so nothing will be installed (install it as root)" >&2
    fi
  fi
  if [ -e "$DIR/.installed-stamp" ]; then
    echo "ensure-label-studio: Label Studio $VERSION is installed in $DIR; nothing to install" >&2
  else
    echo "ensure-label-studio: make test will install Label Studio $VERSION from PyPI with pip into its own virtualenv $DIR (a few minutes the first time; make run does not)" >&2
  fi
  exit 0
fi

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "ensure-label-studio: installing chromium from Debian (the review queue's page test)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends chromium >/dev/null || echo "ensure-label-studio: installing chromium failed (the page test will fail under CI=true)" >&2
  else
    echo "ensure-label-studio: chromium is missing; install Debian's 'chromium' package (as root)" >&2
  fi
fi

# This machine's pip configuration names local indexes that may be absent: pip says so once per
# package, which buries any real error; those lines are dropped, everything else is kept.
quiet_pip() {
  local status=0
  "$DIR/bin/python" -m pip install --quiet "$@" >"$DIR/pip.log" 2>&1 || status=$?
  grep -v "is ignored: it is neither" "$DIR/pip.log" >&2 || true
  return "$status"
}

# The stamp is written last: an install cut short is never taken for a finished one.
if [ ! -e "$DIR/.installed-stamp" ]; then
  echo "ensure-label-studio: installing Label Studio $VERSION into $DIR (its own virtualenv)" >&2
  rm -rf "$DIR"
  "$PYTHON" -m venv "$DIR"
  quiet_pip --upgrade pip
  # Label Studio pins few of its dependencies: sentry-sdk 3 (December 2026) drops an option its
  # settings pass at import (`send_default_pii`), and no Django command starts with it.
  quiet_pip "label-studio==$VERSION" "sentry-sdk>=2,<3"
  # A migrated empty database (Label Studio's ~300 Django migrations take a minute or two):
  # each server casewatch starts copies it into its own data directory and is up in seconds.
  echo "ensure-label-studio: migrating the template database (once)" >&2
  pkg=$("$DIR/bin/python" -c 'import label_studio, os; print(os.path.dirname(label_studio.__file__))')
  (cd "$pkg" && LABEL_STUDIO_BASE_DATA_DIR="$DIR/template" LATEST_VERSION_CHECK=false \
    COLLECT_ANALYTICS=false "$DIR/bin/python" manage.py migrate --no-color -v 0 >"$DIR/template.log" 2>&1) || {
    echo "ensure-label-studio: migrating the template database failed; see $DIR/template.log" >&2
    exit 1
  }
  touch "$DIR/.installed-stamp"
fi
echo "$DIR"
