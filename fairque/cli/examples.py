"""Examples under each command's ``--help``, kept in one table: the docs test runs none
of them, so they use only commands and options a test of the help checks exist."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "worker": (
        "fairque worker --tasks tasks",
        "fairque worker -c worker.yaml --processes 4",
        "fairque worker --tasks tasks --url redis://10.0.0.5:6379 --metrics-port 9102",
    ),
    "push": (
        "fairque push send_invoice --tenant alice --args '[42]'",
        "fairque push render --tenant bob --kwargs '{\"pages\": 3}' --keep-result",
    ),
    "stats": ("fairque stats", "fairque stats --watch 2", "fairque stats --json | jq .states"),
    "workers": ("fairque workers", "fairque workers --json"),
    "tasks": (
        "fairque tasks --state failed",
        "fairque tasks --state failed --tenant alice --limit 20",
        "fairque tasks --state queued | cut -f1",
    ),
    "tenants": ("fairque tenants", "fairque tenants --busiest --limit 10"),
    "task get": ("fairque task get YVjHtEi8OIngMLPSEHsj", "fairque task get ID --json"),
    "task result": ("fairque task result ID --timeout 30",),
    "task cancel": ("fairque task cancel ID",),
    "task retry": ("fairque task retry ID",),
    "bulk retry": (
        "fairque bulk retry --tenant alice --dry-run",
        "fairque bulk retry --name report --older-than 2h",
    ),
    "bulk cancel": ("fairque bulk cancel --state scheduled --name report --dry-run",),
    "bulk delete": ("fairque bulk delete --state finished --older-than 7d",),
    "bulk empty": ("fairque bulk empty alice --dry-run",),
    "tenant show": ("fairque tenant show alice", "fairque tenant show alice --json"),
    "tenant set": (
        "fairque tenant set alice --weight 3",
        "fairque tenant set bob --concurrency 2 --rate 10 --period 60",
    ),
    "tenant pause": ("fairque tenant pause alice",),
    "tenant resume": ("fairque tenant resume alice",),
    "scheduler add": (
        "fairque scheduler add --task report --tenant alice --cron '0 9 * * 1-5' "
        "--timezone Europe/Berlin",
        "fairque scheduler add --task sync --tenant bob --interval 300",
    ),
    "scheduler list": ("fairque scheduler list", "fairque scheduler list --json"),
    "scheduler run": ("fairque scheduler run", "fairque scheduler run --metrics-port 9104"),
    "scheduler health": ("fairque scheduler health || echo 'scheduler needs a look'",),
    "master": (
        "fairque master",
        'fairque master --host 0.0.0.0 --token "$FAIRQUE_MASTER_TOKEN"',
    ),
    "dashboard": ("fairque dashboard --port 8081",),
    "http-worker": ("fairque http-worker --master http://127.0.0.1:8080 --tasks tasks",),
    "demo": ("fairque demo", "fairque demo --tenants 5 --count 2000"),
    "storage-worker": (
        "fairque storage-worker --contract contract.yaml --handlers handlers:HANDLERS",
    ),
    "server status": ("fairque server status || echo 'not running'",),
    "settings show": ("fairque settings show",),
}
