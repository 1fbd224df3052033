"""``tenzro gateway run``: the ``tenzro_training_*`` JSON-RPC 2.0 methods over HTTP.

Layout (one job per module):

- `jsonrpc`: JSON-RPC 2.0 envelopes: parsing, request checks, params binding, batches,
  notifications, error objects and the gateway's error codes. Knows nothing of HTTP or chains.
- `params`: checks of the methods' params (task ids, integers, hex).
- `rawtx`: users' signed transactions: decode, recover the sender, check chain id, registry
  address and function.
- `relay`: simulate, broadcast and wait for a user's signed transaction.
- `methods`: the seven methods, and the chain's errors as JSON-RPC errors.
- `server`: the aiohttp server (``POST /``, ``GET /health``, the request size limit).
- `app`: builds the whole gateway from a `tenzro_operator.config.GatewayConfig`.
- `cli`: the ``tenzro gateway run`` command.

The gateway never holds a user's key. Its own optional relayer key (``keystore`` in its config)
only pays the gas of the trainers' signed submissions it relays. Method reference: ``operator/RPC.md``.

Usage::

    tenzro gateway run --config gateway.yaml
    curl -s localhost:8547 -d '{"jsonrpc":"2.0","id":1,"method":"tenzro_training_listRuns","params":{}}'
"""
