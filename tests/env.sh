# shellcheck shell=bash
tfops_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Sourced by the test scripts: a virtual environment with the test tools, keyed by the hash of
# the requirements, kept in the lab's cache so that a fresh clone does not reinstall.
TFOPS_PY=${TFOPS_PY:-python3}
TFOPS_PY_VERSION=$("$TFOPS_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
tfops_cache=${TFOPS_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfops-lab}
req_hash=$(cat "$tfops_root/requirements.txt" "$tfops_root/tests/requirements.txt" | sha256sum | cut -c1-12)
venv="$tfops_cache/venv-$TFOPS_PY_VERSION-$req_hash"
if [[ ! -f "$venv/.complete" ]]; then
  echo "installing test tools into $venv" >&2
  rm -rf "$venv"
  "$TFOPS_PY" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip 2>&1 | { grep -v "^WARNING: Location" || true; }
  "$venv/bin/pip" install -q -r "$tfops_root/tests/requirements.txt" 2>&1 | { grep -v "^WARNING: Location" || true; }
  touch "$venv/.complete"
fi
export PATH="$venv/bin:$PATH"
export VIRTUAL_ENV="$venv"
export TFOPS_COLLECTION_ROOT=${TFOPS_COLLECTION_ROOT:-$tfops_cache/collections-$(echo "$tfops_root" | sha256sum | cut -c1-8)}
export ANSIBLE_COLLECTIONS_PATH="$TFOPS_COLLECTION_ROOT"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false

# Debian's tools that the test scripts call (shellcheck for sanity, rsync for
# tests/stage-collection.sh): installed when missing.
debian_test_tools() {
  local missing=() tool
  for tool in shellcheck rsync; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  if ((${#missing[@]})); then apt-get update -q && apt-get install -y -q "${missing[@]}"; fi
}
