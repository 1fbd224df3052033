#!/usr/bin/env node
// A native-solc stand-in backed by solcjs (WebAssembly) from node_modules.
//
// ape-solidity / py-solc-x, forge and slither (through forge) call a `solc`
// executable with `--version` or `--standard-json`. solcjs' own CLI is not a
// drop-in (it rejects --allow-paths and prints extra lines before the JSON), so
// this adapter speaks only the two calls those tools make:
//   solc --version                      -> "solc, the solidity compiler ...\nVersion: <x>"
//   solc --standard-json [paths...]     -> compile stdin JSON, print output JSON
// Imports are read from disk under every --base-path / --include-path /
// --allow-paths directory and the working directory, as native solc does.
'use strict';
const fs = require('fs');
const path = require('path');

const solcDir = process.env.TENZRO_SOLCJS_DIR || path.resolve(__dirname, '../../node_modules/solc');
const solc = require(solcDir);

const args = process.argv.slice(2);
if (args.includes('--version') || args.includes('-v')) {
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${solc.version()}\n`);
  process.exit(0);
}
if (!args.includes('--standard-json')) {
  process.stderr.write('solc-adapter: only --version and --standard-json are supported\n');
  process.exit(2);
}

const roots = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const takeValue = (flag) => (a === flag ? args[++i] : a.startsWith(flag + '=') ? a.slice(flag.length + 1) : null);
  for (const flag of ['--base-path', '--include-path', '--allow-paths']) {
    const v = takeValue(flag);
    if (v !== null && v !== undefined) {
      for (const p of v.split(',')) if (p) roots.push(path.resolve(p));
      break;
    }
  }
}
roots.push(process.cwd());

function findImports(importPath) {
  const candidates = path.isAbsolute(importPath) ? [importPath] : roots.map((r) => path.join(r, importPath));
  for (const c of candidates) {
    try {
      if (fs.statSync(c).isFile()) return { contents: fs.readFileSync(c, 'utf8') };
    } catch (_) { /* try next root */ }
  }
  return { error: `File not found: ${importPath} (searched ${roots.join(', ')})` };
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  // Inline sources given by path (ape sends {"urls": [...]}) are read here,
  // because solcjs only resolves sources through the import callback.
  const parsed = JSON.parse(input);
  for (const [name, src] of Object.entries(parsed.sources || {})) {
    if (src.content === undefined && Array.isArray(src.urls)) {
      for (const u of src.urls) {
        const r = findImports(u);
        if (r.contents !== undefined) { src.content = r.contents; delete src.urls; break; }
      }
      if (src.content === undefined) {
        const r = findImports(name);
        if (r.contents !== undefined) { src.content = r.contents; delete src.urls; }
      }
    }
  }
  process.stdout.write(solc.compile(JSON.stringify(parsed), { import: findImports }));
});
