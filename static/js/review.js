/* The review queue's keyboard: a first-party script, no dependencies.
 *
 * Every action is a plain form or link on the page; the keys only press them:
 *   a approve · r reject (reasons + comment) · c needs changes · n next · p previous
 *   j / k select the next / previous assistant turn · e edit the selected turn's text
 *   x exclude (or include again) the selected turn · d drop from the selected turn on
 *   1-9 toggle a reason while the reject / changes panel is open
 *   Ctrl+Enter (or Cmd+Enter) submits the form you are typing in · Esc closes · ? this sheet
 *
 * Loaded on every review page visit (htmx re-runs scripts on boosted navigation), so the
 * document-level listener is installed once and looks the page up on each key.
 */
(function () {
  "use strict";
  if (window.coworkReviewKeys) return;
  window.coworkReviewKeys = true;

  function root() { return document.querySelector("[data-review-root]"); }

  function typing(el) {
    if (!el) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    if (el.tagName !== "INPUT") return false;
    return !["checkbox", "radio", "button", "submit", "reset"].includes((el.type || "").toLowerCase());
  }

  function press(selector) {
    var r = root();
    var target = r && r.querySelector(selector);
    if (!target || target.disabled) return false;
    if (target.tagName === "FORM") target.requestSubmit(); else target.click();
    return true;
  }

  function turns() { var r = root(); return r ? Array.from(r.querySelectorAll("[data-turn]")) : []; }

  function selected() {
    var list = turns();
    return list.find(function (t) { return t.classList.contains("selected"); }) || null;
  }

  function select(turn) {
    turns().forEach(function (t) { t.classList.remove("selected"); t.removeAttribute("aria-current"); });
    if (!turn) return;
    turn.classList.add("selected");
    turn.setAttribute("aria-current", "true");
    turn.scrollIntoView({ block: "nearest" });
  }

  function ensureSelection() {
    var list = turns();
    if (!list.length) return null;
    if (!selected()) select(list.find(function (t) { return t.dataset.default === "true"; }) || list[list.length - 1]);
    return selected();
  }

  function move(step) {
    var list = turns();
    if (!list.length) return;
    var current = selected();
    var i = current ? list.indexOf(current) + step : (step > 0 ? 0 : list.length - 1);
    select(list[Math.max(0, Math.min(list.length - 1, i))]);
  }

  function openPanel(id) {
    var r = root();
    var panel = r && r.querySelector(id);
    if (!panel) return;
    r.querySelectorAll("details.decision-panel[open]").forEach(function (d) { if (d !== panel) d.open = false; });
    panel.open = true;
    var first = panel.querySelector("input[type=checkbox], textarea");
    if (first) first.focus();
  }

  function openPanelElement() {
    var r = root();
    return r && r.querySelector("details.decision-panel[open]");
  }

  function sheet() { return document.getElementById("shortcut-sheet"); }

  function closeAll() {
    var s = sheet();
    if (s && s.open) { s.close(); return true; }
    var r = root();
    if (!r) return false;
    var closed = false;
    r.querySelectorAll("details.decision-panel[open], details.edit-turn[open]").forEach(function (d) {
      d.open = false; closed = true;
    });
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    return closed;
  }

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-open-shortcuts]");
    var s = sheet();
    if (opener && s && !s.open) s.showModal();
  });

  document.addEventListener("keydown", function (event) {
    var r = root();
    if (!r) return;
    var el = event.target;
    if (event.key === "Escape") {
      if (closeAll()) event.preventDefault();
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      var form = el && el.closest && el.closest("form");
      if (form && r.contains(form)) { event.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(el)) return;
    var panel = openPanelElement();
    if (panel && /^[1-9]$/.test(event.key)) {
      var boxes = panel.querySelectorAll("input[type=checkbox]");
      var box = boxes[parseInt(event.key, 10) - 1];
      if (box) { box.checked = !box.checked; box.focus(); event.preventDefault(); }
      return;
    }
    var handled = true;
    switch (event.key) {
      case "a": handled = press("[data-action=approve]"); break;
      case "r": openPanel("#reject-panel"); break;
      case "c": openPanel("#changes-panel"); break;
      case "n": handled = press("[data-action=next]"); break;
      case "p": handled = press("[data-action=previous]"); break;
      case "j": ensureSelection() && move(1); break;
      case "k": ensureSelection() && move(-1); break;
      case "e": {
        var turn = ensureSelection();
        var edit = turn && turn.querySelector("details.edit-turn");
        if (!edit) { handled = false; break; }
        edit.open = true;
        var area = edit.querySelector("textarea");
        if (area) { area.focus(); area.setSelectionRange(area.value.length, area.value.length); }
        break;
      }
      case "x": { var t = ensureSelection(); handled = !!(t && press("#" + t.id + " [data-action=weight]")); break; }
      case "d": { var u = ensureSelection(); handled = !!(u && press("#" + u.id + " [data-action=truncate]")); break; }
      case "?": { var s = sheet(); if (s && !s.open) s.showModal(); break; }
      default: handled = false;
    }
    if (handled) event.preventDefault();
  });
})();
