#!/usr/bin/env bash
# Runs every test of tensorfusion.ops: sanity, lint, docs lint, changelog lint, unit and
# integration tests against the lab. Works on a fresh Debian 12 machine: it installs what it needs
# (Python tools into a cached virtual environment, the lab's packages and binaries into the cache).
#   tests/run-all.sh            everything
#   TFOPS_SKIP_SANITY=1 ...     everything except ansible-test sanity (for quick local loops only)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

# shellcheck source=tests/env.sh
source tests/env.sh

# Each step says when it starts (minutes into the run): CI has a time limit, and this shows where it goes.
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }
step() { printf '\n==== %s (at %s) ====\n' "$*" "$(elapsed)"; }

step "lab: install (cached after the first run)"
python -m lab install

step "test tools from Debian (shellcheck for sanity, rsync for tests/stage-collection.sh)"
debian_test_tools

step "collection tree for ansible-test"
tests/stage-collection.sh "$TFOPS_COLLECTION_ROOT"
coll="$TFOPS_COLLECTION_ROOT/ansible_collections/tensorfusion/ops"

if [[ -z "${TFOPS_SKIP_SANITY:-}" ]]; then
  step "ansible-test sanity (no ignore entries)"
  tests/sanity-bootstrap.sh
  if compgen -G "tests/sanity/ignore-*.txt" >/dev/null; then
    echo "tests/sanity/ignore-*.txt must not exist: fix the finding instead" >&2
    exit 1
  fi
  (cd "$coll" && rm -rf tests/output && ansible-test sanity --local --python "$TFOPS_PY_VERSION" --color no)
fi

step "ansible-lint (production profile)"
ansible-lint --profile production --offline

step "antsibull-docs collection docs lint"
antsibull-docs lint-collection-docs --plugin-docs --skip-rstcheck "$coll"

step "antsibull-changelog lint"
antsibull-changelog lint

step "galaxy build"
build_dir=$(mktemp -d)
ansible-galaxy collection build --output-path "$build_dir" . >/dev/null
# Its top-level entries against an allow-list; its README and docs refer only to what it ships.
python tests/check_artifact.py "$build_dir"/tensorfusion-ops-*.tar.gz
rm -rf "$build_dir"

# While the tests below mostly wait on the lab (load about 1 of 2 cores), what only needs CPU runs
# beside them at the lowest priority: the other Kubernetes minors' builds (a fresh machine's
# first run), the ansible-core matrix's virtual environments and its sanity on the newest. Each
# is waited for, and its output shown, where its results are needed.
step "in the background, at nice 19: Kubernetes $(python -c 'from lab import paths; print(*paths.MATRIX_KUBE_MINORS)') builds, the ansible-core matrix's environments and sanity"
background=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
kube_args=$(python -c 'from lab import paths; print(" ".join("--kube-version %s" % m for m in paths.MATRIX_KUBE_MINORS))')
# shellcheck disable=SC2086  # one word per argument
nice -n 19 python -m lab install $kube_args >"$background/kube.log" 2>&1 &
kube_builds=$!
nice -n 19 tests/ansible-matrix.sh sanity >"$background/matrix-sanity.log" 2>&1 &
matrix_sanity=$!
finished() {  # finished PID LOG WHAT: its output, then its exit code decides
  local rc=0
  wait "$1" || rc=$?
  printf -- '---- %s (ran in the background) ----\n' "$3"
  cat "$2"
  if ((rc)); then echo "$3 failed (exit $rc)" >&2; exit "$rc"; fi
}

step "unit and integration tests (integration against the lab)"
python -m pytest -p no:cacheprovider --durations=30 tests/unit tests/integration "$@"

step "the background builds"
finished "$kube_builds" "$background/kube.log" "Kubernetes builds of the version matrix"

# The oldest and newest Kubernetes minors the lab builds (lab/paths.py MATRIX_KUBE_MINORS): the
# smoke set (precheck, the upgrade runbook, a rotation, a rollback) on a lab of each; the
# binaries are built once and cached like the default release's.
for minor in $(python -c 'from lab import paths; print(*paths.MATRIX_KUBE_MINORS)'); do
  step "version matrix: the smoke set on Kubernetes $minor"
  python -m lab install --kube-version "$minor"
  TFOPS_TEST_KUBE_VERSION=$minor python -m pytest -p no:cacheprovider -m smoke tests/integration "$@"
done

step "ansible-core matrix: sanity on the newest (ran in the background); the smoke set on the oldest and newest, in-process and as module processes"
finished "$matrix_sanity" "$background/matrix-sanity.log" "ansible-test sanity on the newest ansible-core"
tests/ansible-matrix.sh smoke

step "molecule scenarios (extensions/molecule: default, failure, existing_cluster)"
tests/molecule.sh
printf '\n==== all tests passed in %s ====\n' "$(elapsed)"
