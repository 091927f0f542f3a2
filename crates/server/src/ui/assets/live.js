// live.js — following a session as it runs: the server-sent-events stream and the throttled
// snapshot refetch that goes with it.
//
// `follow(id, after, handlers)` opens an EventSource on /ui/api/sessions/<id>/stream?after=<seq>
// (the events the page does not have yet; the browser resumes with Last-Event-ID on its own) and hands parsed `event` rows and `status` changes to the page.
// `throttled(fn, ms)` runs an async job at most once per `ms`, never two at a time, and always once
// more after the last request (trailing), which is how the page refetches the snapshot.
//
// What it never does: render anything, or act on a message it cannot parse (it is dropped).

import { streamUrl } from "./api.js";

/**
 * Opens the stream of session `id`. Handlers: onEvent(row), onStatus(status), onOpen(), onDown().
 * Returns { close() }.
 */
export function follow(id, after, { onEvent, onStatus, onOpen, onDown }) {
  const source = new EventSource(streamUrl(id, after));
  const parse = (msg) => {
    try {
      return JSON.parse(msg.data);
    } catch {
      return null;
    }
  };
  source.addEventListener("event", (msg) => {
    const row = parse(msg);
    if (row && typeof row === "object" && Number.isSafeInteger(row.seq)) onEvent(row);
  });
  source.addEventListener("status", (msg) => {
    const data = parse(msg);
    if (data && typeof data.status === "string") onStatus(data.status);
  });
  source.addEventListener("open", () => onOpen?.());
  source.addEventListener("error", () => onDown?.(source.readyState === EventSource.CLOSED));
  return { close: () => source.close() };
}

/**
 * Wraps async `job` so that calls run it at most once per `ms`: the first call runs at once, calls
 * during the quiet time or while it runs collapse into one trailing run.
 */
export function throttled(job, ms) {
  let last = -Infinity;
  let running = false;
  let wanted = false;
  let timer = 0;

  async function run() {
    timer = 0;
    running = true;
    wanted = false;
    last = performance.now();
    try {
      await job();
    } catch {
      // the job reports its own errors; a failed refetch must not stop later ones
    } finally {
      running = false;
      if (wanted) request();
    }
  }

  function request() {
    wanted = true;
    if (running || timer) return;
    const wait = last + ms - performance.now();
    if (wait <= 0) run();
    else timer = setTimeout(run, wait);
  }

  return request;
}
