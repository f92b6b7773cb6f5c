"""Pipelines of @task steps (seed 000's examples), submitted atomically, run many times."""

from __future__ import annotations

import pytest

from fairque import FairQueue, InvalidInput
from fairque.worker import Pipeline, Registry, task

pytestmark = pytest.mark.cluster

steps = Registry()


@task(into=steps, name="extract_data", task_id="extract")
def extract_data() -> dict[str, int]:
    return {"records": 1000}


@task(into=steps, name="transform_data", task_id="transform", depends_on=["extract"])
def transform_data() -> dict[str, int]:
    return {"processed": 2000}


@task(into=steps, name="load_data", task_id="load", depends_on=["transform"])
def load_data() -> dict[str, bool]:
    return {"loaded": True}


@task(into=steps, name="prepare", task_id="prepare")
def prepare() -> None: ...


@task(into=steps, name="process_a", task_id="process_a", depends_on=["prepare"])
def process_a() -> None: ...


@task(into=steps, name="process_b", task_id="process_b", depends_on=["prepare"])
def process_b() -> None: ...


@task(into=steps, name="combine", task_id="combine", depends_on=["process_a", "process_b"])
def combine() -> None: ...


def drain_in_order(queue: FairQueue) -> list[list[str]]:
    """Runs the queue to empty, one wave of ready tasks at a time: the step names per wave."""
    waves = []
    while leased := queue.pop(count=100):
        queue.finish_many(leased)
        waves.append(sorted(task.task_id.split(".", 1)[1] for task in leased))
    return waves


def test_a_linear_pipeline_runs_in_order(queue: FairQueue) -> None:
    run = Pipeline(load_data, transform_data, extract_data).build(user_id="alice", run_id="r1")
    assert [task.task_id for task in run] == ["r1.load", "r1.transform", "r1.extract"]
    queue.push_many(run)
    assert drain_in_order(queue) == [["extract"], ["transform"], ["load"]]


def test_fan_out_fan_in_runs_many_times_at_once(queue: FairQueue) -> None:
    pipeline = Pipeline(prepare, process_a, process_b, combine)
    for _ in range(3):
        queue.push_many(pipeline.build(user_id="bob"))
    waves = drain_in_order(queue)
    assert waves == [["prepare"] * 3, ["process_a"] * 3 + ["process_b"] * 3, ["combine"] * 3]


def test_step_arguments_and_options(queue: FairQueue) -> None:
    run = Pipeline(extract_data).build(user_id="u", run_id="x", arguments={"extract": [1]},
                                        keep_result=True)  # fmt: skip
    assert (run[0].payload, run[0].keep_result) == ({"args": [1], "kwargs": {}}, True)


def test_unknown_steps_and_duplicates_are_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown steps: extract"):
        Pipeline(transform_data, load_data)
    with pytest.raises(InvalidInput, match="same task_id"):
        Pipeline(extract_data, extract_data)
