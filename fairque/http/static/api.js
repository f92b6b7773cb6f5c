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

export async function api(path, method = "GET") {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`/ui/api${path}`, { method, headers });
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
