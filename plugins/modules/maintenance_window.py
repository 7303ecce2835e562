#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: maintenance_window
short_description: Enforce a maintenance window and give the rest of the run its deadline
version_added: 0.1.0
description:
  - Says whether now is inside a maintenance window, when the window ends, how much time is left,
    and a RV(deadline) (the end minus O(safety_margin)) to hand to every later task that waits.
  - Outside the window, or inside it but already past the deadline, the task fails and says when
    the next window opens, unless O(mode=report).
  - "The window comes from one of three sources: an explicit O(start) and O(end); cron expressions
    (O(cron)) with a O(duration) and a O(timezone), where a window opens at every time the
    expression fires and lasts the duration; or, when neither is given, the GPU pool's own
    C(nodeManagerConfig.nodePoolRollingUpdatePolicy.maintenanceWindow.includes) and C(maxDuration),
    read from the GPUPool or from the TensorFusionCluster's C(spec.gpuPools[].specTemplate)."
  - TensorFusion's controller does not honour the pool's C(maintenanceWindow) nor its
    C(maxDuration); this module is what enforces them.
  - Only the pool source talks to the Kubernetes API; explicit and cron windows need no cluster.
options:
  start:
    description:
      - Start of an explicit window, ISO 8601 (V(2026-11-30T02:00:00+01:00)). A time without an
        offset is read in O(timezone). Needs O(end).
    type: str
  end:
    description:
      - End of an explicit window, ISO 8601, after O(start). A time without an offset is read in
        O(timezone).
    type: str
  cron:
    description:
      - Crontab expressions (five fields - minute, hour, day of month, month, day of week - or
        V(@daily), V(@weekly) and the like). A window opens at each time any of them fires and
        lasts O(duration). Needs O(duration).
      - An expression may start with V(CRON_TZ=<zone>) (the syntax of Go's cron libraries) to be read
        in that time zone instead of O(timezone).
      - Windows that overlap or touch merge into one (a schedule that never closes is followed up
        to seven days ahead).
    type: list
    elements: str
  duration:
    description:
      - How long each cron window lasts, as a Go duration (V(4h), V(90m), V(1h30m)) or a number of
        seconds. Elapsed time, so a window across a daylight-saving change lasts exactly this long.
      - With the pool source, overrides the pool's C(maxDuration).
    type: str
  pool:
    description:
      - Name of the GPUPool (cluster-scoped, C(gpupools.tensor-fusion.ai)) whose declared window to
        use. This is the default source, used when neither O(start) nor O(cron) is given.
      - With O(cluster), the name of the pool inside that TensorFusionCluster, either its own name
        (V(shared)) or the GPUPool name the operator gives it (V(tensor-fusion-shared)).
      - Without O(pool), the only GPUPool (or the only pool of O(cluster)); several are an error.
    type: str
  cluster:
    description:
      - Read the pool's window from this TensorFusionCluster's C(spec.gpuPools[].specTemplate) (the
        configuration the operator copies into the GPUPool) instead of from the GPUPool object.
    type: str
  timezone:
    description:
      - IANA time zone (V(Europe/Berlin), V(Asia/Shanghai)) in which O(cron) expressions fire and in
        which times without an offset are read. Messages show times in it; results are in UTC.
      - The pool's C(maintenanceWindow.includes) says nothing about its time zone (upstream only
        says "crontab syntax"), so it is read in UTC unless this option, or a V(CRON_TZ=) prefix in
        the expression itself, says otherwise.
    type: str
    default: UTC
  safety_margin:
    description:
      - Time kept free at the end of the window, as a Go duration or a number of seconds. The
        RV(deadline) is the window's end minus this margin; past it the task fails (unless
        O(mode=report)) because there is no time left to start work.
    type: str
    default: 5m
  mode:
    description:
      - V(enforce) fails outside the window or past the deadline; V(report) only returns where
        things stand.
    type: str
    choices: [enforce, report]
    default: enforce
  when_undeclared:
    description:
      - What a pool without C(maintenanceWindow.includes) means. V(open) follows upstream's meaning
        (no window, no restriction) and returns RV(always_open=true) with no deadline; V(closed)
        treats the pool as never open.
    type: str
    choices: [open, closed]
    default: open
  now:
    description:
      - Evaluate at this time (ISO 8601) instead of the current time, to test a schedule or ask
        "what if". A time without an offset is read in O(timezone).
    type: str
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
  - tensorfusion.ops.auth
  - tensorfusion.ops.retry
attributes:
  platform:
    platforms: kubernetes
    support: full
    details: Talks to the Kubernetes API only to read the pool's declared window.
notes:
  - "Daylight-saving changes are handled as cron handles them: a window due at a wall-clock time the
    clock skips opens at the moment of the jump; one due at a time that occurs twice opens once, at
    the first occurrence."
  - Uses the clock of the host the module runs on (keep it in sync with NTP), unless O(now) is given.
requirements:
  - croniter >= 2.0.0 (Python library), for O(cron) and pool windows
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Refuse to start outside the pool's declared window, read from the TensorFusionCluster
  tensorfusion.ops.maintenance_window:
    cluster: tensor-fusion
    pool: shared
    timezone: Asia/Shanghai
  register: window

- name: Roll the controller; no wait goes past the window's deadline
  tensorfusion.ops.workload_restart:
    deadline: "{{ window.deadline }}"

- name: Saturday and Sunday nights, 01:00 for four hours, Berlin time
  tensorfusion.ops.maintenance_window:
    cron:
      - "0 1 * * 6,0"
    duration: 4h
    timezone: Europe/Berlin
    safety_margin: 20m

- name: A one-off change window agreed with the business
  tensorfusion.ops.maintenance_window:
    start: "2026-11-30T22:00:00+08:00"
    end: "2026-12-01T02:00:00+08:00"

- name: Only report (for a dashboard or a survey), never fail
  tensorfusion.ops.maintenance_window:
    pool: tensor-fusion-shared
    mode: report
  register: window_state
"""

RETURN = r"""
inside:
  description: Whether now is inside the window (also true inside it but past the deadline).
  returned: always
  type: bool
  sample: true
always_open:
  description: True when the pool declares no window and O(when_undeclared=open).
  returned: always
  type: bool
  sample: false
window_start:
  description: Start of the window that holds now (UTC, ISO 8601); null outside.
  returned: always
  type: str
  sample: "2026-11-29T18:02:00Z"
window_end:
  description: End of the window that holds now (UTC, ISO 8601); null outside.
  returned: always
  type: str
  sample: "2026-11-29T22:02:00Z"
time_left_seconds:
  description: Seconds from now to the window's end; null outside.
  returned: always
  type: int
  sample: 9480
deadline:
  description:
    - The window's end minus O(safety_margin) (UTC, ISO 8601), for the C(deadline) option of later
      tasks. Null outside the window and when the pool is always open.
  returned: always
  type: str
  sample: "2026-11-29T21:57:00Z"
deadline_passed:
  description: Inside the window, but the deadline is already past.
  returned: always
  type: bool
  sample: false
next_start:
  description:
    - Start of the next window (UTC, ISO 8601) - after the current one when inside. Null when none
      is scheduled (an explicit window, or always open).
  returned: always
  type: str
  sample: "2026-11-30T18:02:00Z"
next_end:
  description: End of the next window (UTC, ISO 8601), or null.
  returned: always
  type: str
  sample: "2026-11-30T22:02:00Z"
now:
  description: The time the window was evaluated at (UTC, ISO 8601).
  returned: always
  type: str
  sample: "2026-11-29T19:24:00Z"
timezone:
  description: The time zone of O(timezone), in which messages show times.
  returned: always
  type: str
  sample: Asia/Shanghai
safety_margin_seconds:
  description: O(safety_margin) in seconds.
  returned: always
  type: int
  sample: 300
source:
  description: Where the window came from.
  returned: always
  type: dict
  contains:
    type:
      description: V(explicit), V(cron) or V(pool).
      type: str
      sample: pool
    cron:
      description: The cron expressions used.
      type: list
      elements: str
      returned: for cron and pool windows
      sample: ["2 2 * * *"]
    duration_seconds:
      description: Length of each cron window in seconds.
      type: int
      returned: for cron and pool windows with a window
      sample: 14400
    pool:
      description: The GPUPool (or the TensorFusionCluster's pool entry) read.
      type: str
      returned: for pool windows
      sample: tensor-fusion-shared
    cluster:
      description: The TensorFusionCluster read, when O(cluster) was given.
      type: str
      returned: for pool windows read from a cluster
      sample: tensor-fusion
    max_duration:
      description: The pool's C(maxDuration) (its CRD default V(10m) when absent).
      type: str
      returned: for pool windows
      sample: 10m
api_server:
  description: The API server the pool was read from.
  returned: for pool windows
  type: str
  sample: https://k8s.example.com:6443
msg:
  description: Where things stand, in a sentence, with times in O(timezone).
  returned: always
  type: str
  sample: "inside the window 2026-11-30 02:02 CST to 2026-11-30 06:02 CST: 2h38m0s left, deadline 2026-11-30 05:57 CST"
"""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import RETRY_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.options import WINDOW_OPTIONS, WINDOW_RULES
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import maintenance_window as backend


def main():
    # retry_timeout: for the read of the pool's window (a runbook's window step rides out an outage).
    module = tfmodule.new_module(dict(WINDOW_OPTIONS, **RETRY_ARG_SPEC), supports_check_mode=True, **WINDOW_RULES)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
