/* Form enhancements; without JavaScript every form works as it is.
 *
 * 1. <select multiple> becomes a searchable list of checkboxes: a filter box, the options as
 *    checkboxes, "N selected" and Clear. The select stays in the form (hidden) and carries
 *    the choice, so the server sees exactly what it saw before. A required one that is left
 *    empty says so beside its checkboxes (the browser cannot point at the hidden select).
 * 2. [data-show-if="field=value"]: the element shows only while the form's field has that
 *    value (the synthesis form hides its LLM-only fields when Template is chosen);
 *    "field=a|b" for either value, "field!=a" for any other, "c1&c2" for both (the training
 *    form shows each method's and backend's fields, and says why a pair cannot work).
 * 3. [data-copy="#id"] buttons (hidden until now) copy that element's text to the clipboard.
 * 4. When a posted form comes back with problems (htmx swaps it in place, the page stays where
 *    it was), the first problem is brought into view and its field focused: the reply to a
 *    click at the foot of a long form may be an error far above, out of sight.
 * 5. select[data-swap-preset="text|vision"] (the training form's dataset version): choosing
 *    a version whose option has data-images swaps the text preset for the vision one, and a
 *    version without swaps it back; any other preset is the user's own choice and stays.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function nameOf(select) {
    var label = select.labels && select.labels[0];
    if (!label) return select.getAttribute("aria-label") || select.name;
    var own = "";
    label.childNodes.forEach(function (n) { if (n.nodeType === 3) own += n.textContent; });
    return own.trim() || select.name;
  }

  function enhanceSelect(select) {
    if (select.dataset.choices === "on") return;
    select.dataset.choices = "on";
    var name = nameOf(select);
    var box = el("div", "choice-list");
    box.dataset.testid = "choices-" + select.name;
    var head = el("div", "choice-head");
    var search = el("input");
    search.type = "search";
    search.placeholder = "Filter " + name.toLowerCase() + "…";
    search.setAttribute("aria-label", "Filter " + name.toLowerCase());
    var count = el("span", "small muted choice-count");
    count.setAttribute("aria-live", "polite");
    var clear = el("button", "link-button small", "Clear");
    clear.type = "button";
    head.append(search, count, clear);
    var list = el("div", "choice-options");
    var boxes = [];
    Array.prototype.forEach.call(select.options, function (option) {
      var row = el("label", "inline-check choice");
      var check = el("input");
      check.type = "checkbox";
      check.value = option.value;
      check.checked = option.selected;
      check.addEventListener("change", function () {
        option.selected = check.checked;
        select.dispatchEvent(new Event("change", { bubbles: true }));
        update();
      });
      row.append(check, document.createTextNode(" " + option.textContent.trim()));
      row.dataset.text = option.textContent.trim().toLowerCase();
      list.appendChild(row);
      boxes.push(check);
    });
    var empty = el("p", "small muted choice-empty", "Nothing matches.");
    empty.hidden = true;
    list.appendChild(empty);
    var problem = el("p", "choice-problem", "Choose at least one.");
    problem.hidden = true;
    problem.setAttribute("role", "alert");
    problem.dataset.testid = "choices-problem-" + select.name;
    box.append(head, list, problem);

    function update() {
      var n = boxes.filter(function (b) { return b.checked; }).length;
      count.textContent = n ? n + " selected" : "none selected";
      clear.hidden = !n;
      if (n) {
        problem.hidden = true;
        box.classList.remove("choice-invalid");
      }
    }
    // The hidden select is what the browser checks on submit; it cannot show its own bubble.
    select.addEventListener("invalid", function (event) {
      event.preventDefault();
      problem.hidden = false;
      box.classList.add("choice-invalid");
      var first = select.form && select.form.querySelector(":invalid:not(fieldset, form)");
      if (!first || first === select) {  // only the form's first problem takes the focus
        box.scrollIntoView({ block: "center" });
        (boxes[0] || search).focus({ preventScroll: true });
      }
    });
    search.addEventListener("input", function () {
      var needle = search.value.trim().toLowerCase();
      var shown = 0;
      list.querySelectorAll(".choice").forEach(function (row) {
        var match = !needle || row.dataset.text.indexOf(needle) !== -1;
        row.hidden = !match;
        if (match) shown += 1;
      });
      empty.hidden = shown > 0;
    });
    search.addEventListener("keydown", function (event) {
      if (event.key === "Enter") event.preventDefault();  // filtering never submits
    });
    clear.addEventListener("click", function () {
      boxes.forEach(function (b) { b.checked = false; });
      Array.prototype.forEach.call(select.options, function (o) { o.selected = false; });
      update();
    });
    update();

    // The checkboxes have their own labels: the field's <label> becomes a plain block.
    var label = select.labels && select.labels[0];
    select.hidden = true;
    select.tabIndex = -1;
    if (label && label.contains(select)) {
      var field = el("div", "field " + label.className);
      while (label.firstChild) field.appendChild(label.firstChild);
      label.replaceWith(field);
      var text = field.firstChild;
      if (text && text.nodeType === 3 && text.textContent.trim()) {
        var caption = el("span", "field-label", text.textContent.trim());
        field.replaceChild(caption, text);
      }
    }
    select.insertAdjacentElement("afterend", box);
  }

  function showIf(root) {
    root.querySelectorAll("[data-show-if]").forEach(function (target) {
      var form = target.closest("form");
      if (!form || target.dataset.showIfBound) return;
      target.dataset.showIfBound = "1";
      var conditions = target.dataset.showIf.split("&");
      function holds(data, condition) {
        var negated = condition.indexOf("!=") > 0;
        var parts = condition.split(negated ? "!=" : "=");
        var hit = parts[1].split("|").indexOf(data.get(parts[0]) || "") >= 0;
        return negated ? !hit : hit;
      }
      function sync() {
        var data = new FormData(form);
        target.hidden = !conditions.every(function (c) { return holds(data, c); });
      }
      form.addEventListener("change", sync);
      sync();
    });
  }

  function swapPresets(root) {
    root.querySelectorAll("select[data-swap-preset]").forEach(function (select) {
      var preset = select.form && select.form.elements.namedItem("preset");
      if (!preset || select.dataset.swapBound) return;
      select.dataset.swapBound = "1";
      var pair = select.dataset.swapPreset.split("|");
      select.addEventListener("change", function () {
        var option = select.options[select.selectedIndex];
        var want = option && option.dataset.images ? pair[1] : pair[0];
        if (pair.indexOf(preset.value) < 0 || preset.value === want) return;
        preset.value = want;
        preset.dispatchEvent(new Event("change", { bubbles: true }));
      });
    });
  }

  function copyButtons(root) {
    root.querySelectorAll("[data-copy]").forEach(function (button) {
      if (button.dataset.copyBound) return;
      button.dataset.copyBound = "1";
      button.hidden = false;
      button.addEventListener("click", function () {
        var source = document.querySelector(button.dataset.copy);
        if (!source) return;
        var text = source.textContent.trim();
        function done(ok) {
          button.textContent = ok ? "Copied" : "Select and copy it";
          setTimeout(function () { button.textContent = "Copy"; }, 2500);
        }
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
        } else {
          var range = document.createRange();
          range.selectNodeContents(source);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          var ok = false;
          try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
          done(ok);
        }
      });
    });
  }

  function showFirstProblem(root) {
    var problem = root.querySelector(".errorlist, [role=alert]:not([hidden])");
    if (!problem) return;
    var field = problem.closest("label, .field, fieldset") || problem;
    var box = field.getBoundingClientRect();
    var header = document.querySelector("header.topbar");
    var top = header ? header.getBoundingClientRect().bottom : 0;
    if (box.top >= top && box.bottom <= window.innerHeight) return;  // in sight: leave it be
    var control = field.querySelector(
      "input:not([type=hidden]):not([type=search]), select:not([hidden]), textarea"
    );
    if (control && control.offsetParent !== null) control.focus({ preventScroll: true });
    field.scrollIntoView({ block: "center" });
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    var config = event.detail.requestConfig;
    var root = event.detail.elt;
    if (!config || String(config.verb).toLowerCase() !== "post" || !root.querySelector) return;
    if (root.tagName !== "FORM" && !root.querySelector("form")) return;
    // JSON editors mark and scroll to their own problems (json-editor.js)
    if (root.querySelector("textarea.json-input, textarea.spec-editor")) return;
    showFirstProblem(root);
  });

  function init(root) {
    var scope = root.querySelectorAll ? root : document;
    scope.querySelectorAll("select[multiple]").forEach(enhanceSelect);
    swapPresets(scope);
    showIf(scope);
    copyButtons(scope);
  }

  document.addEventListener("htmx:load", function (event) { init(event.target); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
