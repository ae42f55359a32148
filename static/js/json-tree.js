/* A collapsible, searchable view of a JSON document. <div data-json-tree> around a
 * <pre> holding the JSON: with JavaScript the <pre> is replaced by a tree of <details> (the
 * first level open) with a search box that opens and marks every match; without it, the
 * <pre> stays as it is. Every value is set with textContent, never as markup. A link to
 * #/some/pointer opens and shows the node at that JSON pointer.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function escapeSegment(key) {
    return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
  }

  function leafText(value) {
    return JSON.stringify(value);
  }

  function leafClass(value) {
    if (value === null) return "jt-null";
    return "jt-" + typeof value;
  }

  function summaryOf(value) {
    if (Array.isArray(value)) {
      return "[" + value.length + (value.length === 1 ? " item]" : " items]");
    }
    var keys = Object.keys(value);
    return "{" + keys.length + (keys.length === 1 ? " key}" : " keys}");
  }

  function build(key, value, pointer, depth) {
    var isBranch = value !== null && typeof value === "object";
    var keyNode = key === null ? null : el("span", "jt-key", key + ": ");
    if (!isBranch) {
      var row = el("div", "jt-leaf");
      row.dataset.pointer = pointer;
      if (keyNode) row.appendChild(keyNode);
      row.appendChild(el("span", leafClass(value), leafText(value)));
      return row;
    }
    var details = el("details", "jt-branch");
    details.dataset.pointer = pointer;
    if (depth < 1) details.open = true;
    var summary = el("summary");
    if (keyNode) summary.appendChild(keyNode);
    summary.appendChild(el("span", "jt-count", summaryOf(value)));
    details.appendChild(summary);
    var children = el("div", "jt-children");
    var entries = Array.isArray(value)
      ? value.map(function (v, i) { return [i, v]; })
      : Object.keys(value).map(function (k) { return [k, value[k]]; });
    // Children are built when the branch first opens: a 20,000-line spec stays quick.
    var built = false;
    function fill() {
      if (built) return;
      built = true;
      entries.forEach(function (entry) {
        children.appendChild(
          build(entry[0], entry[1], pointer + "/" + escapeSegment(entry[0]), depth + 1)
        );
      });
    }
    details.fillChildren = fill;
    if (details.open) fill();
    details.addEventListener("toggle", function () { if (details.open) fill(); });
    details.appendChild(children);
    return details;
  }

  function fillAll(root) {
    var pending = root.querySelectorAll("details.jt-branch");
    while (pending.length) {
      var grew = false;
      Array.prototype.forEach.call(pending, function (d) {
        if (d.fillChildren && !d.dataset.filled) {
          d.fillChildren();
          d.dataset.filled = "1";
          grew = true;
        }
      });
      if (!grew) break;
      pending = root.querySelectorAll("details.jt-branch:not([data-filled])");
    }
  }

  function openAncestors(node, stop) {
    for (var p = node.parentElement; p && p !== stop; p = p.parentElement) {
      if (p.tagName === "DETAILS") p.open = true;
    }
  }

  function enhance(container) {
    if (container.dataset.enhanced) return;
    var pre = container.querySelector("pre");
    var doc;
    try {
      doc = JSON.parse(pre.textContent);
    } catch (e) {
      return;
    }
    container.dataset.enhanced = "1";
    var bar = el("div", "jt-toolbar");
    var search = el("input");
    search.type = "search";
    search.placeholder = "Search keys and values…";
    search.setAttribute("aria-label", "Search the spec");
    search.dataset.testid = "spec-search";
    var count = el("span", "small muted jt-matches");
    count.setAttribute("aria-live", "polite");
    var expand = el("button", "secondary outline small-button", "Expand all");
    var collapse = el("button", "secondary outline small-button", "Collapse all");
    var raw = el("button", "secondary outline small-button", "Show raw JSON");
    [expand, collapse, raw].forEach(function (b) { b.type = "button"; });
    bar.append(search, count, expand, collapse, raw);
    var tree = el("div", "jt-tree");
    tree.dataset.testid = "spec-tree";
    tree.appendChild(build(null, doc, "", 0));
    pre.hidden = true;
    container.insertBefore(bar, pre);
    container.insertBefore(tree, pre);

    expand.addEventListener("click", function () {
      fillAll(tree);
      tree.querySelectorAll("details").forEach(function (d) { d.open = true; });
    });
    collapse.addEventListener("click", function () {
      tree.querySelectorAll("details").forEach(function (d) { d.open = false; });
      tree.firstChild.open = true;
    });
    raw.addEventListener("click", function () {
      var showRaw = !pre.hidden;
      pre.hidden = showRaw;
      tree.hidden = !showRaw;
      raw.textContent = showRaw ? "Show raw JSON" : "Show tree";
    });

    var timer = null;
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 200);
    });
    search.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") return;
      event.preventDefault();
      var hits = tree.querySelectorAll(".jt-hit");
      if (!hits.length) return;
      var current = tree.querySelector(".jt-current");
      var index = Array.prototype.indexOf.call(hits, current);
      if (current) current.classList.remove("jt-current");
      var next = hits[(index + 1) % hits.length];
      next.classList.add("jt-current");
      next.scrollIntoView({ block: "center" });
    });

    function run() {
      var needle = search.value.trim().toLowerCase();
      tree.querySelectorAll(".jt-hit").forEach(function (n) {
        n.classList.remove("jt-hit", "jt-current");
      });
      if (!needle) {
        count.textContent = "";
        return;
      }
      fillAll(tree);
      var hits = 0;
      tree.querySelectorAll(".jt-leaf, summary").forEach(function (row) {
        if (row.textContent.toLowerCase().indexOf(needle) === -1) return;
        if (row.tagName === "SUMMARY") {
          var key = row.querySelector(".jt-key");
          if (!key || key.textContent.toLowerCase().indexOf(needle) === -1) return;
        }
        row.classList.add("jt-hit");
        openAncestors(row.tagName === "SUMMARY" ? row.parentElement : row, tree);
        hits += 1;
      });
      count.textContent = hits === 1 ? "1 match" : hits + " matches";
    }

    function showPointer() {
      var hash = decodeURIComponent(location.hash.slice(1));
      if (hash.charAt(0) !== "/") return;
      fillAll(tree);
      var node = tree.querySelector('[data-pointer="' + CSS.escape(hash) + '"]');
      if (!node) return;
      openAncestors(node, tree);
      if (node.tagName === "DETAILS") node.open = true;
      node.classList.add("jt-current");
      node.scrollIntoView({ block: "start" });
    }
    showPointer();
    window.addEventListener("hashchange", showPointer);
  }

  function init(root) {
    (root.querySelectorAll ? root : document)
      .querySelectorAll("[data-json-tree]")
      .forEach(enhance);
  }

  document.addEventListener("htmx:load", function (event) { init(event.target); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
