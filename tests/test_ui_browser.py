"""The Web UI in headless Chromium (Debian's ``chromium`` and ``chromium-driver``), driven
by Selenium against a real master on a real server.

Selenium drives the browser through the ``chromedriver`` Debian ships with the same
Chromium version, so nothing is downloaded. Set ``FAIRQUE_SCREENSHOTS=docs/screenshots``
to keep the screenshots of the main pages there (the README shows them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TypedDict

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from fairque import ErrorReport, FairQueue, Priority, QueueSettings, Task, TaskState
from fairque.http.master import MasterConfig, create_master
from fairque.jobs import Constraint, Job, Matcher, Success
from fairque.jobs.client import JobQueue
from fairque.queue import WorkerInfo
from fairque.runners.scheduler import TaskScheduler
from fairque.servers.embedded import LocalServer, free_port
from tests.test_http_workers import serving

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
TOKEN = "browser-s3cret"
WAIT = 15.0  # seconds any wait on the page may take

pytestmark = [
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
    ),
    # One engine is enough for the pages; the data routes run on both in test_ui_api.
    pytest.mark.parametrize("server", ["valkey"], indirect=True),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()  # ends chromedriver and the browser it started


@pytest.fixture
def ui(
    server: LocalServer, namespace: str, browser: webdriver.Chrome
) -> Iterator[Callable[[str], None]]:
    """Serves a master with a token; returns a function that opens a page of its UI,
    logged in."""
    settings = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)
    config = MasterConfig(url=server.url, namespace=namespace, token=TOKEN, settings=settings)
    app = create_master(config)
    with serving(app, free_port()) as url:
        browser.get(f"{url}/ui")
        browser.execute_script("sessionStorage.clear()")

        def open_page(route: str) -> None:
            browser.get(f"{url}/ui#{route}")
            if not browser.execute_script("return sessionStorage.length"):
                log_in(browser, TOKEN)

        yield open_page


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    kept = os.environ.get("FAIRQUE_SCREENSHOTS")
    folder = Path(kept) if kept else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def wait(browser: webdriver.Chrome, probe: Callable[[], object]) -> None:
    def check(_: object) -> object:
        try:
            return probe()
        except (NoSuchElementException, StaleElementReferenceException):
            return False  # not there yet, or replaced by a refresh

    WebDriverWait(browser, WAIT, poll_frequency=0.1).until(check)


def element(browser: webdriver.Chrome, css: str) -> WebElement:
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, css))
    return browser.find_element(By.CSS_SELECTOR, css)


def text_of(browser: webdriver.Chrome, css: str) -> str:
    try:
        return str(browser.find_element(By.CSS_SELECTOR, css).text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def log_in(browser: webdriver.Chrome, token: str) -> None:
    field = element(browser, "#token")
    wait(browser, field.is_displayed)
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()


def confirm(browser: webdriver.Chrome, button: str) -> str:
    """Clicks ``button``, accepts the confirmation it asks for; returns the outcome shown."""
    element(browser, button).click()

    def accepted() -> bool:
        try:
            browser.switch_to.alert.accept()
        except NoAlertPresentException:
            return False
        return True

    wait(browser, accepted)
    wait(browser, lambda: element(browser, "#flash").is_displayed())
    return text_of(browser, "#flash")


def points(browser: webdriver.Chrome) -> int:
    """How many samples the throughput chart draws."""
    lines = browser.find_elements(By.CSS_SELECTOR, "figure.chart polyline")
    return len((lines[0].get_attribute("points") or "").split()) if lines else 0


def count(browser: webdriver.Chrome, state: str) -> str:
    return text_of(browser, f'[data-state="{state}"] .count')


def test_log_in_and_watch_counts_change_as_tasks_run(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    ui("/overview")
    wait(browser, lambda: count(browser, "queued") == "0")
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-token") == "required"
    element(browser, "#logout").click()
    wait(browser, lambda: not element(browser, "#logout").is_displayed())
    assert element(browser, "#login").is_displayed()
    log_in(browser, "wrong")
    wait(browser, lambda: "refused" in text_of(browser, "#login-error"))
    log_in(browser, TOKEN)
    wait(browser, lambda: count(browser, "queued") == "0")

    queue.push_many([Task(user_id="alice", payload=n) for n in range(5)])
    wait(browser, lambda: count(browser, "queued") == "5")
    for task in queue.pop(count=2):
        queue.finish(task)
    wait(browser, lambda: count(browser, "finished") == "2" and count(browser, "queued") == "3")
    wait(browser, lambda: "alice" in text_of(browser, "#live table"))


def test_without_a_token_there_is_no_sign_in_form_and_no_log_out(
    server: LocalServer, namespace: str, browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push(Task(user_id="alice"))
    with serving(
        create_master(MasterConfig(url=server.url, namespace=namespace)), free_port()
    ) as url:
        browser.get(f"{url}/ui#/overview")  # a new port: a new origin, no token kept
        # The page has asked the server (data-token), and shows data at once.
        wait(browser, lambda: count(browser, "queued") == "1")
        body = browser.find_element(By.TAG_NAME, "body")
        wait(browser, lambda: body.get_attribute("data-token") == "none")
        assert element(browser, "#nav").is_displayed()
        assert not element(browser, "#logout").is_displayed()
        assert not element(browser, "#login").is_displayed()
        # A page that loads data, and one that does not.
        for route, title in (("#/tenants", "Tenants"), ("#/nope", "Page not found")):
            browser.execute_script("location.hash = arguments[0]", route)
            wait(browser, partial(lambda t: text_of(browser, "#view h1") == t, title))
            assert not element(browser, "#logout").is_displayed()
            assert not element(browser, "#login").is_displayed()


def test_a_script_in_a_payload_stays_text_and_a_failed_task_is_retried(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    attack = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    task_id = queue.push(Task(user_id="mallory", payload={"note": attack}, max_retries=0))
    (leased,) = queue.pop()
    queue.fail(leased, ErrorReport(f"<b>boom</b>{attack}", "Evil", f"Traceback\n{attack}"))

    ui("/tasks?state=failed")
    element(browser, f'a[href="#/task/{task_id}"]').click()
    # The payload shows as JSON text (its quotes escaped), the error as it is, and the
    # failed attempt with its traceback.
    wait(browser, lambda: "<script>window.pwned = 1</script>" in text_of(browser, "#payload"))
    wait(browser, lambda: attack in text_of(browser, "#last-error"))
    assert text_of(browser, "#traceback") == f"Traceback\n{attack}"
    assert "Evil" in text_of(browser, "#failed-attempts")
    assert f"<b>boom</b>{attack}" in text_of(browser, "#failed-attempts tr.note")
    attempts = browser.execute_script(
        "const box = document.querySelector('#failed-attempts').parentElement;"
        " return [box.scrollWidth, box.clientWidth]"
    )
    assert attempts[0] <= attempts[1]  # in its half of the page, the type in view
    assert browser.execute_script("return window.pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, "#live img, #live script, #live b")

    assert "queued again" in confirm(browser, "button.retry")
    info = queue.get(task_id)
    assert info is not None
    assert info.state.value == "queued"
    wait(browser, lambda: "queued" in text_of(browser, "#live table"))
    assert browser.execute_script("return window.pwned") is None


def test_the_task_page_shows_progress_and_log_lines_as_they_come(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    task_id = queue.push(Task(user_id="alice", name="report", headers={"traceparent": "00-ab"}))
    (leased,) = queue.pop()
    queue.report(leased, 25.0, "a quarter", ["<b>first</b> line"])
    ui(f"/task/{task_id}")
    wait(browser, lambda: "a quarter" in text_of(browser, "#live table"))
    assert "traceparent: 00-ab" in text_of(browser, "#live table")  # a map, not [object Object]
    assert "[object Object]" not in text_of(browser, "#live table")
    assert text_of(browser, "#logs") == "<b>first</b> line"  # text, never markup
    queue.report(leased, 50.0, "half", ["second line"])
    wait(browser, lambda: "half" in text_of(browser, "#live table"))  # refreshed by itself
    wait(browser, lambda: text_of(browser, "#logs") == "<b>first</b> line\nsecond line")
    assert not browser.find_elements(By.CSS_SELECTOR, "#live b")
    # A running task has a Cancel button too: its worker stops the run.
    assert "canceled" in confirm(browser, "button.cancel")
    info = queue.get(task_id)
    assert info is not None
    assert info.state.value == "canceled"
    assert queue.finish_many([leased]) == [task_id]  # the lease went with it


def test_cancel_a_queued_task_and_requeue_a_tenant(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    waiting = queue.push(Task(user_id="bob", task_id="later", delay=600))
    queue.push_many([Task(user_id="carol", max_retries=0) for _ in range(3)])
    for task in queue.pop(count=3):
        queue.fail(task, "down")

    ui("/tasks?state=scheduled")
    element(browser, f'a[href="#/task/{waiting}"]')
    assert "canceled" in confirm(browser, "button.cancel")
    info = queue.get(waiting)
    assert info is not None
    assert info.state.value == "canceled"

    ui("/tenants")  # the busiest: carol has no ready task, so she is found by name
    element(browser, "#tenant-search input").send_keys("carol\n")
    assert "3 failed task(s) of carol queued again" in confirm(browser, "button.requeue")
    assert queue.stats().tenants["carol"].queued == 3


def rows_of(browser: webdriver.Chrome, css: str) -> dict[str, list[str]]:
    """A table's rows by their first cell: the cells' texts, read in one script (a
    refresh cannot replace the table halfway)."""
    script = (
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),"
        " (row) => Array.from(row.cells, (cell) => cell.innerText))"
    )
    rows: list[list[str]] = browser.execute_script(script, css)
    return {cells[0]: cells for cells in rows}


def test_the_failed_list_shows_each_error_cut_short_and_whole_on_hover(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    long = "Traceback (most recent call last):\n" + "  File 'x.py', line 1\n" * 50 + "KeyError"
    errors = {"short": "upstream timed out", "long": long}
    for task_id, error in errors.items():
        queue.push(Task(user_id="u", task_id=task_id, max_retries=0))
        (task,) = queue.pop()
        queue.fail(task, error)

    ui("/tasks?state=failed")
    wait(browser, lambda: len(browser.execute_script(FAILED_ERRORS)) == 2)
    shown_errors = dict(browser.execute_script(FAILED_ERRORS))
    assert shown_errors["short"] == "upstream timed out"
    shown = shown_errors["long"]
    assert len(shown) == 80  # one line, cut
    assert shown == " ".join(long.split())[:79] + "…"
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('#task-list .last-error'), (e) => e.title)"
    )
    assert sorted(titles) == sorted(errors.values())  # the whole text on hover
    assert "state" not in text_of(browser, "#task-list thead")  # failed, every one
    ui("/tasks?state=queued")  # other lists have their state column and no error line
    wait(browser, lambda: text_of(browser, "#live .empty") == "No tasks in this state.")
    queue.push(Task(user_id="u"))
    wait(browser, lambda: rows_of(browser, "#task-list"))
    assert "state" in text_of(browser, "#task-list thead")
    assert not browser.find_elements(By.CSS_SELECTOR, "#task-list tr.note")


# The failed list's errors by task id: each on the line beneath its task's row.
FAILED_ERRORS = """
    return Array.from(document.querySelectorAll("#task-list tr.note"), (note) =>
        [note.previousElementSibling.cells[0].innerText, note.innerText]);
"""
# Where the failed list's table and its Retry buttons end against the box it scrolls in.
FAILED_FIT = """
    const box = document.querySelector("#task-list").closest(".table-scroll");
    const edge = Math.min(box.getBoundingClientRect().right, window.innerWidth);
    return {
        width: window.innerWidth,
        scroll: box.scrollWidth,
        client: box.clientWidth,
        cut: Array.from(box.querySelectorAll("button.retry"),
            (b) => b.getBoundingClientRect().right).filter((right) => right > edge),
    };
"""


def test_the_failed_list_fits_its_box_with_every_retry_button_in_view(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    # Tasks as a queue holds them: generated ids, an error longer than the line shows.
    for tenant in ("acme", "globex", "initech"):
        queue.push(Task(user_id=tenant, name="render_report", max_retries=0))
    error = "upstream timed out after 30 s while rendering the monthly report " * 3
    for task in queue.pop(count=3, worker_id="worker-1"):
        queue.fail(task, error)
    ui("/tasks?state=failed")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#task-list .retry")) == 3)
    try:
        for width in (1024, 1280, 1440, 1920):
            metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
            fit = browser.execute_script(FAILED_FIT)
            assert fit["width"] == width
            assert fit["scroll"] <= fit["client"], fit
            assert fit["cut"] == [], fit
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_workers_idle_ones_too_with_what_they_hold(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="u", task_id=f"t{n}") for n in range(3)])
    queue.register_worker(WorkerInfo("idle-1", "host-b", 7, ("report", "mail"), 5, 0, 0), 60)
    queue.register_worker(WorkerInfo("busy-1", "host-c", 8, ("resize",), 4, 0, 0), 60)
    busy = queue.pop(count=2, worker_id="busy-1")
    (lone,) = queue.pop(worker_id="old-worker")  # holds a lease, not in the registry
    ui("/workers")
    master = browser.current_url.split("/ui")[0]
    registration = {"url": "http://127.0.0.1:9", "names": ["resize"], "capacity": 4}
    bearer = {"authorization": f"Bearer {TOKEN}"}
    assert httpx.put(f"{master}/workers/hw-1", json=registration, headers=bearer).is_success

    wait(browser, lambda: "hw-1" in rows_of(browser, "#http-workers"))
    wait(browser, lambda: len(rows_of(browser, "#queue-workers")) == 3)
    rows = rows_of(browser, "#queue-workers")
    assert rows["idle-1"][1:4] == ["host-b", "7", "report, mail"]
    assert rows["idle-1"][4].startswith("20")  # its last beat, a date
    assert rows["idle-1"][5] == "0 of 5"
    assert rows["busy-1"][5].startswith("2 of 4")
    # Each task held is an item of its own, never run together with the next.
    items = browser.execute_script(
        "return Array.from(document.querySelectorAll('#queue-workers .held li'),"
        " (li) => li.innerText)"
    )
    assert sorted(items) == sorted([*(task.task_id for task in busy), lone.task_id])
    for task in busy:
        element(browser, f'#queue-workers li > a[href="#/task/{task.task_id}"]')
    assert rows["old-worker"][1:5] == ["—", "—", "—", "not registered"]
    assert rows["old-worker"][5].split() == ["1", lone.task_id]
    assert rows_of(browser, "#http-workers")["hw-1"][1:5] == [
        "http://127.0.0.1:9",
        "resize",
        "4",
        "0",
    ]


def test_pause_a_schedule(
    ui: Callable[[str], None],
    browser: webdriver.Chrome,
    server: LocalServer,
    namespace: str,
) -> None:
    with TaskScheduler(server.url, namespace) as scheduler:
        schedule_id = scheduler.add_schedule(interval=60, task={"name": "ping", "user_id": "ops"})
        ui("/schedules")
        assert "paused" in confirm(browser, "button.pause")
        assert scheduler.get_schedule(schedule_id).state.value == "paused"
        wait(browser, lambda: element(browser, "button.resume"))


class Sizes(TypedDict):
    width: int  # window.innerWidth
    scroll: int  # the document's scrollWidth
    client: int  # the document's clientWidth
    outside: list[str]  # nav links that end past the window


def overflow(browser: webdriver.Chrome) -> Sizes:
    """How wide the page is against the window, and the nav links that end past it."""
    script = """
        const width = window.innerWidth;
        const links = Array.from(document.querySelectorAll("#nav a"));
        return {
            width,
            scroll: document.documentElement.scrollWidth,
            client: document.documentElement.clientWidth,  // without a vertical scrollbar
            outside: links
                .filter((a) => a.getBoundingClientRect().right > width)
                .map((a) => a.innerText),
        };
    """
    result: Sizes = browser.execute_script(script)
    return result


@pytest.fixture
def narrow(browser: webdriver.Chrome) -> Iterator[None]:
    """The window as a phone's: 420 CSS pixels wide, until the test ends."""
    metrics = {"width": 420, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_every_page_fits_a_420_pixel_window(  # noqa: PLR0917 - fixtures
    narrow: None,
    ui: Callable[[str], None],
    browser: webdriver.Chrome,
    queue: FairQueue,
    server: LocalServer,
    namespace: str,
) -> None:
    long_id = "a-task-id-" + "x" * 120  # ids, names and errors wider than the window
    queue.push(Task(user_id="tenant-with-a-long-name-" + "y" * 60, task_id=long_id, name="n" * 90))
    queue.push_many([Task(user_id="acme", name="render", max_retries=0) for _ in range(4)])
    for task in queue.pop(count=3, worker_id="worker-" + "w" * 60):
        queue.fail(task, "Traceback: " + "a-long-word-without-spaces" * 20)
    queue.register_worker(WorkerInfo("w-1", "h" * 80, 7, ("f" * 80, "g"), 4, 0, 0), 60)
    queue.push(Task(user_id="acme", payload={"k": "v" * 400}, depends_on=(long_id,)))
    jobs = JobQueue(queue)
    jobs.set_constraint("c" * 60, Constraint([Matcher("name", "equals", "r" * 60)], concurrency=4))
    with TaskScheduler(server.url, namespace) as scheduler:
        scheduler.add_schedule(interval=30, task={"name": "p" * 60, "user_id": "ops"})
    routes = {
        "/overview": "#live .cards",
        "/tenants": "#live table",
        "/tasks?state=queued": "#task-list",
        "/tasks?state=failed": "#task-list .last-error",
        f"/task/{long_id}": "#payload",
        "/workers": "#queue-workers",
        "/schedules": "#live table",
        "/constraints": "#live table",
        "/nope": "#not-found",
    }
    for route, shown in routes.items():
        ui(route)
        element(browser, shown)
        sizes = overflow(browser)
        assert sizes["width"] == 420
        # No sideways scrolling of the page, even beside a vertical scrollbar.
        assert sizes["scroll"] <= sizes["width"], (route, sizes)
        assert sizes["scroll"] <= sizes["client"], (route, sizes)
        assert sizes["outside"] == [], (route, sizes)  # the nav wraps, every link in view


def test_screenshots_of_the_main_pages(  # noqa: PLR0917 - fixtures
    ui: Callable[[str], None],
    browser: webdriver.Chrome,
    queue: FairQueue,
    server: LocalServer,
    namespace: str,
    shots: Path,
) -> None:
    tenants = {"acme": 40, "globex": 12, "initech": 6, "umbrella": 3}
    for tenant, n in tenants.items():
        queue.push_many(
            [Task(user_id=tenant, name="render", priority=Priority(1 + i % 5)) for i in range(n)]
        )
    parent = queue.push(Task(user_id="acme", name="report", payload={"month": "2026-11"}))
    queue.push(Task(user_id="acme", name="mail", depends_on=(parent,)))
    queue.push(Task(user_id="globex", name="cleanup", delay=3600))
    jobs = JobQueue(queue)
    jobs.set_constraint(
        "thumbnails", Constraint([Matcher("name", "equals", "resize")], concurrency=4, rate=50)
    )
    jobs.push_many([Job(name="resize", argument={"w": 64}) for _ in range(5)])
    jobs.pop("http-worker-1", count=2)
    with TaskScheduler(server.url, namespace) as scheduler:
        scheduler.add_schedule(
            schedule_id="nightly-report",
            cron="0 2 * * *",
            timezone="Asia/Tokyo",
            task={"name": "report", "user_id": "acme"},
        )
        scheduler.add_schedule(
            schedule_id="ping", interval=30, task={"name": "ping", "user_id": "ops"}
        )

    queue.set_tenant("acme", weight=2)
    queue.set_tenant("globex", concurrency=3)
    for n, functions in enumerate((("render", "report"), ("render", "mail"), ("cleanup",))):
        worker = WorkerInfo(f"worker-{n}", f"build-0{n + 1}", 4100 + n, functions, 8, 0, 0)
        queue.register_worker(worker, ttl=600)  # worker-2 stays idle

    ui("/overview")
    # Work spread over a few samples, so the throughput chart has a line to draw.
    for round_ in range(5):
        drawn = points(browser)
        for task in queue.pop(count=5, worker_id=f"worker-{round_ % 2}"):
            if task.user_id == "umbrella":
                queue.fail(task, "upstream timed out", retry=False)
            else:
                queue.finish(task)
        queue.push_many([Task(user_id="initech", name="render") for _ in range(2 + round_)])
        wait(browser, partial(lambda before: points(browser) > before, drawn))
    queue.pop(count=3, worker_id="worker-0")
    pages = {
        "overview": "/overview",
        "tenants": "/tenants",
        "tasks": "/tasks?state=queued&user_id=acme",
        "task": f"/task/{parent}",
        "workers": "/workers",
        "schedules": "/schedules",
        "constraints": "/constraints",
        "fairness": "/fairness",
    }
    for name, route in pages.items():
        ui(route)
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#live h1, #live table"))
        wait(browser, lambda: not browser.find_elements(By.ID, "load-error"))
        path = shots / f"{name}.png"
        assert browser.save_screenshot(str(path))
        assert path.stat().st_size > 1000


def test_an_unknown_route_says_so_and_links_back(
    ui: Callable[[str], None], browser: webdriver.Chrome
) -> None:
    ui("/overview")
    wait(browser, lambda: count(browser, "queued") == "0")
    ui("/nope")  # loaded as the page's first route
    wait(browser, lambda: text_of(browser, "#not-found-route") == "#/nope")
    # A name the pages object inherits, a page with a path under it, a task without an id,
    # a malformed escape: each is "not found" too, reached by a hash change.
    for route in ("#/toString", "#/tenants/extra", "#/task/", "#/task/%E0"):
        browser.execute_script("location.hash = arguments[0]", route)
        wait(browser, partial(lambda r: text_of(browser, "#not-found-route") == r, route))
        assert text_of(browser, "#not-found h1") == "Page not found"
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-state], #live")
    element(browser, '#not-found a[href="#/overview"]').click()
    wait(browser, lambda: count(browser, "queued") == "0")
    assert not browser.find_elements(By.ID, "not-found")


def _row_of(browser: webdriver.Chrome, tenant: str) -> WebElement | None:
    for row in browser.find_elements(By.CSS_SELECTOR, "#fairness-tenants tbody tr"):
        if row.find_element(By.CSS_SELECTOR, "td").text == tenant:
            return row
    return None


def _cells(browser: webdriver.Chrome, tenant: str) -> list[str]:
    row = _row_of(browser, tenant)
    return [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "td")] if row else []


def test_the_workers_page_lists_and_edits_a_task_names_limits(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id=f"u{n}", name="render") for n in range(3)])
    queue.set_limits("render", concurrency=2)
    queue.pop(count=3, names=["render"])
    ui("/workers")
    wait(browser, lambda: "render" in rows_of(browser, "#name-limits"))
    assert rows_of(browser, "#name-limits")["render"][1:4] == ["2 / 2", "—", "starts"]
    # Edit from the row: the form takes the name's limits, and saves new ones.
    element(browser, "#name-limits button.edit-limits").click()
    form = element(browser, "#limits-form")
    assert form.find_element(By.NAME, "name").get_attribute("value") == "render"
    assert form.find_element(By.NAME, "concurrency").get_attribute("value") == "2"
    rate = form.find_element(By.NAME, "rate")
    rate.send_keys("5")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(
        browser,
        lambda: "Limits of render: at most 2 at once, 5 per 1 s" in text_of(browser, "#flash"),
    )
    assert (queue.limits("render").rate, queue.limits("render").period) == (5, 1.0)
    wait(browser, lambda: rows_of(browser, "#name-limits")["render"][2] == "5 per 1 s")


def test_the_fairness_view_updates_live_and_edits_shares(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="alice") for _ in range(6)])
    queue.push_many([Task(user_id="bob") for _ in range(2)])
    queue.pop(count=8)
    ui("/fairness")
    wait(browser, lambda: _row_of(browser, "alice") is not None)
    browser.execute_script("performance.clearResourceTimings()")  # what the page asks now
    assert "8 tasks started" in text_of(browser, "#fairness-summary")
    assert browser.find_elements(By.CSS_SELECTOR, '#share-chart polyline[data-tenant="alice"]')
    # New service shows up without a reload: the server pushes it.
    queue.push(Task(user_id="carol"))
    queue.pop()
    wait(browser, lambda: _row_of(browser, "carol") is not None)
    requests = browser.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
    )
    polled = [name for name in requests if "/ui/api/" in name and "/access" not in name]
    assert all("/fairness/stream" in name for name in polled)  # no page polling

    # Edit from the row: the form takes the tenant's shares, and saves new ones.
    row = _row_of(browser, "alice")
    assert row is not None
    row.find_element(By.CSS_SELECTOR, "button.edit-shares").click()
    form = element(browser, "#shares-form")
    assert form.find_element(By.NAME, "tenant").get_attribute("value") == "alice"
    for name, value in (("weight", "3"), ("concurrency", "2")):
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(
        browser,
        lambda: "Shares of alice: weight 3, at most 2 at once" in text_of(browser, "#flash"),
    )
    assert (queue.tenant("alice").weight, queue.tenant("alice").concurrency) == (3, 2)
    # The next event shows them, and that alice is over her new limit.
    wait(browser, lambda: _cells(browser, "alice")[5:7] == ["6 / 2", "3"])

    # A rate given without a period counts starts per second.
    rate = form.find_element(By.NAME, "rate")
    rate.clear()
    rate.send_keys("5")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda: (queue.tenant("alice").rate, queue.tenant("alice").period) == (5, 1.0))
    # What the server refuses is shown, saying what is wrong; nothing changes.
    tenant = form.find_element(By.NAME, "tenant")
    tenant.clear()
    tenant.send_keys("x" * 300)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, lambda: "length <= 256" in text_of(browser, "#flash.error"))
    assert queue.tenants_with_shares().tenants[0].tenant == "alice"


def test_the_throughput_chart_is_drawn_as_the_page_opens(
    server: LocalServer, namespace: str, browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="alice") for _ in range(10)])
    queue.finish_many(queue.pop(count=10))
    # A master started after the work: its chart starts from the server's minutes.
    with serving(
        create_master(MasterConfig(url=server.url, namespace=namespace)), free_port()
    ) as url:
        browser.get(f"{url}/ui#/overview")
        wait(browser, lambda: count(browser, "finished") == "10")
        assert points(browser) >= 2
        assert "Collecting samples" not in text_of(browser, "#live")


# Every word of a table cell or a button that the browser broke over two lines.
BROKEN_WORDS = """
    const broken = [];
    for (const cell of document.querySelectorAll("#view td, #view button")) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const match of node.data.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const lines = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
                if (lines.size > 1) broken.push(match[0]);
            }
        }
    }
    return broken;
"""
# The sideways-scrolling table boxes: whether each goes on past its box, and its cue.
TABLE_BOXES = """
    return Array.from(document.querySelectorAll("#view .table-scroll"), (box) => ({
        wider: box.scrollWidth > box.clientWidth + 1,
        more: box.dataset.more || "",
        mask: getComputedStyle(box).maskImage || getComputedStyle(box).webkitMaskImage,
    }));
"""
PAGES_WITH_WORDS = {
    "/tenants": "#live table",
    "/tasks?state=failed": "#task-list .last-error",
    "/tasks?state=queued": "#task-list",
    "/overview": "#live table",
    "/workers": "#queue-workers",
}


def _tenants_and_failures(queue: FairQueue) -> None:
    for tenant in ("acme", "globex", "initech"):
        queue.push_many([Task(user_id=tenant, name="render_report") for _ in range(482)])
    queue.set_tenant("globex", paused=True)
    queue.set_tenant("acme", weight=3, concurrency=20, rate=100, period=60)
    for task in queue.pop(count=3, worker_id="worker-1"):
        queue.fail(task, "upstream timed out after 30 s", retry=False)
    queue.register_worker(WorkerInfo("worker-1", "build-01", 4100, ("render_report",), 8, 3, 0), 60)


def test_at_1280_pixels_no_word_or_number_is_broken(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    _tenants_and_failures(queue)
    for route, shown in PAGES_WITH_WORDS.items():
        ui(route)
        element(browser, shown)
        assert browser.execute_script(BROKEN_WORDS) == [], route


def test_at_420_pixels_words_stay_whole_and_a_wide_table_shows_it_scrolls(
    narrow: None, ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    _tenants_and_failures(queue)
    wide = 0
    for route, shown in PAGES_WITH_WORDS.items():
        ui(route)
        element(browser, shown)
        assert browser.execute_script(BROKEN_WORDS) == [], route
        for box in browser.execute_script(TABLE_BOXES):
            if box["wider"]:  # a cue on its right edge, where it goes on
                wide += 1
                assert box["more"] == "right", (route, box)
                assert box["mask"] not in ("", "none"), (route, box)
            else:
                assert box["more"] == "", (route, box)
    assert wide  # the tenants' table, at least, is wider than a phone
    ui("/tenants")
    element(browser, "#live table")
    browser.execute_script("document.querySelector('#view .table-scroll').scrollLeft = 1e6")
    wait(browser, lambda: browser.execute_script(TABLE_BOXES)[0]["more"] == "left")


def test_the_header_names_the_namespace_whichever_page_opens_first(
    ui: Callable[[str], None], browser: webdriver.Chrome, namespace: str
) -> None:
    for route in ("/tasks?state=failed", "/fairness"):
        ui(route)
        browser.refresh()  # a fresh page: nothing learned from an earlier one
        wait(browser, lambda: text_of(browser, "#namespace") == f"namespace {namespace}")


def test_a_chart_fills_its_card(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    ui("/overview")
    for _ in range(3):  # samples two seconds apart, so that the chart has a line
        drawn = points(browser)
        queue.push_many([Task(user_id="acme") for _ in range(5)])
        for task in queue.pop(count=5):
            queue.finish(task)
        wait(browser, partial(lambda before: points(browser) > before, drawn))
    share = browser.execute_script("""
        const figure = document.querySelector("figure.chart");
        const axis = figure.querySelector("line.axis").getBoundingClientRect();
        const inner = figure.clientWidth - 2 * parseFloat(getComputedStyle(figure).paddingLeft);
        return axis.width / inner;
    """)
    assert share > 0.85  # the x axis spans the card, less the room for the y labels


def test_a_bulk_retry_counts_first_asks_then_retries_all(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="dave", max_retries=0) for _ in range(4)])
    queue.push(Task(user_id="erin", max_retries=0))
    for task in queue.pop(count=5):
        queue.fail(task, "down")

    ui("/tasks?state=failed&user_id=dave")
    element(browser, "button.bulk-retry").click()
    asked: list[str] = []

    def accepted() -> bool:
        try:
            alert = browser.switch_to.alert
        except NoAlertPresentException:
            return False
        asked.append(alert.text)
        alert.accept()
        return True

    wait(browser, accepted)
    assert asked == ['Retry 4 failed tasks of tenant "dave"?']
    wait(browser, lambda: text_of(browser, "#flash") == "4 task(s) retried.")
    assert queue.stats().tenants["dave"].queued == 4
    assert queue.stats().states[TaskState.FAILED] == 1  # erin's


def test_a_jobs_page_shows_its_kept_result_and_leaves_it_to_its_pusher(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    jobs = JobQueue(queue)
    job_id = jobs.push(Job(name="resize", keep_result=True))
    [leased] = jobs.pop("w1")
    jobs.complete(leased, Success(finished_at=datetime.now(timezone.utc), result={"w": 64}))
    ui(f"/task/{job_id}")
    wait(browser, lambda: text_of(browser, "#result") == '{\n  "w": 64\n}')
    assert jobs.result(job_id)["result"] == {"w": 64}  # the pusher's read still has it
    wait(browser, lambda: "Read by its pusher" in text_of(browser, "#result-gone"))


def test_a_missing_tasks_page_says_so_and_stops_asking(
    ui: Callable[[str], None], browser: webdriver.Chrome
) -> None:
    ui("/task/ghost")
    wait(browser, lambda: "no task or job with this id" in text_of(browser, "#task-missing"))
    browser.execute_script("performance.clearResourceTimings()")
    # Over two refresh periods (1.5 s each) from then, the page asks no more.
    asked = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        setTimeout(() => done(performance.getEntriesByType("resource")
            .filter((e) => e.name.includes("/ui/api/")).map((e) => e.name)), 3000);
    """)
    assert asked == []


def test_a_paused_tenant_is_shown_paused_on_the_overview_and_fairness(
    ui: Callable[[str], None], browser: webdriver.Chrome, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="acme"), Task(user_id="globex")])
    queue.set_tenant("globex", paused=True)
    queue.pop()  # acme's: globex serves nothing, so it has no row on the Fairness page
    ui("/overview")
    # Its row says so beside its name; acme, with nothing ready, is not among the busiest.
    wait(browser, lambda: list(rows_of(browser, "#live")) == ["globex paused"])
    assert "globex (1 ready)" in text_of(browser, "#paused-tenants")
    ui("/fairness")
    wait(browser, lambda: _row_of(browser, "acme") is not None)
    assert _row_of(browser, "globex") is None
    assert "Paused, served nothing until resumed: globex" in text_of(browser, "#paused-tenants")
