"""Local servers for development and tests: the embedded Valkey (the default when no URL
is given), a local Valkey or Redis Cluster, and a local Tarantool. Nothing here knows
about queues; the layers above start these and point their clients at them."""
