#!/usr/bin/env bash
# Runs the Molecule scenarios of extensions/molecule/ from the collection root, with
# tensorfusion.ops resolving to this working tree (lab.paths.collections_link).
#   tests/molecule.sh                   default and failure (each on a lab Molecule creates and
#                                       destroys), then existing_cluster against a lab of its own
#   tests/molecule.sh failure ...       only the named scenarios
# existing_cluster runs against the cluster of K8S_AUTH_* when they are set.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
# shellcheck source=tests/env.sh
source tests/env.sh

links=$(python -c 'from pathlib import Path; from lab import paths; print(paths.collections_link(Path.cwd()))')
export ANSIBLE_COLLECTIONS_PATH="$links"
coll="$links/ansible_collections/tensorfusion/ops"

run_scenario() {
  local started=$SECONDS
  (cd "$coll" && molecule test --scenario-name "$1")
  echo "molecule scenario $1: passed in $((SECONDS - started)) s"
}

existing_cluster() {
  # An "existing" cluster for the scenario: a small lab started here, reached only through
  # K8S_AUTH_KUBECONFIG and helm on PATH, as AWX's Kubernetes credential would reach a cluster.
  state=$(mktemp -d /tmp/tfops-molecule-existing.XXXXXX)
  trap 'python -m lab --state "$state" down' EXIT
  python -m lab --state "$state" up --tensorfusion --nodes 2
  # An existing cluster is a settled one: the lab returns while the pool's first hypervisor
  # campaign still runs, which the precheck rightly blocks on.
  python -c 'import sys; from kubernetes import config; from tests.integration.settle import settle
settle(config.new_client_from_config(sys.argv[1]))' "$state/kubeconfig"
  K8S_AUTH_KUBECONFIG="$state/kubeconfig" \
    PATH="$(dirname "$(python -c 'from lab import paths; print(paths.helm_binary("3"))')"):$PATH" \
    run_scenario existing_cluster
  python -m lab --state "$state" down
  trap - EXIT
}

scenarios=("$@")
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(default failure existing_cluster)
for name in "${scenarios[@]}"; do
  if [[ $name == existing_cluster && -z ${K8S_AUTH_KUBECONFIG:-}${K8S_AUTH_HOST:-} ]]; then
    existing_cluster
  else
    run_scenario "$name"
  fi
done
