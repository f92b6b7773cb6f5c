"""The fair queue's sans-IO core, one module per concept: each function builds the
:class:`~fairque.engine.calls.Call` of one operation in one namespace, checking its
arguments first, and parses the script's reply into models. Nothing here does I/O: the
clients send the calls through an executor, over one namespace or the shards of one
queue (the policy each operation names in :mod:`fairque.queue.async_client`)."""
