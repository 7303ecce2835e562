#!/usr/bin/env bash
# Copies the working tree (tracked and untracked-but-not-ignored files) to
# <root>/ansible_collections/tensorfusion/ops, where ansible-test and ansible-playbook expect it.
set -euo pipefail
root=$1
dest="$root/ansible_collections/tensorfusion/ops"
mkdir -p "$dest"
git ls-files -co --exclude-standard -z | rsync -a --delete --from0 --files-from=- ./ "$dest/"
# --delete does not apply with --files-from; remove files that no longer exist in the tree.
(cd "$dest" && find . -type f ! -path './tests/output/*' -print0) | while IFS= read -r -d '' f; do
  [[ -e "$f" ]] || rm -f "$dest/$f"
done
