// ESLint for the web UI (src/millpond/server/ui): native ES modules in the browser, no build step.
// Beyond the recommended rules, the UI's one safety rule is enforced: the DOM is built from elements
// and text nodes, never from HTML strings (no innerHTML and kin, no document.write, no eval); and a missing
// value is never shown as "null" (children replaced through lib/dom.js's fill(), never replaceChildren).
import js from "@eslint/js";
import globals from "globals";

const HTML_SINKS = ["innerHTML", "outerHTML", "insertAdjacentHTML", "createContextualFragment", "setHTMLUnsafe"];

export default [
  { ignores: ["node_modules/**", ".venv/**", "build/**"] },
  {
    files: ["src/millpond/server/ui/**/*.js"],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser } },
    rules: {
      ...js.configs.recommended.rules,
      "no-restricted-properties": ["error",
        ...HTML_SINKS.map((property) => ({ property, message: "build the DOM with h()/s() and text nodes, never from HTML" })),
        { object: "document", property: "write", message: "build the DOM with h()/s() and text nodes" },
        { object: "document", property: "writeln", message: "build the DOM with h()/s() and text nodes" },
        // replaceChildren (and append) print a null or undefined child as the text "null": fill() leaves them out
        { property: "replaceChildren", message: "use fill() from lib/dom.js: it leaves out null and undefined, never shown as text" }],
      "no-eval": "error",
      "no-implied-eval": "error",
      "no-new-func": "error",
      "eqeqeq": "error",
      "no-var": "error",
      "prefer-const": "error",
      "no-unused-vars": ["error", { args: "none", caughtErrors: "none" }],
    },
  },
];
