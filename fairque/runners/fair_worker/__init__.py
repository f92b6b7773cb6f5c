"""The fair queue's worker: leases tasks, runs the registered function each names, and
acknowledges the outcome. Its public names are in :mod:`fairque.worker`."""
