// The fairque Web UI: a page per hash route, refreshed by polling.
import { ApiError, api, post, put, setToken, stream } from "./api.js";
import { shareChart, throughputChart } from "./chart.js";
import { h, link, table, watchOverflow, when } from "./dom.js";

const REFRESH_MS = 1500;
const RECONNECT_MS = 2000; // after a stream ends (a restart of the server, a network blip)
const STATES = ["queued", "scheduled", "deferred", "started", "finished", "failed", "canceled"];
const PAGE_SIZE = 25;
const ERROR_CHARS = 80; // of a failed task's error in the task list
const view = document.getElementById("view");
let timer = null;
let closeStream = null;
let generation = 0;
// Whether the server wants a bearer token: null until /access answers. Without one there
// is nothing to sign in to: no login form, no Log out (a 401 still brings the form).
let tokenRequired = null;
// The tenant shares' fields and a task name's limits' (name, kind, low, high, help), from
// the server's field table: the forms that edit them are made of them.
let shareFields = [];
let limitFields = [];

async function learnAccess() {
  try {
    const access = await api("/access");
    tokenRequired = access.token_required;
    shareFields = access.shares;
    limitFields = access.limits;
    document.body.dataset.token = tokenRequired ? "required" : "none";
  } catch {
    // The server is away: asked again at the next refresh.
  }
}

function showNamespace(namespace) {
  document.getElementById("namespace").textContent = `namespace ${namespace}`;
}

// The header names the namespace whichever page opens first (the overview has it).
async function learnNamespace() {
  try {
    showNamespace((await api("/overview")).namespace);
  } catch {
    // The server is away, or the token was refused: the next page load asks again.
  }
}

function showLogout() {
  const nav = document.getElementById("nav");
  document.getElementById("logout").hidden = nav.hidden || tokenRequired !== true;
}

function flash(message, kind = "ok") {
  const box = document.getElementById("flash");
  box.textContent = message;
  box.className = kind;
  box.hidden = false;
}

// Runs an action after the operator confirms it, and shows what came of it.
async function act(question, request, describe) {
  if (!window.confirm(question)) return;
  try {
    flash(describe(await request()));
  } catch (error) {
    flash(`Failed: ${error.message}`, "error");
  }
  refresh();
}

function showLogin(message) {
  document.getElementById("login").hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  view.replaceChildren();
  const error = document.getElementById("login-error");
  error.textContent = message || "";
  error.hidden = !message;
}

function stateCards(states) {
  return h(
    "div",
    { class: "cards" },
    STATES.map((state) =>
      h(
        "a",
        { class: `card state-${state}`, href: `#/tasks?state=${state}`, "data-state": state },
        h("span", { class: "count" }, String(states[state] ?? 0)),
        h("span", { class: "label" }, state),
      ),
    ),
  );
}

function tenantTable(tenants, withActions) {
  const top = Math.max(1, ...tenants.map((t) => t.queued));
  const rows = tenants.map((t) => [
    h("span", {}, link(`#/tasks?state=queued&user_id=${encodeURIComponent(t.user_id)}`, t.user_id), t.paused ? [" ", pausedBadge()] : ""),
    h("span", { class: "bar" }, h("progress", { max: top, value: t.queued }), ` ${t.queued}`),
    t.finished,
    t.failed,
    t.pushed,
    withActions && t.failed > 0 ? requeueButton(t.user_id) : "",
  ]);
  const columns = ["tenant", "backlog", "finished", "failed", "pushed", ""];
  return table(columns, rows, "No tenants yet.");
}

const pausedBadge = () => h("span", { class: "state schedule-paused" }, "paused");

// The paused tenants on a line: each is served nothing until resumed, whether or not it
// is among the busiest (a paused tenant that served nothing lately is in no other list).
function pausedLine(paused) {
  if (!paused.length) return "";
  const each = paused.map((t, i) => [i ? ", " : "", link(`#/tenants?user_id=${encodeURIComponent(t.tenant)}`, t.tenant), ` (${t.ready} ready)`]);
  return h("p", { id: "paused-tenants" }, pausedBadge(), " Paused, served nothing until resumed: ", each, ".");
}

function requeueButton(userId) {
  return h(
    "button",
    {
      type: "button",
      class: "requeue",
      onclick: () =>
        act(
          `Requeue every failed task of tenant "${userId}"?`,
          () => post(`/tenants/${encodeURIComponent(userId)}/retry-failed`),
          (reply) => `${reply.requeued} failed task(s) of ${userId} queued again.`,
        ),
    },
    "Requeue failed",
  );
}

const pages = {
  async overview(live) {
    const data = await api("/overview");
    showNamespace(data.namespace);
    live.replaceChildren(
      h("h1", {}, "Overview"),
      stateCards(data.states),
      h("h2", {}, "Throughput"),
      throughputChart(data.throughput),
      h("h2", {}, "The busiest tenants (backlog and completions)"),
      tenantTable(data.tenants, false),
      pausedLine(data.paused),
      data.tenants_with_ready > data.tenants.length
        ? h("p", { class: "muted", id: "tenants-more" }, `${data.tenants.length} of ${data.tenants_with_ready} tenants with ready tasks: `, link("#/tenants", "all of them →"))
        : "",
    );
  },

  tenants: {
    setup(params) {
      const form = h(
        "form",
        { id: "tenant-search", class: "filters" },
        h("label", {}, "Tenant ", h("input", { name: "user_id", required: true, value: params.get("user_id") || "" })),
        h("button", { type: "submit" }, "Show"),
      );
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        location.hash = `#/tenants?${new URLSearchParams({ user_id: new FormData(form).get("user_id").trim() })}`;
      });
      return [h("h1", {}, "Tenants"), form];
    },
    async refresh(live, params) {
      const userId = params.get("user_id");
      if (userId) {
        const row = await api(`/tenants/${encodeURIComponent(userId)}`);
        live.replaceChildren(tenantTable([row], true), h("p", { class: "pager" }, link("#/tenants", "⟲ the busiest tenants")));
        return;
      }
      const cursor = params.get("cursor") || "0";
      const page = await api(`/tenants?cursor=${encodeURIComponent(cursor)}`);
      live.replaceChildren(
        h("p", { class: "muted" }, "Tenants with ready tasks, the busiest first; any other by name above."),
        tenantTable(page.tenants, true),
        h(
          "p",
          { class: "pager" },
          cursor !== "0" ? link("#/tenants", "⟲ first page") : "",
          " ",
          page.cursor ? link(`#/tenants?cursor=${page.cursor}`, "next page →") : "",
        ),
      );
    },
  },

  tasks: {
    setup(params) {
      const form = h(
        "form",
        { id: "task-filter", class: "filters" },
        h("label", {}, "State ", h("select", { name: "state" }, STATES.map((s) => h("option", { value: s, selected: s === (params.get("state") || "queued") }, s)))),
        h("label", {}, "Tenant ", h("input", { name: "user_id", value: params.get("user_id") || "" })),
        h("label", {}, "Name ", h("input", { name: "name", value: params.get("name") || "" })),
        h("button", { type: "submit" }, "Filter"),
      );
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const next = new URLSearchParams();
        for (const [key, value] of new FormData(form)) if (value) next.set(key, value);
        location.hash = `#/tasks?${next}`;
      });
      const search = h(
        "form",
        { id: "task-search", class: "filters" },
        h("label", {}, "Task id ", h("input", { name: "id", required: true })),
        h("button", { type: "submit" }, "Open"),
      );
      search.addEventListener("submit", (event) => {
        event.preventDefault();
        location.hash = `#/task/${encodeURIComponent(new FormData(search).get("id").trim())}`;
      });
      return [h("h1", {}, "Tasks"), form, search, bulkBar(params)];
    },
    async refresh(live, params) {
      const query = new URLSearchParams({ state: params.get("state") || "queued", limit: PAGE_SIZE });
      for (const key of ["user_id", "name", "cursor"]) if (params.get(key)) query.set(key, params.get(key));
      const page = await api(`/tasks?${query}`);
      // A failed task's row has its error on a line beneath it instead of its state
      // (failed, as every row's): the row stays as narrow as the other lists' rows, so the
      // table fits its box and its Retry buttons stay in view.
      const failed = query.get("state") === "failed";
      const rows = page.tasks.map((t) => {
        const cells = [
          link(`#/task/${encodeURIComponent(t.task_id)}`, t.task_id),
          t.user_id ?? "(job)",
          t.name ?? "—",
          failed ? false : h("span", { class: `state state-${t.state}` }, t.state),
          t.priority,
          t.attempts,
          when(t.created_at),
          t.worker_id ?? "—",
          taskActions(t.task_id, t.state),
        ].filter((cell) => cell !== false);
        return failed ? { cells, note: errorCell(t.last_error) } : cells;
      });
      const columns = ["id", "tenant", "name", !failed && "state", "priority", "attempts", "created", "worker", ""];
      const next = new URLSearchParams(params);
      next.set("cursor", page.cursor);
      live.replaceChildren(
        table(columns.filter((c) => c !== false), rows, "No tasks in this state.", "task-list"),
        h(
          "p",
          { class: "pager" },
          params.get("cursor") ? link(`#/tasks?${withoutCursor(params)}`, "⟲ first page") : "",
          " ",
          page.cursor ? link(`#/tasks?${next}`, "next page →") : "",
        ),
      );
    },
  },

  // Live: the server pushes the view (server-sent events); nothing here polls.
  fairness: {
    setup() {
      return [
        h("h1", {}, "Fairness"),
        h("p", { id: "fairness-status", class: "muted live-status" }, "Connecting…"),
        editorForm(SHARES_EDITOR),
      ];
    },
    stream(live, ended) {
      const status = document.getElementById("fairness-status");
      return stream(
        "/fairness/stream",
        (type, data) => {
          document.getElementById("login").hidden = true;
          if (type === "fairness") {
            const view = JSON.parse(data);
            live.replaceChildren(...fairnessView(view));
            status.className = "muted live-status";
            status.dataset.at = view.at;
            status.textContent = `Live: updated ${when(view.at)}`;
          } else if (type === "outage") {
            status.className = "live-status stale";
            status.textContent = `The queue's server is unreachable (${data}); the figures shown are from before.`;
          }
        },
        ended,
      );
    },
  },

  workers: {
    setup() {
      return [h("h1", {}, "Workers"), editorForm(LIMITS_EDITOR)];
    },
    async refresh(live) {
      const [data, limits] = await Promise.all([api("/workers"), api("/limits")]);
      live.replaceChildren(...workersView(data), ...limitsView(limits.names));
    },
  },

  async schedules(live) {
    const rows = (await api("/schedules")).map((s) => [
      s.schedule_id,
      h("span", { class: `state schedule-${s.state}` }, s.state),
      s.cron ? `${s.cron} (${s.timezone})` : `every ${s.interval} s`,
      `${s.task_name} / ${s.user_id}`,
      when(s.next_run),
      when(s.last_run),
      s.runs,
      s.failures,
      s.last_error ?? "",
      scheduleButton(s),
    ]);
    const columns = ["id", "state", "when", "task / tenant", "next run", "last run", "runs", "failures", "last error", ""];
    live.replaceChildren(h("h1", {}, "Schedules"), table(columns, rows, "No schedules."));
  },

  async constraints(live) {
    const rows = (await api("/constraints")).map((c) => [
      c.id,
      c.constraint.match.map((m) => `${m.field} ${m.op} ${JSON.stringify(m.value)}`).join(" and "),
      c.constraint.concurrency ? usage(c.running, c.constraint.concurrency) : "—",
      c.constraint.rate ? usage(c.started, c.constraint.rate, ` per ${c.constraint.period} s`) : "—",
    ]);
    live.replaceChildren(h("h1", {}, "Constraints"), table(["id", "matches", "running / concurrency", "started / rate"], rows, "No constraints."));
  },

  async task(live, params, id) {
    let detail;
    try {
      detail = await api(`/tasks/${encodeURIComponent(id)}`);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      // Asking again would not bring it back: the page stops asking and says so.
      stop();
      live.replaceChildren(
        h("h1", {}, "Task ", h("code", { id: "task-id" }, id)),
        h("p", { class: "error", id: "task-missing" }, "There is no task or job with this id: it was never pushed, or it has been removed since (an ended one expires)."),
      );
      return;
    }
    const info = detail.task ?? detail.job;
    const payload = detail.task ? info.payload : info.argument;
    const fields = Object.entries(info).filter(([key]) => !["payload", "argument", "result", "last_error", "errors", "blocked_by", "dependents", "logs", "task_id", "id"].includes(key));
    live.replaceChildren(h(
      "section",
      {},
      h("h1", {}, `${detail.kind === "job" ? "Job" : "Task"} `, h("code", { id: "task-id" }, id)),
      h("p", {}, taskActions(id, info.state, detail.kind !== "job")),
      h("div", { class: "detail" }, h("div", {}, table(["field", "value"], fields.map(([key, value]) => [key, fieldText(key, value)]))), h("div", {},
      h("h2", {}, detail.job ? "Argument" : "Payload"),
      h("pre", { id: "payload" }, pretty(payload)),
      info.last_error ? [h("h2", {}, "Last error"), h("pre", { id: "last-error", class: "error" }, info.last_error)] : "",
      info.errors && info.errors.length ? failedAttempts(info.errors) : "",
      info.logs && info.logs.length ? [h("h2", {}, "Log"), h("pre", { id: "logs" }, info.logs.join("\n"))] : "",
      detail.task && detail.task.has_result ? [h("h2", {}, "Result"), h("pre", { id: "result" }, pretty(detail.task.result))] : "",
      detail.job ? jobResult(detail.job, detail.job_result) : "",
      detail.task ? [h("h2", {}, "Waits for"), idList(info.blocked_by), h("h2", {}, "Dependents"), idList(info.dependents)] : "",
    ))));
  },
};

// The failed attempts a task keeps (the oldest first), each message on a line beneath its
// attempt (in a column, half the page wide, it wrapped a word a line and pushed the type
// out of view), then the newest traceback whole, preformatted and scrollable rather than
// wrapped, as a terminal shows it.
function failedAttempts(errors) {
  const rows = errors.map((e) => ({
    cells: [`#${e.attempt}`, when(e.at), e.worker_id ?? "—", e.type || "—"],
    note: h("span", { class: "error" }, e.message),
  }));
  const traced = errors.filter((e) => e.traceback);
  const newest = traced[traced.length - 1];
  return [
    h("h2", {}, "Failed attempts"),
    table(["attempt", "at", "worker", "type"], rows, "", "failed-attempts"),
    newest ? [h("h2", {}, `Traceback of attempt #${newest.attempt}`), h("pre", { id: "traceback", class: "traceback" }, newest.traceback)] : "",
  ];
}

// A job's kept outcome, as the server read it without taking it (its pusher still gets it,
// once); once taken or expired, a line saying so.
function jobResult(job, outcome) {
  if (outcome && outcome.type === "failure") {
    return outcome.error === null ? "" : [h("h2", {}, "Error object"), h("pre", { id: "result" }, pretty(outcome.error))];
  }
  if (outcome) return [h("h2", {}, "Result"), h("pre", { id: "result" }, pretty(outcome.result))];
  if (!job.keep_result || !["finished", "failed"].includes(job.state)) return "";
  return [h("h2", {}, "Result"), h("p", { class: "muted", id: "result-gone" }, "Read by its pusher, or expired.")];
}

// A task's or job's field as its detail table shows it: a time as a time, a map (the
// headers) as its entries, nothing as a dash.
function fieldText(key, value) {
  if (key.endsWith("_at") || key.endsWith("_time") || key === "lease_deadline" || key === "execute_after") return when(value);
  if (value === null || value === undefined) return "—";
  if (typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([name, text]) => `${name}: ${text}`).join(", ") : "—";
  }
  return String(value);
}

function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return `${(value * 1000).toFixed(value < 0.01 ? 1 : 0)} ms`;
  return `${value.toFixed(1)} s`;
}

function fairnessView(view) {
  const rows = view.tenants.map((t) => [
    t.tenant,
    h("span", { class: "bar" }, h("meter", { min: 0, max: 1, value: t.share }), ` ${(100 * t.share).toFixed(1)}%`),
    t.per_minute.toFixed(1),
    seconds(t.wait_p50),
    seconds(t.wait_p99),
    t.concurrency ? usage(t.running, t.concurrency) : String(t.running),
    t.weight,
    t.rate ? `${t.rate} per ${t.period} s` : "—",
    t.paused ? h("span", { class: "state schedule-paused" }, "paused") : t.servable ? "served" : t.ready ? h("span", { class: "state schedule-paused" }, "held") : "idle",
    h("button", { type: "button", class: "edit-shares", onclick: () => fillEditor(SHARES_EDITOR, t) }, "Edit"),
  ]);
  const other = view.starts ? (100 * view.other_starts) / view.starts : 0;
  return [
    h(
      "p",
      { id: "fairness-summary" },
      `${view.starts} tasks started in the last ${view.minutes} min (${view.per_minute.toFixed(1)} per minute); `,
      `wait from ready to start: p50 ${seconds(view.wait_p50)}, p99 ${seconds(view.wait_p99)}.`,
    ),
    h("h2", {}, "Share of service over time"),
    shareChart(view.history, view.tenants),
    h("h2", {}, "The busiest tenants"),
    table(["tenant", "share", "per minute", "wait p50", "wait p99", "running / limit", "weight", "rate", "state", ""], rows, "No task has started in this window.", "fairness-tenants"),
    pausedLine(view.paused),
    view.other_starts ? h("p", { class: "muted", id: "fairness-other" }, `All other tenants: ${view.other_starts} starts (${other.toFixed(1)}%).`) : "",
  ];
}

// The Workers page's live part: the queue's workers and the master's HTTP workers.
function workersView(data) {
  return [
    h("h2", {}, "Queue workers (registered, idle ones too)"),
    table(
      ["worker", "host", "pid", "functions", "last seen", "tasks held"],
      data.queue.map((w) => [
        w.worker_id,
        w.host ?? "—",
        w.pid ?? "—",
        w.functions.length ? w.functions.join(", ") : "—",
        w.registered ? when(w.seen_at) : h("span", { class: "muted" }, "not registered"),
        heldTasks(w),
      ]),
      "No worker is registered or holds a lease.",
      "queue-workers",
    ),
    h("h2", {}, "HTTP workers (registered with the master)"),
    table(
      ["worker", "url", "names", "capacity", "running", "last seen"],
      data.http.map((w) => [w.id, w.url, w.names.join(", "), w.capacity, w.running, `${w.seen_seconds_ago.toFixed(1)} s ago`]),
      "No HTTP worker is registered.",
      "http-workers",
    ),
  ];
}

// The task names with limits, each with its Edit button (it fills the limits form).
function limitsView(names) {
  const rows = names.map((n) => [
    n.name,
    n.concurrency ? usage(n.running, n.concurrency) : "—",
    n.rate ? `${n.rate} per ${n.period} s` : "—",
    n.paused ? h("span", { class: "state schedule-paused" }, "paused") : n.window_opens_at ? `rate window opens ${when(n.window_opens_at)}` : "starts",
    h("button", { type: "button", class: "edit-limits", onclick: () => fillEditor(LIMITS_EDITOR, n) }, "Edit"),
  ]);
  return [
    h("h2", {}, "Limits per task name (across all workers)"),
    table(["name", "running / limit", "rate", "state", ""], rows, "No task name has limits.", "name-limits"),
  ];
}

// What an editor form edits: a tenant's shares (the Fairness page) or a task name's limits
// (the Workers page); its fields are the server's table's.
const SHARES_EDITOR = {
  id: "shares-form",
  subject: "tenant",
  label: "Tenant",
  button: "Save shares",
  fields: () => shareFields,
  path: (tenant) => `/tenants/${encodeURIComponent(tenant)}/shares`,
  said: (tenant, saved) => `Shares of ${tenant}: weight ${saved.weight}, ${limitsSaid(saved)}.`,
};
const LIMITS_EDITOR = {
  id: "limits-form",
  subject: "name",
  label: "Task name",
  button: "Save limits",
  fields: () => limitFields,
  path: (name) => `/names/${encodeURIComponent(name)}/limits`,
  said: (name, saved) => `Limits of ${name}: ${limitsSaid(saved)}.`,
};

function limitsSaid(saved) {
  const rate = saved.rate ? `${saved.rate} per ${saved.period} s` : "no rate limit";
  const limit = saved.concurrency ? `at most ${saved.concurrency} at once` : "no concurrency limit";
  // A task name's defaults for its tasks, those it sets (a tenant has none).
  const defaults = [
    saved.timeout ? `timeout ${saved.timeout} s` : "",
    saved.max_retries >= 0 ? `${saved.max_retries} retries` : "",
    saved.priority ? `priority ${saved.priority}` : "",
    saved.lease ? `lease ${saved.lease} s` : "",
  ].filter(Boolean);
  const given = defaults.length ? `; its tasks' defaults: ${defaults.join(", ")}` : "";
  return `${limit}, ${rate}${saved.paused ? ", paused" : ""}${given}`;
}

// An editor: stays put while the live figures below it change. One input per field of
// the server's table: a number within its bounds, or a checkbox for a flag.
function editorForm(editor) {
  const input = (f) =>
    f.kind === "bool"
      ? h("label", { title: f.help }, h("input", { type: "checkbox", name: f.name }), ` ${f.name}`)
      : h(
          "label",
          { title: f.help },
          `${f.name[0].toUpperCase()}${f.name.slice(1)} `,
          h("input", { type: "number", name: f.name, min: f.low, max: f.high, step: f.kind === "float" ? "any" : 1 }),
        );
  const form = h(
    "form",
    { id: editor.id, class: "filters" },
    h("label", {}, `${editor.label} `, h("input", { name: editor.subject, required: true })),
    editor.fields().map(input),
    h("button", { type: "submit" }, editor.button),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const fields = new FormData(form);
    const subject = fields.get(editor.subject).trim();
    const change = {};
    for (const f of editor.fields()) {
      if (f.kind === "bool") change[f.name] = fields.get(f.name) === "on";
      else if (fields.get(f.name) !== "") change[f.name] = Number(fields.get(f.name));
    }
    try {
      flash(editor.said(subject, await put(editor.path(subject), change)));
    } catch (error) {
      flash(`Failed: ${error.message}`, "error");
    }
  });
  return form;
}

// Fills an editor with a row's values; a value below its field's lowest (a period of 0:
// none set) is left blank.
function fillEditor(editor, row) {
  const form = document.getElementById(editor.id);
  form.elements[editor.subject].value = row[editor.subject];
  const fields = editor.fields();
  for (const f of fields) {
    const element = form.elements[f.name];
    if (f.kind === "bool") element.checked = row[f.name];
    else element.value = row[f.name] < f.low ? "" : row[f.name];
  }
  form.elements[fields[0].name].focus();
}

// A failed task's error on one line, cut at ERROR_CHARS; the whole text on hover.
function errorCell(error) {
  if (!error) return "—";
  const line = error.replace(/\s+/g, " ").trim();
  const short = line.length > ERROR_CHARS ? `${line.slice(0, ERROR_CHARS - 1)}…` : line;
  return h("span", { class: "last-error", title: error }, short);
}

// "2 of 8" (held of its concurrency), then the first tasks, each a link in an item of its
// own: ids side by side, or wrapped one under the other, would read as one long id.
function heldTasks(worker) {
  const count = worker.concurrency ? `${worker.held} of ${worker.concurrency}` : String(worker.held);
  const shown = worker.task_ids.slice(0, 10).map((id) => h("li", {}, link(`#/task/${encodeURIComponent(id)}`, id)));
  const more = worker.task_ids.length > 10 ? h("li", { class: "muted" }, `and ${worker.task_ids.length - 10} more`) : "";
  return h("div", { class: "held" }, count, shown.length ? h("ul", {}, shown, more) : "");
}

function usage(used, limit, suffix = "") {
  return h("span", { class: "bar" }, h("meter", { min: 0, max: limit, value: used }), ` ${used} / ${limit}${suffix}`);
}

function pretty(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

function idList(ids) {
  if (!ids || ids.length === 0) return h("p", { class: "muted" }, "none");
  return h("ul", {}, ids.map((id) => h("li", {}, link(`#/task/${encodeURIComponent(id)}`, id))));
}

function withoutCursor(params) {
  const copy = new URLSearchParams(params);
  copy.delete("cursor");
  return copy;
}

// A strict job that runs is not aborted (its HTTP worker reports its end); a task is.
// Bulk actions on the tasks the list's filter selects: what each action takes, from the
// state shown. The server goes batch by batch (/ui/api/bulk/...); a queued list's cancel
// needs a tenant and then empties its whole backlog (queued, scheduled and deferred).
const BULK_ACTIONS = {
  failed: ["retry", "delete"],
  finished: ["delete"],
  canceled: ["delete"],
  scheduled: ["cancel"],
  deferred: ["cancel"],
  queued: ["cancel"],
};
const BULK_DONE = { retry: "retried", cancel: "canceled", delete: "deleted" };
let bulkStop = false; // set by the Stop button: the run ends after the batch under way

function bulkBar(params) {
  const state = params.get("state") || "queued";
  const userId = params.get("user_id");
  const actions = (BULK_ACTIONS[state] || []).filter((action) => state !== "queued" || userId);
  if (!actions.length) return "";
  const age = h("input", { name: "older_than", type: "number", min: "0", step: "any", placeholder: "0" });
  return h(
    "form",
    { id: "bulk", class: "filters" },
    h("span", { class: "muted" }, "All that the filter selects: "),
    h("label", {}, "older than (hours) ", age),
    ...actions.map((action) =>
      h("button", {
        type: "button",
        class: `bulk-${action}`,
        onclick: () => runBulk(action, bulkBody(action, state, params, Number(age.value || 0) * 3600)),
      }, `${action[0].toUpperCase()}${action.slice(1)} all…`),
    ),
    h("button", { type: "button", id: "bulk-stop", hidden: true, onclick: () => { bulkStop = true; } }, "Stop"),
  );
}

function bulkBody(action, state, params, olderThan) {
  const body = { older_than: olderThan };
  if (params.get("user_id")) body.user_id = params.get("user_id");
  if (params.get("name")) body.name = params.get("name");
  if (action !== "retry" && state !== "queued") body.state = state;
  return body;
}

function describeSelection(action, body) {
  const what = action === "cancel" && !body.state
    ? `every waiting task (queued, scheduled, deferred) of tenant "${body.user_id}"`
    : `${body.state || "failed"} tasks${body.user_id ? ` of tenant "${body.user_id}"` : ""}`;
  const name = body.name ? ` named "${body.name}"` : "";
  const age = body.older_than ? ` older than ${body.older_than / 3600} h` : "";
  return `${what}${name}${age}`;
}

// Every batch of an operation, from the first cursor to the last; onBatch(total so far).
async function bulkBatches(action, body, onBatch) {
  let cursor = "";
  let selected = 0;
  while (cursor !== null && !bulkStop) {
    const batch = await api(`/bulk/${action}`, "POST", { ...body, cursor });
    selected += batch.selected;
    cursor = batch.cursor;
    onBatch(selected);
  }
  return { selected, stopped: cursor !== null };
}

// Counts first (a dry run), asks, then acts, showing the count as it goes; Stop ends it
// between two batches, and running it again does the rest.
async function runBulk(action, body) {
  const what = describeSelection(action, body);
  const stop = document.getElementById("bulk-stop");
  bulkStop = false;
  stop.hidden = false;
  try {
    const counted = await bulkBatches(action, { ...body, dry_run: true }, (n) => flash(`Counting ${what}: ${n}…`));
    if (counted.stopped) {
      flash(`Stopped while counting: ${counted.selected} so far.`);
    } else if (!counted.selected) {
      flash(`No ${what}: nothing to do.`);
    } else if (window.confirm(`${action[0].toUpperCase()}${action.slice(1)} ${counted.selected} ${what}?`)) {
      const done = await bulkBatches(action, body, (n) => flash(`${BULK_DONE[action]} ${n} of ~${counted.selected}…`));
      flash(done.stopped
        ? `Stopped: ${done.selected} ${BULK_DONE[action]}; run it again for the rest.`
        : `${done.selected} task(s) ${BULK_DONE[action]}.`);
    } else {
      flash("Nothing done.");
    }
  } catch (error) {
    flash(`Failed: ${error.message}`, "error");
  } finally {
    stop.hidden = true;
  }
  refresh();
}

function taskActions(id, state, abortable = true) {
  const actions = [];
  if (state === "failed") {
    actions.push(
      h("button", {
        type: "button",
        class: "retry",
        onclick: () => act(`Retry task ${id}?`, () => post(`/tasks/${encodeURIComponent(id)}/retry`), (r) => (r.done ? `Task ${id} queued again.` : `Task ${id} had not failed: nothing done.`)),
      }, "Retry"),
    );
  }
  if (["queued", "scheduled", "deferred"].includes(state) || (abortable && state === "started")) {
    const question = state === "started"
      ? `Cancel task ${id}? Its worker stops the run; its dependents are canceled too.`
      : `Cancel task ${id}? Its dependents are canceled too.`;
    actions.push(
      h("button", {
        type: "button",
        class: "cancel",
        onclick: () => act(question, () => post(`/tasks/${encodeURIComponent(id)}/cancel`), (r) => (r.done ? `Task ${id} canceled.` : `Task ${id} had already ended: nothing done.`)),
      }, "Cancel"),
    );
  }
  return actions;
}

function scheduleButton(s) {
  const pause = s.state === "active";
  const verb = pause ? "pause" : "resume";
  return h("button", {
    type: "button",
    class: verb,
    onclick: () => act(`${pause ? "Pause" : "Resume"} schedule ${s.schedule_id}?`, () => post(`/schedules/${encodeURIComponent(s.schedule_id)}/${verb}`), (r) => `Schedule ${s.schedule_id} is ${r.state}.`),
  }, pause ? "Pause" : "Resume");
}

// An empty hash is the overview; a route no page answers (or a task without an id) is
// "not found", naming what was asked for, never another page in its place.
function route() {
  const [path, query] = (location.hash.slice(1) || "/overview").split("?");
  const parts = path.split("/").filter(Boolean);
  const name = parts.length === 0 ? "overview" : parts[0];
  const id = safeDecode(parts.slice(1).join("/"));
  const known = Object.hasOwn(pages, name) && (name === "task" ? Boolean(id) : parts.length === 1);
  return { name: known ? name : "notFound", params: new URLSearchParams(query || ""), id, asked: location.hash || "#/" };
}

function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return null; // a malformed escape (#/task/%E0): no such task
  }
}

function notFound(asked) {
  return h(
    "section",
    { id: "not-found" },
    h("h1", {}, "Page not found"),
    h("p", {}, "There is no page at ", h("code", { id: "not-found-route" }, asked), "."),
    h("p", {}, link("#/overview", "← Back to the overview")),
  );
}

let current = null;

async function refresh() {
  const page = current;
  if (!page) return;
  const mine = generation;
  if (tokenRequired === null) await learnAccess();
  if (mine !== generation) return;
  showLogout();
  try {
    await page.refresh();
    if (mine === generation) document.getElementById("login").hidden = true;
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof ApiError && error.status === 401) {
      tokenRequired = true; // whatever /access said before: the server wants one now
      stop();
      showLogin(sessionStorage.length ? "That token was refused." : "");
      return;
    }
    page.live.replaceChildren(h("p", { class: "error", id: "load-error" }, `Could not load: ${error.message}`));
  }
}

function stop() {
  clearInterval(timer);
  clearTimeout(timer);
  timer = null;
  current = null;
  if (closeStream) closeStream();
  closeStream = null;
}

// A live page: its stream, opened again RECONNECT_MS after it ends, until the page closes.
async function startStream(page, live) {
  const mine = generation;
  if (tokenRequired === null) await learnAccess();
  if (mine !== generation) return;
  showLogout();
  closeStream = page.stream(live, (error) => {
    if (mine !== generation) return;
    if (error instanceof ApiError && error.status === 401) {
      tokenRequired = true;
      stop();
      showLogin(sessionStorage.length ? "That token was refused." : "");
      return;
    }
    const status = view.querySelector(".live-status");
    status.className = "live-status stale";
    status.textContent = "Disconnected; connecting again…";
    timer = setTimeout(() => {
      if (mine === generation) startStream(page, live);
    }, RECONNECT_MS);
  });
}

// The header of a page shown: the nav (this page's link marked) and Log out.
function showChrome(name) {
  document.getElementById("nav").hidden = false;
  showLogout();
  if (!document.getElementById("namespace").textContent) learnNamespace();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.getAttribute("href") === `#/${name}`);
}

function open() {
  stop();
  generation += 1;
  const { name, params, id, asked } = route();
  if (name === "notFound") {
    view.replaceChildren(notFound(asked));
    document.getElementById("login").hidden = true;
    showChrome(name);
    return; // nothing to load, nothing to refresh
  }
  const page = pages[name];
  const live = h("div", { id: "live" });
  const fixed = typeof page === "object" ? page.setup(params) : [];
  const load = typeof page === "object" ? page.refresh : page;
  view.replaceChildren(...fixed, live);
  showChrome(name);
  if (page.stream) {
    startStream(page, live);
    return;
  }
  current = { live, refresh: () => load(live, params, id) };
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  setToken(document.getElementById("token").value);
  document.getElementById("token").value = "";
  document.getElementById("login").hidden = true;
  open();
});
document.getElementById("logout").addEventListener("click", () => {
  setToken(null);
  stop();
  showLogin("");
});
window.addEventListener("hashchange", () => {
  document.getElementById("flash").hidden = true;
  open();
});
watchOverflow(view);
await learnAccess();
open();
