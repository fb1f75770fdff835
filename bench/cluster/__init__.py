"""The operator on a real control plane: its cost and latency, each as a ratio against a floor in the same run.

    make bench-cluster                                  # python -m bench.cluster; see BENCHMARKS.md
    python -m bench.cluster --quick                     # a smoke run: N = 20 and 100, idle 30 s
    python -m bench.cluster --operator-path /tmp/before/operator --label before

The package: ``client`` (the benchmark's own requests, through kubernetes_asyncio's ApiClient: its kubeconfig
loading and TLS), ``informer`` (a list, then kubernetes_asyncio's watch, objects kept as JSON projections; the
pulse waiters wake on), ``proxy`` (the counting proxy, its own process), ``processes`` (what a process under
test costs, read with psutil: CPU, RSS, PSS),
``objects`` (what is created and the views kept), ``bench`` (a run's state and its run at one size) and
``scenarios/`` (one module per scenario below); ``__main__`` is the command line.

Where it runs: a local cluster of its own (``hack/cluster/localcluster.py`` with APPSCHEDULE_PORT_OFFSET=1000
and APPSCHEDULE_CLUSTER_DIR=~/.cache/appschedule-operator/bench-cluster), so it never meets the integration
tests' cluster nor an operator watching that one. It starts that cluster unless it runs, and stops it at the
end when it started it (``--keep-cluster`` keeps it).

What it measures: the operator runs as a subprocess (``<python> -m appschedule run --log-format json
--namespace NS``) whose kubeconfig names a counting proxy: plain http on loopback, forwarding every request to
the API server over TLS with the admin certificate, streaming responses chunk by chunk (watches), counting
requests by method and verb and time-stamping each one. Everything the benchmark itself does (creating
objects, the floors, watching for completion) goes straight to the API server, is not counted, and sees
completion on its own list+watch, never by sleeping.

Scenarios (``--scenarios``), each printing its figure and the ratio against a baseline measured in the run:

cold     N AppSchedules (3 tasks each, one Deployment) exist before the operator starts; from its first write
         until every CronJob exists and every AppSchedule is Ready=True. Floor: the same 3N CronJobs created
         directly, 4 requests at a time.
change   at the largest N, under a churn of 10 task-schedule edits a second to other AppSchedules: from the
         patch of a task's schedule until its CronJob shows it (p50, p99). Floor: the same done to CronJobs
         directly (patch to watch event), under the same churn.
rollout  100 AppSchedules on one Deployment: from the Deployment's image change until all 300 CronJobs run
         the new image. Floor: patching 300 CronJobs directly, 4 at a time.
idle     after convergence, at every N: the operator's requests a minute (watch and other), writes, CPU
         seconds and RSS. Against the targets (6 requests a minute, 0 writes, 150 MiB at N = 1000) and against
         a bare kopf operator watching the same objects with no-op handlers.
admission at the largest N (default 1,000), the operator started cold with both webhooks and its liveness probe:
         while it plans every AppSchedule, a Job created with a server-side dry-run (the key webhook) and the
         liveness probe 4 times a second, and an AppSchedule applied with a server-side dry-run (validation and
         its SubjectAccessReview) twice a second; p50 and p99 of each. Targets: p99 at most 100 ms for the key
         webhook and liveness, 500 ms for validation. Baseline: the same requests with the operator idle after.
restart  at the largest N: SIGKILL, a probe edit, start again; the time until the probe is applied and the
         request rate is back at its idle rate, and the writes other than the probe's (target 0). Against the
         time a bare kopf operator takes to have its watches up on the same objects.

Schedules are ``"{j} {i % 24} {D} * *"`` with D a day of the month two weeks away: no CronJob fires while the
benchmark runs, so "idle" measures the operator, not Jobs starting.
"""
