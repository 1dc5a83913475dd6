/* kefu chat widget: one tag on a shop's own site.
 *   <script src="https://kefu.example/widget.js" data-kefu-url="https://kefu.example" async></script>
 * A launcher in the corner opens the chat page (/?embed=1) in an iframe. Both live in a
 * shadow root, so the shop's CSS cannot reach them, and the chat runs on kefu's origin
 * (its own storage and credentials); the server lets the shop's origin frame it and call
 * it with --allowed-origins. The launcher counts a human agent's replies while closed; the
 * conversation's id is kept on the shop's page too, for browsers that block the iframe's. */
(() => {
  const script = document.currentScript;
  if (!script || window.__kefuWidget) return;
  window.__kefuWidget = true;
  const base = new URL(script.dataset.kefuUrl || new URL(script.src).origin, location.href);
  const origin = base.origin;
  const zh = (navigator.language || "").toLowerCase().startsWith("zh");
  const words = zh
    ? { open: (s) => `与${s}客服聊天`, close: "关闭聊天", unread: (n) => `${n} 条新消息`, chat: "在线客服" }
    : { open: (s) => `Chat with ${s}`, close: "Close chat", unread: (n) => `${n} new`, chat: "customer service" };

  const host = document.createElement("div");
  host.setAttribute("data-kefu-widget", "");
  const root = host.attachShadow({ mode: "open" });
  root.innerHTML = `
<style>
  :host { all: initial; }
  .launcher { position: fixed; right: 20px; bottom: 20px; z-index: 2147483646; width: 60px; height: 60px;
    border-radius: 50%; border: 0; background: #1f5fbf; color: #fff; cursor: pointer;
    box-shadow: 0 4px 14px rgba(0,0,0,.25); display: flex; align-items: center; justify-content: center; }
  .launcher:focus-visible { outline: 3px solid #f0a000; outline-offset: 3px; }
  .launcher svg { width: 28px; height: 28px; }
  .badge { position: absolute; top: -4px; right: -4px; min-width: 22px; height: 22px; padding: 0 6px;
    border-radius: 11px; background: #b3261e; color: #fff; font: 700 13px/22px system-ui, sans-serif;
    text-align: center; box-sizing: border-box; }
  .badge[hidden] { display: none; }
  .panel { position: fixed; right: 20px; bottom: 92px; z-index: 2147483647; width: 380px;
    height: min(640px, calc(100vh - 112px)); border-radius: 14px; overflow: hidden; background: #fff;
    box-shadow: 0 10px 40px rgba(0,0,0,.3); display: none; }
  .panel.open { display: block; }
  iframe { border: 0; width: 100%; height: 100%; display: block; }
  @media (max-width: 480px) {
    .panel { right: 0; bottom: 0; width: 100vw; height: 100vh; height: 100dvh; border-radius: 0; }
    .panel.open + .launcher { display: none; }
  }
</style>
<div class="panel" role="dialog" aria-modal="false"></div>
<button class="launcher" type="button" aria-expanded="false">
  <svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" aria-hidden="true">
    <path d="M21 12a8 8 0 0 1-11.6 7.1L4 20l1-4.6A8 8 0 1 1 21 12z"/></svg>
  <span class="badge" hidden></span>
</button>`;
  const panel = root.querySelector(".panel");
  const launcher = root.querySelector(".launcher");
  const badge = root.querySelector(".badge");
  // Browsers that block a third party's storage leave the iframe nothing to keep the
  // conversation in across page loads: the shop's page keeps its id instead.
  const kept = `kefu-widget-session:${origin}`;
  const remembered = (() => { try { return localStorage.getItem(kept); } catch { return null; } })();
  const frame = document.createElement("iframe");
  frame.src = new URL("/?embed=1" + (remembered ? "#session=" + encodeURIComponent(remembered) : ""), base).href;
  frame.title = words.chat;
  panel.appendChild(frame);
  let unread = 0;
  let shop = "";

  function describe() {
    const name = words.open(shop || words.chat);
    launcher.setAttribute("aria-label", unread ? `${name} (${words.unread(unread)})` : name);
    panel.setAttribute("aria-label", shop || words.chat);
    badge.textContent = unread ? String(unread) : "";
    badge.hidden = !unread;
  }
  function open() {
    panel.classList.add("open");
    launcher.setAttribute("aria-expanded", "true");
    unread = 0; describe();
    frame.focus();
    frame.contentWindow.postMessage({ kefu: "opened" }, origin);
  }
  function close() {
    panel.classList.remove("open");
    launcher.setAttribute("aria-expanded", "false");
    launcher.focus();
  }
  launcher.addEventListener("click", () => (panel.classList.contains("open") ? close() : open()));
  window.addEventListener("message", (e) => {
    if (e.origin !== origin || e.source !== frame.contentWindow || !e.data) return;
    if (e.data.kefu === "close") close();
    else if (e.data.kefu === "session") {
      try { if (e.data.id) localStorage.setItem(kept, e.data.id); else localStorage.removeItem(kept); } catch { /* none */ }
    }
    else if (e.data.kefu === "agent-message" && !panel.classList.contains("open")) { unread += 1; describe(); }
  });
  describe();
  // The shop's name for the launcher: a cross-origin read the server allows by CORS.
  fetch(new URL("/widget/config", base))
    .then((r) => (r.ok ? r.json() : null))
    .then((c) => { if (c && c.shop) { shop = c.shop[zh ? "zh" : "en"] || ""; describe(); } })
    .catch(() => {});
  const mount = () => document.body.appendChild(host);
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
})();
