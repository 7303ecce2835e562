#!/usr/bin/env bash
# The ansible-core matrix (tests/run-all.sh runs it after the full suite on the pinned version):
#   - ansible-test sanity on the newest ansible-core, with the Python it needs;
#   - on the oldest and the newest ansible-core, each in a cached virtual environment of its own
#     Python with the collection's requirements, the collection built (ansible-galaxy collection
#     build) and installed from that artifact as a user installs it; then in that environment the
#     in-process action's unit tests, and the smoke set (precheck, the upgrade runbook, a rotation,
#     a rollback) against one shared Kubernetes 1.35 lab, in-process and as module processes.
#   tests/ansible-matrix.sh                 all of it
#   tests/ansible-matrix.sh smoke|sanity    one part
# ANSIBLE_MATRIX below is the list the README's support line states.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
# shellcheck source=tests/env.sh
source tests/env.sh

# ansible-core version and the Python it runs on: the oldest requires_ansible allows, and the
# newest (2.21 needs Python 3.12 or later). The full suite runs on tests/requirements.txt's pin.
ANSIBLE_MATRIX=("2.16.19 3.11" "2.21.5 3.12")
parts=${1:-all}
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }
step() { printf '\n==== ansible-core matrix: %s (at %s) ====\n' "$*" "$(elapsed)"; }

find_python() {
  # A CPython of minor $1: pyenv's (this machine kind ships 3.10-3.13 in ~/.pyenv), else one on
  # PATH. Debian 12 has only 3.11: elsewhere install it with pyenv, or use Debian 13's python3.12.
  local minor=$1 candidate
  for candidate in $(find "${PYENV_ROOT:-$HOME/.pyenv}/versions" -maxdepth 3 -path "*/versions/$minor.*/bin/python$minor" 2>/dev/null | sort -V -r) \
                   "$(command -v "python$minor" || true)"; do
    if [[ -n "$candidate" ]] && "$candidate" -c 'import ensurepip, venv' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  echo "Python $minor is needed for this ansible-core and was not found (pyenv: 'pyenv install $minor'; Debian 13: python$minor)" >&2
  return 1
}

matrix_venv() {
  # A cached virtual environment with ansible-core $1 on Python $2, the collection's
  # requirements and pytest; keyed by both and by the requirements' hash.
  local core=$1 minor=$2 python venv key
  key=$(sha256sum < requirements.txt | cut -c1-8)
  venv="$tfops_cache/ansible-$core-py$minor-$key"
  if [[ ! -f "$venv/.complete" ]]; then
    python=$(find_python "$minor")
    echo "installing ansible-core $core on $python into $venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip >&2
    "$venv/bin/pip" install -q "ansible-core==$core" -r requirements.txt "pytest>=8.0" "pytest-timeout>=2.3" >&2
    touch "$venv/.complete"
  fi
  echo "$venv"
}

sanity_newest() {
  local core minor venv entry
  for entry in "${ANSIBLE_MATRIX[@]}"; do  # every environment, so that a background run makes them all
    read -r core minor <<<"$entry"
    matrix_venv "$core" "$minor" >/dev/null
  done
  read -r core minor <<<"${ANSIBLE_MATRIX[-1]}"
  venv=$(matrix_venv "$core" "$minor")
  step "ansible-test sanity on ansible-core $core (Python $minor)"
  tests/stage-collection.sh "$TFOPS_COLLECTION_ROOT"
  PATH="$venv/bin:$PATH" tests/sanity-bootstrap.sh
  (cd "$TFOPS_COLLECTION_ROOT/ansible_collections/tensorfusion/ops" && rm -rf tests/output &&
     PATH="$venv/bin:$PATH" ansible-test sanity --local --python "$minor" --color no)
}

# The smoke sets' lab and the built artifact, taken down and removed however the script ends.
matrix_state=""
matrix_build=""
cleanup() {
  if [[ -n "$matrix_state" ]]; then python -m lab --state "$matrix_state" down || true; fi
  if [[ -n "$matrix_build" ]]; then rm -rf "$matrix_build"; fi
}
trap cleanup EXIT

smoke() {
  local core minor venv collections way
  matrix_build=$(mktemp -d)
  matrix_state=$(mktemp -d /tmp/tfops-matrix-lab.XXXXXX)
  ansible-galaxy collection build --output-path "$matrix_build" . >/dev/null
  step "one Kubernetes 1.35 lab for the smoke sets"
  python -m lab --state "$matrix_state" up --tensorfusion --nodes 10 --cpu-nodes 1
  for entry in "${ANSIBLE_MATRIX[@]}"; do
    read -r core minor <<<"$entry"
    venv=$(matrix_venv "$core" "$minor")
    collections="$matrix_build/collections-$core"
    # The artifact as a user installs it, into a path of its own (nothing else on it).
    ANSIBLE_COLLECTIONS_PATH="$collections" "$venv/bin/ansible-galaxy" collection install --offline \
      -p "$collections" "$matrix_build"/tensorfusion-ops-*.tar.gz >/dev/null
    step "ansible-core $core (Python $minor): the in-process action's unit tests"
    PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs \
      tests/unit/plugins/plugin_utils/test_in_process.py
    for way in true false; do
      if [[ $way == true ]] && ! "$venv/bin/python" -c 'import ansible.module_utils.common.json as j; j.get_module_encoder' 2>/dev/null; then
        step "ansible-core $core, tfops_in_process=true: skipped - before 2.19 there is no in-process path (every module runs as a module process), so this run would repeat the module-process run below"
        continue
      fi
      step "ansible-core $core (Python $minor), tfops_in_process=$way: the smoke set on the lab"
      TFOPS_TEST_LAB_STATE=$matrix_state TFOPS_TEST_ANSIBLE_VENV=$venv TFOPS_TEST_IN_PROCESS=$way \
        TFOPS_TEST_COLLECTIONS_PATH=$collections \
        python -m pytest -p no:cacheprovider -m smoke tests/integration
    done
  done
}

debian_test_tools
case "$parts" in
  all) sanity_newest; smoke ;;
  sanity) sanity_newest ;;
  smoke) smoke ;;
  *) echo "usage: $0 [all|sanity|smoke]" >&2; exit 2 ;;
esac
