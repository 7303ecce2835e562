"""Command line of the lab: ``python -m lab {install,up,down,outage,status,env}``.

It is also where the add-ons are wired in: it imports lab.tensorfusion (which registers the
``tensorfusion`` add-on) for the commands that start, stop or look at a lab."""
import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import cluster, install, paths
from .errors import InstallError, LabError
from .state import load_state


def _wire_addons():
    """Register the lab's add-ons; returns the TensorFusion module (for its add-on factory)."""
    from . import tensorfusion
    return tensorfusion


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    parser.add_argument("--state", type=Path, default=paths.default_state_dir(),
                        help="state folder of this lab (default: %(default)s; env TFOPS_LAB_STATE)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_install = sub.add_parser("install", help="install packages, build and cache the binaries "
                                               "(idempotent)")
    p_install.add_argument("--kube-version", action="append", default=[], metavar="MINOR",
                           choices=list(paths.KUBE_RELEASES),
                           help="also build this Kubernetes minor (repeatable; the default "
                                f"{paths.DEFAULT_KUBE_MINOR} is always built)")
    p_up = sub.add_parser("up", help="start the lab; returns when the API server is ready")
    p_up.add_argument("--nodes", type=int, default=3, help="GPU nodes (default %(default)s)")
    p_up.add_argument("--kube-version", default=paths.DEFAULT_KUBE_MINOR, metavar="MINOR",
                      choices=list(paths.KUBE_RELEASES),
                      help="Kubernetes minor to run: %(choices)s (default %(default)s; built "
                           "and cached on first use)")
    p_up.add_argument("--cpu-nodes", type=int, default=1)
    p_up.add_argument("--ready-delay", type=float, default=0.5,
                      help="seconds from bound to Ready for a Pod")
    p_up.add_argument("--no-node-lifecycle", action="store_true",
                      help="leave out the node-lifecycle controller (for very large node counts)")
    p_up.add_argument("--leader-elect", action="store_true",
                      help="kube-controller-manager elects its leader through its Lease, as a "
                           "production control plane does (a restart then waits for the Lease)")
    p_up.add_argument("--tensorfusion", action="store_true",
                      help="also install TensorFusion: CRDs, operator double, webhook, chart")
    p_up.add_argument("--operator-binary", default=os.environ.get("TFOPS_OPERATOR_BINARY") or None,
                      metavar="PATH", help="with --tensorfusion: run TensorFusion's own operator, this "
                                           "binary (built by hand, outside the repository), instead of "
                                           "the double (default: $TFOPS_OPERATOR_BINARY)")
    p_up.add_argument("--chart-version", default=None,
                      help="test chart version to install (default: the older one)")
    p_up.add_argument("--namespace", default=None,
                      help="release (and operator) namespace of TensorFusion "
                           "(default: tensor-fusion-sys)")
    sub.add_parser("down", help="stop exactly the processes this lab started; remove its state")
    p_out = sub.add_parser("outage", help="stop kube-apiserver (or etcd, or "
                                          "kube-controller-manager) for some seconds, then start "
                                          "it again with the same flags")
    p_out.add_argument("--seconds", type=float, default=5.0)
    p_out.add_argument("--component", default="kube-apiserver", choices=list(cluster.OUTAGE_COMPONENTS))
    sub.add_parser("status", help="print the lab's state as JSON")
    sub.add_parser("env", help="print shell exports for KUBECONFIG, helm and kubectl")
    args = parser.parse_args(argv)
    try:
        # install and env need no add-on (install runs before the Python tools are in place)
        tensorfusion = None if args.cmd in ("install", "env") else _wire_addons()
        if args.cmd == "install":
            install.ensure_all(args.kube_version)
        elif args.cmd == "up":
            started = time.monotonic()
            addons = [tensorfusion.addon(chart_version=args.chart_version, namespace=args.namespace,
                                         operator_binary=args.operator_binary)] if args.tensorfusion else []
            state = cluster.up(args.state, nodes=args.nodes, cpu_nodes=args.cpu_nodes,
                               ready_delay=args.ready_delay,
                               node_lifecycle=not args.no_node_lifecycle,
                               leader_elect=args.leader_elect, addons=addons,
                               kube_version=args.kube_version)
            print(f"lab up in {time.monotonic() - started:.1f}s: {state['server']} "
                  f"(KUBECONFIG={state['kubeconfig']})", file=sys.stderr)
        elif args.cmd == "down":
            cluster.down(args.state)
        elif args.cmd == "outage":
            cluster.outage(args.state, args.seconds, args.component)
        elif args.cmd == "status":
            info = cluster.status(args.state)
            print(json.dumps(info, indent=2))
            return 0 if info["running"] else 1
        elif args.cmd == "env":
            state = load_state(args.state.resolve())
            if not state:
                print(f"no lab in {args.state}", file=sys.stderr)
                return 1
            print(f"export KUBECONFIG={state['kubeconfig']}")
            print(f"export TFOPS_LAB_HELM3={paths.helm_binary('3')}")
            print(f"export TFOPS_LAB_HELM4={paths.helm_binary('4')}")
            print(f"export PATH={paths.helm_dir('4')}:$PATH")
    except (LabError, InstallError) as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
