// Builds elements. Text goes in as text nodes only, never as markup, so whatever a task
// carries (HTML, <script>) is shown, not run.
const SVG = "http://www.w3.org/2000/svg";

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  return fill(element, attributes, children);
}

export function svg(tag, attributes = {}, ...children) {
  return fill(document.createElementNS(SVG, tag), attributes, children);
}

function fill(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function when(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const date = new Date(typeof seconds === "number" ? seconds * 1000 : seconds);
  // A no-break space: a time wraps as one word.
  return date.toISOString().replace("T", "\u00a0").replace(/\.\d+Z$/, "Z");
}

// A table in a box of its own that scrolls sideways when the table is wider than the
// window, so the page itself never does. A row is its cells, or ``{ cells, note }``: the
// note (a failed task's error) goes on a line of its own beneath them, across every
// column, so that its length never widens the table.
export function table(columns, rows, empty = "Nothing here.", id = undefined) {
  if (rows.length === 0) return h("p", { class: "muted empty", id }, empty);
  const row = (cells) => h("tr", {}, cells.map((cell) => h("td", whole(cell), cell)));
  return h(
    "div",
    { class: "table-scroll" },
    h(
      "table",
      { id },
      h("thead", {}, h("tr", {}, columns.map((column) => h("th", {}, column)))),
      h(
        "tbody",
        {},
        rows.map((r) =>
          Array.isArray(r) ? row(r) : [row(r.cells), h("tr", { class: "note" }, h("td", { colspan: columns.length }, r.note))],
        ),
      ),
    ),
  );
}

// A cell of one word (an id, a name, a number, a state, a time) is never broken, not
// even at a hyphen ("worker-1"): a table too wide for its box scrolls in it instead.
function whole(cell) {
  const text = cell instanceof Node ? cell.textContent : String(cell ?? "");
  return /[ \t\n]/.test(text) ? {} : { class: "whole" }; // a no-break space joins
}

export function link(href, text) {
  return h("a", { href }, text);
}

// Marks each sideways-scrolling table box with where its table goes on past it ("left",
// "right", "both" or ""), which the style sheet shows as a faded edge: a cue to scroll.
export function markOverflow(root) {
  for (const box of root.querySelectorAll(".table-scroll")) {
    const left = box.scrollLeft > 1;
    const right = box.scrollLeft + box.clientWidth < box.scrollWidth - 1;
    box.dataset.more = left && right ? "both" : left ? "left" : right ? "right" : "";
  }
}

// Keeps the marks of ``root``'s table boxes current as it changes, scrolls and resizes.
export function watchOverflow(root) {
  const mark = () => markOverflow(root);
  new MutationObserver(mark).observe(root, { childList: true, subtree: true });
  root.addEventListener("scroll", mark, true);
  window.addEventListener("resize", mark);
}
