"""The runners: long-running loops over the entry points' clients.

- :mod:`fairque.runners.fair_worker`: the fair queue's worker (``fairque worker``);
- :mod:`fairque.runners.scheduler`: the scheduler's run loop and seed 002's
  ``TaskScheduler``;
- :mod:`fairque.runners.storage_worker`: seed 004's contract workers;
- :mod:`fairque.runners.manager`: seed 004's Manager, which steers them.

They report to :class:`fairque.engine.observer.Observer`, which the metrics implement, so
nothing here imports an adapter. Users import them from their public paths
(``fairque.worker``, ``fairque.scheduler``, ``fairque.storage.worker``).
"""
