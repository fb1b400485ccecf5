#!/usr/bin/env bash
# The GitHub Action and the workflows, checked without a network: both schemas (SchemaStore's, bundled with
# check-jsonschema) and zizmor's security audits (template injection, unpinned actions, persisted
# credentials, ...). Any finding fails. `make check-actions`; BIN=path/to/bin to use other binaries.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# BIN as given is relative to where this is called from; by default it is the repository's venv.
BIN=$(cd "${BIN:-$ROOT/.venv/bin}" && pwd)
cd "$ROOT"
"$BIN/check-jsonschema" --builtin-schema vendor.github-actions action.yml
"$BIN/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml
# --offline: the audits that ask GitHub (impostor commits, stale tags) are left out; zizmor exits non-zero
# on any finding. --strict-collection: a file zizmor cannot parse is an error, not a skipped input.
"$BIN/zizmor" --offline --strict-collection action.yml .github/workflows/
