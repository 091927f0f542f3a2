// app.js — entry point of the web view: picks the page from location.pathname and fills the header.
//
//   /ui/ or /ui             → the session list   (list.js)
//   /ui/sessions/<id>       → one session        (session.js)
//   anything else           → "Not found"
//
// The shell (app.html) is the same for every page; this module only routes. It never renders data
// itself beyond the logout form and error text.

import { h, fill, isSessionId, markRendered } from "./dom.js";
import { me } from "./api.js";
import { showList } from "./list.js";
import { showSession } from "./session.js";

const root = document.getElementById("app");

function route(path) {
  if (path === "/ui" || path === "/ui/") return { page: "list" };
  const m = /^\/ui\/sessions\/([^/]+)\/?$/.exec(path);
  if (m) {
    let id = null;
    try {
      id = decodeURIComponent(m[1]);
    } catch {
      id = null;
    }
    if (isSessionId(id)) return { page: "session", id };
  }
  return { page: "missing" };
}

/** Adds the "Log out" form to the header when the server uses token auth. */
async function showAccount() {
  const slot = document.getElementById("account");
  if (!slot) return;
  const { auth, csrf } = await me();
  if (auth !== "token") {
    fill(slot, h("span", { class: "muted", title: "Open to this machine only, no sign-in" }, "local"));
    return;
  }
  fill(slot, h("form", { method: "post", action: "/ui/logout", class: "logout" },
    h("input", { type: "hidden", name: "csrf", value: csrf }),
    h("button", { type: "submit", id: "logout" }, "Log out")));
}

function showError(err) {
  if (err && err.status === 401) return; // api.js is already on its way to the login page
  fill(root, h("p", { class: "message error", role: "alert" }, `Could not load this page: ${err?.message ?? err}`));
}

async function main() {
  const where = route(location.pathname);
  showAccount().catch(() => {}); // the page's own requests report auth problems
  try {
    if (where.page === "list") await showList(root);
    else if (where.page === "session") await showSession(root, where.id);
    else {
      document.title = "Not found — agentfile";
      fill(root, h("h1", null, "Not found"),
        h("p", null, "There is no page here. ", h("a", { href: "/ui/" }, "Back to the sessions.")));
      markRendered();
    }
  } catch (err) {
    showError(err);
  }
}

main();
