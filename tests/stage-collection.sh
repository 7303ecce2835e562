#!/usr/bin/env bash
# Copies the working tree (tracked and untracked-but-not-ignored files) to
# <root>/ansible_collections/tensorfusion/ops, where ansible-test expects a collection, and removes
# staged files that are no longer in the tree. lab/ and bench/ are not part of the collection
# (galaxy.yml build_ignore), so they and their own tests are left out.
set -euo pipefail
root=$1
dest="$root/ansible_collections/tensorfusion/ops"
mkdir -p "$dest"
list=$(mktemp)
trap 'rm -f "$list" "$list.staged"' EXIT
git ls-files -co --exclude-standard | grep -v -E '^(lab|bench|tests/(unit|integration)/lab|tests/unit/bench)/' | sort > "$list"
rsync -a --files-from="$list" ./ "$dest/"
(cd "$dest" && find . \( -type f -o -type l \) ! -path './tests/output/*' | sed 's#^\./##' | sort) > "$list.staged"
comm -13 "$list" "$list.staged" | while IFS= read -r stale; do rm -f "$dest/$stale"; done
find "$dest" -mindepth 1 -type d -empty -not -path "*/tests/output*" -delete
