#!/usr/bin/env bash
# A new user's documented paths, run end to end on this checkout so they cannot rot: the
# messages a mistake gets (README, docs/configuration.md, docs/cli.md), the demo's printed links
# and commands (docs/demo.md), the documentation site (docs/development.md), and the recipe tests
# of docs/otel.md and docs/real-model.md (tests/test_examples_otel.py, tests/test_docs_*.py and
# any test_*recipe*.py; tests/test_make_docs_and_run.py for `make docs` and `make run PORT=`).
#
#   bash scripts/newcomer-check.sh            # everything (the demo runs DEMO_SECONDS, 40 s)
#   bash scripts/newcomer-check.sh --quick    # the error messages only (seconds; the suite runs
#                                             # this: tests/test_newcomer_check.py)
#
# Needs the venv `make run` (or `make test`) built. Prints one `ok:` line per check; the first
# failed check prints `FAIL:` with what was seen and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
CASEWATCH="$VENV/bin/casewatch"
PY="$VENV/bin/python"
DEMO_SECONDS="${DEMO_SECONDS:-40}"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

[ -x "$CASEWATCH" ] || { echo "FAIL: no $CASEWATCH: run make run first" >&2; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/casewatch-newcomer.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# What the user's shell would not have: the test suite's own settings.
for name in $(env | sed -n 's/^\(CASEWATCH_[A-Z0-9_]*\)=.*/\1/p'); do unset "$name"; done

ok() { echo "ok: $*"; }
fail() {
    echo "FAIL: $1" >&2
    [ -f "$WORK/out" ] && sed -n '1,40p' "$WORK/out" >&2
    exit 1
}
# run EXPECTED_EXIT COMMAND...: output (stdout and stderr) in $WORK/out.
run() {
    local expected="$1"
    shift
    set +e
    "$@" >"$WORK/out" 2>&1
    local code=$?
    set -e
    [ "$code" = "$expected" ] || fail "exit $code, expected $expected: $*"
}
said() { grep -qF -- "$1" "$WORK/out" || fail "expected '$1' from the last command"; }
not_said() { ! grep -qF -- "$1" "$WORK/out" || fail "did not expect '$1' from the last command"; }
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---------------------------------------------------------------- mistakes and their messages

printf 'kafka:\n  bootstrap_server: ["127.0.0.1:9092"]\n' >typo.yaml
run 2 "$CASEWATCH" judge "$ROOT/examples/turns.jsonl" --out j.jsonl --config typo.yaml
said "kafka.bootstrap_server: unknown key; did you mean bootstrap_servers?"
ok "a typo in a key: did you mean"

CASEWATCH_DAEMON__CONCURRENCY=eight run 2 "$CASEWATCH" judge "$ROOT/examples/turns.jsonl" --out j.jsonl
said "CASEWATCH_DAEMON__CONCURRENCY (setting daemon.concurrency):"
ok "a bad environment value: named by its variable"

cat >mapped.yaml <<'EOF'
kafka:
  topics: [{name: t, format: mapped}]
mapping:
  event_id: id
  conversation_id: thread
  timestamp: ts
  assistant.name: "'bot'"
  query: question
  answer: "reply.["
EOF
echo '{"id": "e1"}' >events.jsonl
run 2 "$CASEWATCH" map-check events.jsonl --config mapped.yaml
said "mapping.answer: 'reply.[' is not a JMESPath expression"
not_said "Value error"
ok "a mapping error: without pydantic's prefix"

printf 'mapping:\n  event_id: id\n  answr: reply\n' >unmapped.yaml
run 2 "$CASEWATCH" map-check events.jsonl --config unmapped.yaml
said "mapping.answr: not a turn-event field (did you mean answer?)"
said "without an expression: conversation_id, timestamp, assistant.name, query, answer"
ok "a mapping: every unknown and missing field at once"

printf 'kafka:\n  bootstrap_servers: ["127.0.0.1:%s"]\nserver:\n  port: 0\n' "$(free_port)" >nobroker.yaml
run 2 "$CASEWATCH" run --config nobroker.yaml --db nobroker.db
said "connection refused, nothing listens there"
ok "no broker on this machine: said at once"

printf '{"event_id": "a"}\nnot json\n{"query": "q"}\n' >malformed.jsonl
run 1 "$CASEWATCH" judge malformed.jsonl --out mg.jsonl
said "nothing was judged"
for line in 1 2 3; do
    [ "$(grep -c "line $line: rejected" out)" = 1 ] || fail "line $line not said exactly once"
done
not_said "dead-lettered"
ok "a file with nothing judgeable: exit 1, each line said once, counted from 1"

if [ "$QUICK" = 1 ]; then
    echo "newcomer-check: the error messages hold (--quick: demo, site and recipes not run)"
    exit 0
fi

# ---------------------------------------------------------------- the demo's links and lines

"$CASEWATCH" demo --port 0 --duration "$DEMO_SECONDS" --db "$WORK/demo.db" >demo.out 2>&1 &
demo=$!
# Its first lines say where everything is: every link they print answers while it runs.
for _ in $(seq 600); do
    grep -qs '^\[' demo.out && break  # the first summary: the banner is complete
    kill -0 "$demo" 2>/dev/null || break
    sleep 0.5
done
grep -oE 'http://127\.0\.0\.1:[0-9]+/[^ )"]*' demo.out | sort -u >links || true
[ -s links ] || { cp demo.out out; fail "the demo printed no link"; }
while IFS= read -r link; do
    "$PY" - "$link" <<'PROBE' || { cp demo.out out; fail "printed link does not answer: $link"; }
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:  # redirects followed
    sys.exit(0 if answer.status == 200 else 1)
PROBE
    ok "printed link answers 200: $link"
done <links
wait "$demo" || { cp demo.out out; fail "the demo exited non-zero"; }
cp demo.out out
not_said "Ctrl-C again"
not_said "datetime.datetime("
ok "the demo ran ${DEMO_SECONDS} s and stopped by itself without offering a second Ctrl-C"
# The commands it printed for after the run, verbatim (from this directory, not the checkout).
grep -E '^\s*(\S*/)?casewatch [a-z][a-z-]* ' demo.out | grep -v 'EVENT_ID' |
    sed -E -e 's/^ *//' -e 's/[[:space:]]+#.*$//' >commands || true  # a shell's comment
[ -s commands ] || fail "the demo printed no command to run after it"
while IFS= read -r command; do
    read -r -a argv <<<"$command"
    # `casewatch` alone is printed only when that name on PATH is this venv's
    [ "${argv[0]}" = casewatch ] && argv[0]="$CASEWATCH"
    run 0 "${argv[@]}"
    ok "printed line runs as printed: $command"
done <commands

# ---------------------------------------------------------------- the documentation site

run 0 env NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet \
    -f "$ROOT/mkdocs.yml" --site-dir "$WORK/site"
grep -q 'href="demo.html"' "$WORK/site/index.html" || fail "site links are not files"
ok "the site builds strict, its links work from disk"

# ---------------------------------------------------------------- the recipes' own tests

mapfile -t recipes < <(cd "$ROOT" && ls tests/test_make_docs_and_run.py \
    tests/test_examples_otel.py tests/test_docs_*.py tests/test_*recipe*.py \
    tests/*/test_*recipe*.py tests/*/*/test_*recipe*.py 2>/dev/null || true)
(cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider "${recipes[@]}") >out 2>&1 ||
    fail "the recipe tests failed: ${recipes[*]}"
ok "recipe tests pass: ${recipes[*]}"

echo "newcomer-check: every documented path checked holds"
