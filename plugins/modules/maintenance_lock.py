#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: maintenance_lock
short_description: Take, renew or release the cluster's maintenance lock (a Kubernetes Lease)
version_added: 0.1.0
description:
  - A C(coordination.k8s.io/v1) Lease that at most one runbook holds, so that a scheduled job and
    a person never change one cluster at once.
  - O(state=acquired) takes the lock. When someone else holds it and keeps renewing it, the task
    fails at once and says who holds it and since when. When its holder stopped renewing it for
    longer than the Lease's duration, the lock is taken over, with a warning. When the holder is
    a run of this host whose C(ansible-playbook) process is provably gone (see O(run_id)), the lock
    is taken over at once, with a warning. When the caller
    already holds it, it is renewed (its TTL starts again).
  - O(state=released) gives the lock back. Releasing a lock someone else holds is refused, unless
    O(force=true).
  - Writes use the Lease's C(resourceVersion) (and a create fails if the Lease appeared meanwhile),
    so two acquirers can never both win; the loser reads the Lease again and fails with the winner's
    name.
  - The holder identity is built from the user, the host, the AWX / Automation Controller job id
    (E(JOB_ID), E(AWX_JOB_ID) or E(TOWER_JOB_ID), when set) and O(purpose), for example
    C(alice@bastion purpose=upgrade) or C(runner@automation-job-42-x7k2p job=42 purpose=upgrade).
    It is also recorded in C(tensorfusion.ops/*) annotations of the Lease.
  - Releasing keeps the Lease (with no holder) so that a Role limited to C(get) and C(update) on
    this one Lease name is enough once it exists.
options:
  state:
    description:
      - V(acquired) takes or renews the lock; V(released) gives it back.
    type: str
    choices: [acquired, released]
    default: acquired
  name:
    description: Name of the Lease.
    type: str
    default: tensorfusion-ops-maintenance
  namespace:
    description: Namespace of the Lease (the release's namespace). It must exist.
    type: str
    default: tensor-fusion-sys
  purpose:
    description:
      - What the holder is doing (V(upgrade), V(rotate-license)); part of the holder identity, so a
        run with another purpose is another holder.
    type: str
    default: maintenance
  holder:
    description:
      - The holder identity to use instead of the one built from user, host, job id and purpose.
      - Two runs by the same user on the same host with the same purpose and no job id are one
        holder (the second renews the first's lock); give each a distinct O(holder) (or
        O(purpose)) when that can happen.
      - One line of printable text, at most 256 characters (as O(purpose)); anything else is
        refused before anything is written (it goes into logs, reports and the Lease).
    type: str
  run_id:
    description:
      - A token of this run (random, the same for every task of one run). With it the holder
        identity also names the C(ansible-playbook) process and the token, for example
        C(alice@bastion pid=4242 run=k3j2h4g5q1 purpose=upgrade), so that two runs by one user on one
        host are two holders and the second is refused. The runbooks set it (C(tfops_run_id)).
      - With it the Lease also records that process in the annotation C(tensorfusion.ops/process)
        (its pid, its start time, the host's boot id and pid namespace). A later O(state=acquired)
        on the same host, boot and pid namespace that finds that pid no longer running (or running
        a process started at another time) takes the lock over at once, with a warning, instead of
        waiting for the TTL (a run killed with C(kill -9)). A holder on another host, or one that
        recorded no process, keeps the TTL rule.
    type: str
  ttl:
    description:
      - Seconds the lock stays valid without a renewal (the Lease's C(leaseDurationSeconds)).
        Renew it (run the module again with O(state=acquired)) before long steps, choose a TTL
        longer than the run, or let O(heartbeat) renew it.
      - At most 86400 (a day); 0 or more than a day is refused before anything is written.
    type: int
    default: 1800
  force:
    description:
      - With O(state=released), release the lock even when another holder holds it (to clear the
        lock of a run that died). A warning names the holder.
    type: bool
    default: false
  retry_timeout:
    description:
      - Seconds during which a request that fails in a way that can heal (the API server refuses
        connections or resets them while it restarts, answers 429 or 5xx) is tried again, with
        capped exponential backoff; each outage ridden out becomes a warning.
      - V(0) (the default) fails at the first such error, which is right for taking the lock at the
        start of a run. The runbooks retry the renewal before a rollback and the release at the
        end, so that a short outage neither starts a rollback against an absent API server nor
        leaves the lock held.
      - A write is sent again only when it cannot have been applied; every write carries the
        Lease's C(resourceVersion), so a retry never overwrites someone else's lock.
    type: int
    default: 0
  heartbeat:
    description:
      - With O(state=acquired), start the lock's warden when the lock is taken, a small process
        in a session of its own, that renews the Lease whenever a third of O(ttl) has passed for
        as long as this run's C(ansible-playbook) process runs, and releases the lock at once when
        that process ends while the Lease still names the run (Ctrl-C, SIGTERM from a cancelled
        AWX job, kill -9), writing why in the Lease's C(tensorfusion.ops/released-why)
        annotation. Before that release it pauses, as a deadline does (autoUpdate false, recorded
        in the cluster's pause marker, resumed by the same change run again), the GPU-pool
        rollouts that M(tensorfusion.ops.gpupool_rollout) tasks of the run were waiting for and
        that are still under way (the Lease's C(tensorfusion.ops/rolling) annotation names them
        while they wait), so that no campaign rolls on unwatched. It ends, writing nothing, once the Lease no longer names the run (released or
        lost). Its settings reach it on its standard input, never in a file or its command line.
      - So a short O(ttl) is safe for a long run, and a run that stops renewing (its container
        torn down with its warden) is taken over from any host once O(ttl) has passed. The
        runbooks take their lock this way, with a TTL of 120 seconds.
      - Needs the module to run where the run's C(ansible-playbook) runs (connection local); else
        it fails before anything is written.
    type: bool
    default: false
  report:
    description:
      - Where this run's report goes (as M(tensorfusion.ops.run_report) stores it), kept in the
        Lease's C(tensorfusion.ops/record) annotation while the run holds the lock. A run that
        ends without releasing the lock gets a record of status C(interrupted) there in its stead
        (who held the lock and since when, the rollouts it was waiting for and where they stand,
        what was paused, the Helm release's newest revision), written by its warden (O(heartbeat))
        after the pause, or, when the warden died with the run, by the run that takes the lock
        over. A report the run wrote itself is never replaced. Best effort; the Lease's
        C(tensorfusion.ops/released-why) and the taking run's warning name the record or say why
        it could not be written.
      - The runbooks set it.
    type: dict
    suboptions:
      namespace:
        description: The namespace of the report ConfigMaps (the release's).
        type: str
        required: true
      release:
        description: The Helm release whose newest revision the record shows.
        type: str
      playbook:
        description: The runbook's name (the report's label).
        type: str
        required: true
      inventory_host:
        description: The inventory host of the run.
        type: str
        required: true
      started:
        description: When the run started (ISO 8601), as its report says.
        type: str
        required: true
      keep:
        description: How many reports of the runbook are kept (older ones are deleted).
        type: int
        default: 10
      store:
        description:
          - Where the record goes, as the run's report would - V(cluster) (a ConfigMap in
            O(report.namespace)), V(local) (O(report.dest), by the warden only) or V(both).
        type: str
        choices: [local, cluster, both]
        default: both
      dest:
        description: A local folder where the warden also writes the record (the run's own report folder).
        type: path
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
attributes:
  check_mode:
    details: Reads the Lease and says what it would do (and fails when the lock is held); writes nothing.
  diff_mode:
    support: full
    details: Shows the Lease's annotations and spec before and after.
  idempotent:
    support: partial
    details: Acquiring a lock this holder already holds renews it (a write); releasing a free lock writes nothing.
notes:
  - The Lease's times, and whether its holder stopped renewing, follow the API server's clock (read
    from the C(Date) header of one request, to about a second), so hosts whose clocks disagree still
    agree on when a lock expires; an offset of 30 seconds or more is reported as a warning.
  - RBAC needs C(get), C(create) and C(update) on C(leases) of C(coordination.k8s.io) in
    O(namespace) (and the C(/version) endpoint, which every user may read by default).
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Take the maintenance lock for this upgrade (fails at once if someone holds it)
  tensorfusion.ops.maintenance_lock:
    purpose: upgrade
    ttl: 3600
  register: lock

- name: The runbook, with the lock given back whatever happens
  block:
    - name: Upgrade the chart
      ansible.builtin.debug:
        msg: the upgrade runs here, as {{ lock.holder }}

    - name: Renew the lock before the long GPU-pool rollout
      tensorfusion.ops.maintenance_lock:
        purpose: upgrade
        ttl: 3600
  always:
    - name: Release the lock
      tensorfusion.ops.maintenance_lock:
        purpose: upgrade
        state: released

- name: Clear the lock of a run that died (names the holder in a warning)
  tensorfusion.ops.maintenance_lock:
    state: released
    force: true
"""

RETURN = r"""
action:
  description:
    - What was (or in check mode would be) done. V(create) (no Lease existed), V(take) (a free
      Lease), V(renew) (already held by this holder), V(take_over) (the holder stopped renewing),
      V(release), V(force_release), or V(none) (nothing to release).
  returned: always
  type: str
  sample: create
holder:
  description: The holder identity of this run.
  returned: always
  type: str
  sample: alice@bastion job=42 purpose=upgrade
lease:
  description: The lock as the Lease now says (in check mode, as it would be).
  returned: success
  type: dict
  contains:
    name:
      description: Name of the Lease.
      type: str
      sample: tensorfusion-ops-maintenance
    namespace:
      description: Namespace of the Lease.
      type: str
      sample: tensor-fusion-sys
    holder:
      description: The holder identity; null when nobody holds the lock.
      type: str
      sample: alice@bastion job=42 purpose=upgrade
    acquire_time:
      description: When the holder took the lock (UTC).
      type: str
      sample: "2026-11-30T02:00:03.120000Z"
    renew_time:
      description: When the holder last renewed it (UTC).
      type: str
      sample: "2026-11-30T02:40:11.532000Z"
    expires:
      description: When the lock goes stale without a renewal (UTC).
      type: str
      sample: "2026-11-30T03:40:11.532000Z"
    lease_duration_seconds:
      description: The TTL in seconds.
      type: int
      sample: 3600
    transitions:
      description: How many times the lock changed holder (the Lease's C(leaseTransitions)).
      type: int
      sample: 3
    purpose:
      description: The holder's purpose.
      type: str
      sample: upgrade
    user:
      description: The holder's user.
      type: str
      sample: alice
    host:
      description: The holder's host.
      type: str
      sample: bastion
    job_id:
      description: The holder's AWX job id, if any.
      type: str
      sample: "42"
    stale:
      description: Whether the holder stopped renewing past the TTL.
      type: bool
      sample: false
    resource_version:
      description: The Lease's resourceVersion.
      type: str
      sample: "48213"
previous:
  description: The lock as it was before this task (same keys as RV(lease)); null when no Lease existed.
  returned: success
  type: dict
previous_record:
  description:
    - When this task took the lock over from a run that did not finish and whose warden did not
      release it, where it wrote that run's record (a C(configmap://namespace/name) reference);
      null when it could not (a warning says why).
  returned: when the lock was taken over from a holder whose Lease named its report
  type: str
  sample: configmap://tensor-fusion-sys/tfops-report-upgrade-prod-20261207t020000z-k3x9q0m2a7bc
warden:
  description:
    - The lock's warden started by this task (O(heartbeat)); absent when none was started (a
      renewal, a release, check mode, O(heartbeat=false)).
  returned: when a warden was started
  type: dict
  contains:
    pid:
      description: The warden's process id on this host.
      type: int
  sample: {"pid": 4711}
clock_offset_seconds:
  description:
    - Seconds between this host's clock and the API server's (the server's minus this host's), as
      measured for this task; 0 when below two seconds.
  returned: success, and on failure when another holder holds the lock
  type: float
  sample: 0.0
conflicts:
  description:
    - How many times another writer changed the Lease between this task's read and its write (each
      time the task read it again and decided anew).
  returned: success, and on failure when another holder holds the lock
  type: int
  sample: 0
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
"""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import maintenance_lock as backend


def main():
    module = tfmodule.new_module(
        dict(state=dict(type="str", default="acquired", choices=["acquired", "released"]),
             name=dict(type="str", default="tensorfusion-ops-maintenance"),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             purpose=dict(type="str", default="maintenance"),
             holder=dict(type="str"),
             run_id=dict(type="str"),
             ttl=dict(type="int", default=1800),
             force=dict(type="bool", default=False),
             retry_timeout=dict(type="int", default=0),
             heartbeat=dict(type="bool", default=False),
             report=dict(type="dict", options=dict(
                 namespace=dict(type="str", required=True), release=dict(type="str"),
                 playbook=dict(type="str", required=True), inventory_host=dict(type="str", required=True),
                 started=dict(type="str", required=True), keep=dict(type="int", default=10),
                 store=dict(type="str", choices=["local", "cluster", "both"], default="both"),
                 dest=dict(type="path")))),
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
