"""The test kit: what every tier that talks to a real cluster shares (integration, e2e, soak, the chart
tests and the cluster benchmark).

* ``wait``: waiting on a condition with a deadline (never a bare sleep), sync and async;
* ``operator``: the operator launched for real, ``python -m appschedule ARGS``, its output in a log;
* ``chart``: kubectl and helm against the cluster under test, and the chart's operator run here as the
  chart's ServiceAccount;
* the certificate helper is the operator's own, ``appschedule.shell.certs`` (a CA and the certificates it
  signs), used by the webhook server, the tests and the local cluster's PKI alike;
* the API's constants (group, version, plural, labels, finalizer) come from ``appschedule.core.naming``.

The line the kit does not cross: the soak's ground truth (tests/soak/groundtruth.py) reads the API
server's audit log and imports nothing of the operator or of this kit, not even its constants, so a
mistake in the operator's names cannot hide in both sides of the comparison.
"""
