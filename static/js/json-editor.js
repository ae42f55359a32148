/* JSON editors: every <textarea class="json-input"> or "spec-editor" becomes a CodeMirror 6
 * editor (line numbers, bracket matching, folding, JSON syntax linting) once the vendored
 * bundle has loaded; the textarea stays in the form, hidden, and carries the text. Without
 * JavaScript the textarea is the editor.
 *
 * The server's validation problems come in the textarea's data-problems attribute as
 * [{"line": 3, "column": 5?, "severity": "error"|"warning", "message": "…"}] and show as gutter
 * marks and underlines at their lines; they follow the text as it is edited. Buttons with
 * data-jump-line (and data-jump-column) move the editor — or the bare textarea — to that line.
 */
(function () {
  "use strict";
  var SELECTOR = "textarea.json-input, textarea.spec-editor";
  var loading = null;

  function bundle() {
    if (window.CoworkCM) return Promise.resolve(window.CoworkCM);
    if (loading) return loading;
    var me = document.querySelector("script[data-codemirror-src]");
    loading = new Promise(function (resolve, reject) {
      var script = document.createElement("script");
      script.src = me.getAttribute("data-codemirror-src");
      script.onload = function () { resolve(window.CoworkCM); };
      script.onerror = reject;
      document.head.appendChild(script);
    });
    return loading;
  }

  function serverProblems(textarea) {
    try {
      return JSON.parse(textarea.getAttribute("data-problems") || "[]");
    } catch (e) {
      return [];
    }
  }

  function toDiagnostics(doc, problems) {
    var out = [];
    problems.forEach(function (p) {
      if (!p.line || p.line > doc.lines) return;
      var line = doc.line(p.line);
      var indent = line.text.length - line.text.replace(/^\s+/, "").length;
      var from = line.from + (p.column ? Math.min(p.column - 1, line.length) : indent);
      out.push({
        from: from,
        to: Math.max(from, line.to),
        severity: p.severity === "warning" ? "warning" : "error",
        message: p.message,
      });
    });
    return out;
  }

  // The Problems panel beside the whole-spec editor reports the last check the server
  // made; once the text has changed it must not still say "no problems".
  var loadedText = new WeakMap();
  function notePanel(view, syntax) {
    var quiet = document.querySelector('[data-testid="no-problems"]');
    if (!quiet) return;
    if (!quiet.dataset.checked) quiet.dataset.checked = quiet.textContent;
    var text = view.state.doc.toString();
    if (!loadedText.has(view)) loadedText.set(view, text);
    if (syntax.length) {
      quiet.textContent = "The text is not valid JSON (marked in the editor): fix it, then save to check it.";
    } else if (text !== loadedText.get(view)) {
      quiet.textContent = "Edited since the last check: save to check it again.";
    } else {
      quiet.textContent = quiet.dataset.checked;
    }
  }

  function enhance(CM, textarea) {
    if (textarea.dataset.editor === "on") return;
    textarea.dataset.editor = "on";
    var problems = serverProblems(textarea);
    // The server's problems, kept at their places while the text changes around them.
    var serverField = CM.StateField.define({
      create: function (state) { return toDiagnostics(state.doc, problems); },
      update: function (diagnostics, tr) {
        if (!tr.docChanged) return diagnostics;
        return diagnostics
          .filter(function (d) { return !tr.changes.touchesRange(d.from, d.to); })
          .map(function (d) {
            return Object.assign({}, d, {
              from: tr.changes.mapPos(d.from),
              to: tr.changes.mapPos(d.to),
            });
          });
      },
    });
    var parseLinter = CM.jsonParseLinter();
    var lint = CM.linter(
      function (view) {
        var allowEmpty = !textarea.required && !view.state.doc.toString().trim();
        var syntax = allowEmpty ? [] : parseLinter(view);
        notePanel(view, syntax);
        return syntax.concat(view.state.field(serverField));
      },
      { delay: 300 }
    );
    var rows = parseInt(textarea.getAttribute("rows") || "8", 10);
    var view = new CM.EditorView({
      doc: textarea.value,
      extensions: [
        CM.lineNumbers(),
        CM.highlightActiveLineGutter(),
        CM.highlightSpecialChars(),
        CM.history(),
        CM.foldGutter(),
        CM.drawSelection(),
        CM.indentOnInput(),
        CM.syntaxHighlighting(CM.defaultHighlightStyle, { fallback: true }),
        CM.bracketMatching(),
        CM.closeBrackets(),
        CM.highlightActiveLine(),
        CM.highlightSelectionMatches(),
        CM.keymap.of(
          [].concat(
            CM.closeBracketsKeymap,
            CM.defaultKeymap,
            CM.searchKeymap,
            CM.historyKeymap,
            CM.foldKeymap,
            CM.lintKeymap,
            [CM.indentWithTab]
          )
        ),
        CM.json(),
        serverField,
        lint,
        CM.lintGutter(),
        CM.EditorView.contentAttributes.of({ "aria-label": labelOf(textarea) }),
        CM.EditorView.updateListener.of(function (update) {
          if (update.docChanged) textarea.value = update.state.doc.toString();
        }),
      ],
    });
    view.dom.classList.add("json-editor");
    if (textarea.classList.contains("spec-editor")) view.dom.classList.add("json-editor-tall");
    else view.dom.style.minHeight = Math.max(4, rows) * 1.45 + 1 + "em";
    textarea.parentNode.insertBefore(view.dom, textarea.nextSibling);
    textarea.hidden = true;
    textarea.editorView = view;
    // The label now names the editor (aria-label above), not the hidden textarea: one
    // control per label, and a click on the label's text focuses the editor.
    var label = textarea.labels && textarea.labels[0];
    if (label) {
      label.removeAttribute("for");
      if (label.contains(textarea)) label.parentNode.insertBefore(textarea, label);
      label.addEventListener("click", function (e) {
        if (!view.dom.contains(e.target)) view.focus();
      });
    }
    CM.forceLinting(view);
  }

  function labelOf(textarea) {
    var label = textarea.labels && textarea.labels[0];
    return label ? label.textContent.trim().split("\n")[0].trim() : textarea.name;
  }

  function init(root) {
    var areas = (root.querySelectorAll ? root : document).querySelectorAll(SELECTOR);
    if (root.matches && root.matches(SELECTOR)) areas = [root];
    if (!areas.length) return;
    bundle().then(function (CM) {
      Array.prototype.forEach.call(areas, function (t) { enhance(CM, t); });
    });
  }

  function jumpTo(button) {
    var scope = button.closest("[data-editor-scope]") || document;
    var area = scope.querySelector(SELECTOR);
    if (!area) return;
    var line = parseInt(button.dataset.jumpLine, 10);
    var column = parseInt(button.dataset.jumpColumn || "0", 10);
    var view = area.editorView;
    if (view) {
      var doc = view.state.doc;
      var target = doc.line(Math.max(1, Math.min(doc.lines, line)));
      var anchor = column ? Math.min(target.to, target.from + column - 1) : target.from;
      view.dispatch({
        selection: { anchor: anchor, head: target.to },
        effects: window.CoworkCM.EditorView.scrollIntoView(anchor, { y: "center" }),
      });
      view.focus();
      return;
    }
    var lines = area.value.split("\n");
    line = Math.max(1, Math.min(lines.length, line));
    var start = 0;
    for (var i = 0; i < line - 1; i++) start += lines[i].length + 1;
    area.focus();
    area.setSelectionRange(start + Math.max(0, column - 1), start + lines[line - 1].length);
    var lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 18;
    area.scrollTop = Math.max(0, (line - 5) * lineHeight);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-jump-line]");
    if (button) jumpTo(button);
  });
  document.addEventListener("htmx:load", function (event) { init(event.target); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
