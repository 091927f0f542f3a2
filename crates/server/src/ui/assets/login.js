// login.js — the only script of the login page: shows the "token not accepted" notice after a failed
// attempt (the server redirects to /ui/login?failed=1). The notice text is static in login.html;
// this script only unhides it. It never reads the token field or sends anything itself.

const failed = new URLSearchParams(location.search).get("failed") === "1";
const notice = document.getElementById("login-failed");
if (failed && notice) {
  notice.hidden = false;
  document.getElementById("token")?.focus();
}
