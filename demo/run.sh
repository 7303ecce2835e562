#!/usr/bin/env bash
# The main job on the lab, in one command on a fresh machine: the Python tools (tests/env.sh), a
# lab with TensorFusion (chart 1.8.6 on several GPU nodes), then the upgrade runbook to chart
# 1.8.7 with a new hypervisor image, batch by batch. Run it again: nothing changes.
# Stop the lab afterwards with: python -m lab --state "${TFOPS_DEMO_DIR:-$HOME/.cache/tfops-demo}/lab" down
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck disable=SC1091
source tests/env.sh
demo=${TFOPS_DEMO_DIR:-$HOME/.cache/tfops-demo}
state="$demo/lab"
python -m lab --state "$state" up --tensorfusion --nodes "${TFOPS_DEMO_NODES:-6}"
eval "$(python -m lab --state "$state" env)"
repo=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["tensorfusion"]["chart_repo"])' "$state/state.json")
ANSIBLE_COLLECTIONS_PATH=$(python -c 'import pathlib; from lab import paths; print(paths.collections_link(pathlib.Path(".").resolve()))')
export ANSIBLE_COLLECTIONS_PATH ANSIBLE_DISPLAY_SKIPPED_HOSTS=false ANSIBLE_DISPLAY_OK_HOSTS=true
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
ansible-playbook tensorfusion.ops.upgrade -e @demo/change.yml \
  -e "{\"tfops_kubeconfig\": \"$state/kubeconfig\", \"tfops_chart_repo\": \"$repo\",
       \"tfops_helm_binary\": \"$TFOPS_LAB_HELM3\", \"tfops_artifacts_dir\": \"$demo/artifacts\",
       \"tfops_snapshot_dir\": \"$demo/snapshots\"}"
report=$(find "$demo/artifacts" -mindepth 1 -maxdepth 1 -type d -name 'upgrade-*' | sort | tail -n 1)
echo
cat "$report/report.md"
echo "report: $report/report.html"
