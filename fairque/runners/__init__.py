"""The runners: long-running loops over the entry points' clients.

- :mod:`fairque.runners.fair_worker`: the fair queue's worker (``fairque worker``);
- :mod:`fairque.runners.scheduler`: the scheduler's run loop and
  ``TaskScheduler``;
- :mod:`fairque.runners.storage_worker`: the storage's contract workers;
- :mod:`fairque.runners.manager`: the storage's Manager, which steers them;
- :mod:`fairque.runners.dispatcher`: the JQ master's dispatcher, which sends jobs to
  HTTP workers;
- :mod:`fairque.runners.http_worker`: what an HTTP worker runs (the worker API that
  receives the jobs is :mod:`fairque.http.worker`).

They report to :class:`fairque.engine.observer.Observer`, which the metrics implement, so
nothing here imports an adapter. Users import ``Worker`` and ``TaskScheduler`` from
``fairque`` (and ``fairque.worker``), the storage worker's names from
:mod:`fairque.runners.storage_worker`; no entry point re-exports its runner.
"""
