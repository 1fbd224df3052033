"""``tenzro explorer``: a read-only run explorer in the browser, from the chain and the IPFS node.

Layout (one job per module):

- `sources`: where the figures come from: a lazily built read-only `ChainClient`, verified
  specs from IPFS (cached by CID, they never change), the syncer's local round records
  (held-out loss).
- `views`: the pages as JSON-ready dicts (the ``/api/...`` twins are exactly these).
- `html`: the same dicts rendered as HTML by Jinja2 with autoescaping on (a task's spec, DIDs,
  CIDs and transcript details are attacker-controlled text).
- `server`: routing, error pages and the standard-library threading HTTP server.
- `cli`: the ``tenzro explorer`` command.

Usage::

    tenzro explorer --port 8080            # then open http://127.0.0.1:8080/
    curl http://127.0.0.1:8080/api/runs    # the JSON twin of the runs page
"""
