"""The shell: everything that talks to the cluster, keeps state, or runs concurrently.

Invariant: it reads, calls the core, and writes; it decides nothing the core could decide. kopf wiring
(handlers.py), the admission process (webhook_server.py), the controller and its work queue, the writer
(writer.py: one method per kind of write), the store
fed by the watches, the API adapter (api.py), metrics and certificates.
"""
