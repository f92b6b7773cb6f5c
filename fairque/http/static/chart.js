// The throughput chart: tasks per second over the last minutes, as inline SVG.
import { h, svg } from "./dom.js";

const HEIGHT = 180;

// As wide as the card it is drawn in, so that it fills the card and its text keeps its
// size: the view's width less the card's padding and border (at least 320).
function chartWidth() {
  const view = document.getElementById("view");
  return Math.max(320, Math.round((view ? view.clientWidth : 640) - 24));
}
const PAD = 32;
const SERIES = [
  ["pushed", "series-pushed"],
  ["finished", "series-finished"],
  ["failed", "series-failed"],
];

export function throughputChart(rates) {
  if (rates.length < 2) {
    return h("p", { class: "muted empty" }, "Collecting samples: the chart starts in a few seconds.");
  }
  const WIDTH = chartWidth();
  const first = rates[0].at;
  const span = Math.max(rates[rates.length - 1].at - first, 1);
  const top = Math.max(1, ...rates.flatMap((r) => [r.pushed, r.finished, r.failed]));
  const x = (at) => PAD + ((at - first) / span) * (WIDTH - 2 * PAD);
  const y = (value) => HEIGHT - PAD + 8 - (value / top) * (HEIGHT - PAD - 8);
  const lines = SERIES.map(([key, css]) =>
    svg("polyline", {
      class: css,
      points: rates.map((r) => `${x(r.at).toFixed(1)},${y(r[key]).toFixed(1)}`).join(" "),
    }),
  );
  const minutes = (span / 60).toFixed(1);
  return h(
    "figure",
    { class: "chart" },
    svg(
      "svg",
      { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": "throughput" },
      svg("line", { class: "axis", x1: PAD, y1: HEIGHT - PAD + 8, x2: WIDTH - PAD, y2: HEIGHT - PAD + 8 }),
      svg("line", { class: "axis", x1: PAD, y1: 8, x2: PAD, y2: HEIGHT - PAD + 8 }),
      svg("text", { x: 2, y: 16, class: "tick" }, top.toFixed(top < 10 ? 1 : 0)),
      svg("text", { x: 2, y: HEIGHT - PAD + 8, class: "tick" }, "0"),
      svg("text", { x: PAD, y: HEIGHT - 6, class: "tick" }, `−${minutes} min`),
      svg("text", { x: WIDTH - PAD - 24, y: HEIGHT - 6, class: "tick" }, "now"),
      lines,
    ),
    h(
      "figcaption",
      {},
      "tasks per second: ",
      SERIES.map(([key, css]) => h("span", { class: `legend ${css}` }, key)),
    ),
  );
}

const SHARE_SERIES = 5; // tenants drawn by name; the rest are "other"

// Each of the busiest tenants' share of all starts, minute by minute, as lines (0-100%).
export function shareChart(history, tenants) {
  if (history.every((m) => m.starts === 0)) {
    return h("p", { class: "muted empty", id: "share-chart" }, "No task has started in this window yet.");
  }
  const WIDTH = chartWidth();
  const named = tenants.slice(0, SHARE_SERIES);
  const share = (starts, i) => (history[i].starts ? (100 * starts) / history[i].starts : 0);
  const series = named.map((t, n) => [t.tenant, `share-${n}`, t.starts_by_minute.map(share)]);
  const other = history.map((m, i) => share(m.starts - named.reduce((sum, t) => sum + t.starts_by_minute[i], 0), i));
  series.push(["other", "share-other", other]);
  const x = (i) => PAD + (history.length > 1 ? i / (history.length - 1) : 0.5) * (WIDTH - 2 * PAD);
  const y = (percent) => HEIGHT - PAD + 8 - (percent / 100) * (HEIGHT - PAD - 8);
  return h(
    "figure",
    { class: "chart", id: "share-chart" },
    svg(
      "svg",
      { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": "share of starts per minute" },
      svg("line", { class: "axis", x1: PAD, y1: HEIGHT - PAD + 8, x2: WIDTH - PAD, y2: HEIGHT - PAD + 8 }),
      svg("line", { class: "axis", x1: PAD, y1: 8, x2: PAD, y2: HEIGHT - PAD + 8 }),
      svg("text", { x: 2, y: 16, class: "tick" }, "100%"),
      svg("text", { x: 2, y: HEIGHT - PAD + 8, class: "tick" }, "0"),
      svg("text", { x: PAD, y: HEIGHT - 6, class: "tick" }, `−${history.length} min`),
      svg("text", { x: WIDTH - PAD - 24, y: HEIGHT - 6, class: "tick" }, "now"),
      // Minutes in which nothing started have no shares: no point is drawn for them.
      series.map(([name, css, values]) => {
        const at = values.map((v, i) => [x(i), y(v)]).filter((_, i) => history[i].starts > 0);
        return [
          svg("polyline", { class: css, "data-tenant": name, points: at.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ") }),
          at.map(([px, py]) => svg("circle", { class: css, cx: px.toFixed(1), cy: py.toFixed(1), r: 2.5 })),
        ];
      }),
    ),
    h("figcaption", {}, "share of starts per minute: ", series.map(([name, css]) => h("span", { class: `legend ${css}` }, name))),
  );
}
