// api.js — the web view's only door to the server's JSON API under /ui/api.
//
// GETs and POSTs JSON; every POST carries the CSRF token from /ui/api/me in the X-Agentfile-CSRF
// header. A 401 sends the browser to the login page. Any other failure becomes a thrown Error whose
// message is the server's `error` text (shown by callers as text, never as markup).
//
// What it never does: build URLs from unchecked ids (path segments are always URI-encoded), put the
// CSRF token into a URL, or talk to anything outside /ui/.

let mePromise = null;

/** `{auth, csrf}` of this browser session, fetched once. */
export function me() {
  if (!mePromise) {
    mePromise = request("GET", "/ui/api/me").catch((err) => {
      mePromise = null;
      throw err;
    });
  }
  return mePromise;
}

/** An API failure: `status` is the HTTP status (0 for network errors). */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (method !== "GET") {
    const { csrf } = await me();
    headers["Content-Type"] = "application/json";
    headers["X-Agentfile-CSRF"] = csrf;
    init.body = JSON.stringify(body ?? {});
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(`The server cannot be reached (${err.message}).`, 0);
  }
  if (res.status === 401) {
    location.assign("/ui/login");
    throw new ApiError("Not signed in.", 401);
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    if (res.ok) throw new ApiError(`The server sent a response that is not JSON (${path}).`, res.status);
  }
  if (!res.ok) {
    const text = data && typeof data.error === "string" ? data.error : `${res.status} ${res.statusText}`;
    throw new ApiError(text, res.status);
  }
  return data;
}

const seg = encodeURIComponent;

/** One page of the session list. `filters` holds status, workflow, q, before, limit (all optional). */
export function listSessions(filters) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(filters || {})) {
    if (v !== null && v !== undefined && v !== "") query.set(k, String(v));
  }
  const qs = query.toString();
  return request("GET", `/ui/api/sessions${qs ? `?${qs}` : ""}`);
}

export function listWorkflows() {
  return request("GET", "/ui/api/workflows");
}

/**
 * The snapshot of one session (row, graph, timeline, events, pending, outputs). With `after`, only
 * the event rows after that seq (a refresh of a page that has the rest).
 */
export function getSession(id, after) {
  const since = Number.isSafeInteger(after) && after > 0 ? `?after=${after}` : "";
  return request("GET", `/ui/api/sessions/${seg(id)}${since}`);
}

/** The full stored event `seq` of session `id`. */
export function getEvent(id, seq) {
  return request("GET", `/ui/api/sessions/${seg(id)}/events/${seg(String(seq))}`);
}

/** The server-sent-events URL of one session, starting after event `after`. */
export function streamUrl(id, after) {
  const since = Number.isSafeInteger(after) && after > 0 ? `?after=${after}` : "";
  return `/ui/api/sessions/${seg(id)}/stream${since}`;
}

/** POST an action (`approve`, `signal`, `cancel`, `resume`, `fork`) with a JSON body. */
export function act(id, action, body) {
  return request("POST", `/ui/api/sessions/${seg(id)}/${seg(action)}`, body);
}
