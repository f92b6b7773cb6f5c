// Talks to /ui/api with the bearer token kept in this tab (sessionStorage).
const TOKEN = "fairque.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN, token);
  else sessionStorage.removeItem(TOKEN);
}

function headers(extra = {}) {
  const all = { Accept: "application/json", ...extra };
  const token = sessionStorage.getItem(TOKEN);
  if (token) all.Authorization = `Bearer ${token}`;
  return all;
}

export async function api(path, method = "GET", payload = undefined) {
  const init = { method, headers: headers(payload === undefined ? {} : { "Content-Type": "application/json" }) };
  if (payload !== undefined) init.body = JSON.stringify(payload);
  const response = await fetch(`/ui/api${path}`, init);
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.message ? body.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return body;
}

export const post = (path) => api(path, "POST");

export const put = (path, payload) => api(path, "PUT", payload);

// Reads server-sent events from `path` (fetch, so the bearer token goes in a header, which
// EventSource cannot send): calls onEvent(type, data) for each, onEnd(error) when the
// stream ends or fails. Returns a function that closes it.
export function stream(path, onEvent, onEnd) {
  const control = new AbortController();
  (async () => {
    const response = await fetch(`/ui/api${path}`, {
      headers: headers({ Accept: "text/event-stream" }),
      signal: control.signal,
    });
    if (!response.ok) throw new ApiError(response.status, `HTTP ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let type = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(type, data.join("\n"));
      }
    }
  })().then(
    () => onEnd(null),
    (error) => { if (!control.signal.aborted) onEnd(error); },
  );
  return () => control.abort();
}
