"""What a failed request to the API server means: one table, one function, for every write the shell makes.

The shell passes the answer's HTTP status (0: no answer) and body; what it does with the meaning is the
shell's (a task's CronJob kept and the spec named, a status let go, a back-off):

* ``refused``: the API server says the object is invalid (400, 422, a server-side apply whose typed patch
  does not fit the schema): the object is at fault and sending it again cannot help;
* ``too-large``: the object is over the API server's or etcd's size limit (413, or etcd's limit passed on as a
  500): sending it again cannot help either;
* ``ours``: we may not do it (403: RBAC, a quota, a terminating namespace; 404: the namespace is gone): the
  operator's or the cluster's problem, retried with back-off;
* ``conflict``: 409, a resourceVersion precondition or a create that found the name taken;
* ``transient``: the API server (or etcd behind it) is away or not ready yet (no answer, 429, 5xx): retried
  soon;
* ``other``: anything else (401, an unexpected status): retried with back-off.
"""

from __future__ import annotations

from typing import Literal

Failure = Literal["refused", "too-large", "ours", "conflict", "transient", "other"]

# (status, a phrase the body must hold or None, failure): the first row that matches decides
TABLE: tuple[tuple[int, str | None, Failure], ...] = (
    (413, None, "too-large"),
    (500, "too large", "too-large"),  # etcd: "etcdserver: request is too large"
    (500, "typed patch", "refused"),  # server-side apply of an object the schema does not take
    (400, None, "refused"),
    (422, None, "refused"),
    (403, None, "ours"),
    (404, None, "ours"),
    (409, None, "conflict"),
    (0, None, "transient"),  # no answer
    (429, None, "transient"),
    (500, None, "transient"),
    (502, None, "transient"),
    (503, None, "transient"),
    (504, None, "transient"),
)


def classify(status: int | None, body: object = None) -> Failure:
    """What a failed request means (see the module docstring); ``body`` is the answer's, read as text."""
    text = str(body or "").lower()
    for code, phrase, failure in TABLE:
        if (status or 0) == code and (phrase is None or phrase in text):
            return failure
    return "other"
