// The CodeMirror 6 pieces CoworkEnv's JSON editors use, exposed as window.CoworkCM.
// static/js/json-editor.js builds the editors from them. Rebuild: see README.md here.
export { EditorState, StateField, StateEffect } from "@codemirror/state";
export {
  EditorView,
  keymap,
  lineNumbers,
  highlightActiveLine,
  highlightActiveLineGutter,
  drawSelection,
  highlightSpecialChars,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  bracketMatching,
  foldGutter,
  foldKeymap,
  indentOnInput,
  syntaxHighlighting,
  defaultHighlightStyle,
} from "@codemirror/language";
export { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
export { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
export { linter, lintGutter, lintKeymap, forceLinting } from "@codemirror/lint";
export { json, jsonParseLinter } from "@codemirror/lang-json";
