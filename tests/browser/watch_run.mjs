// Watches one run page of `tenzro explorer` in a real headless Chromium and reports what a
// person would see, as it changes.
//
// Usage: node tests/browser/watch_run.mjs --url http://127.0.0.1:PORT/runs/NAME [--timeout-s 300]
//
// The browser is npm's @sparticuz/chromium (its binary unpacked to the temp dir, no download)
// driven by playwright-core. The page carries no script and reloads itself with
// <meta http-equiv="refresh">; this script never reloads it: every page load the browser makes
// on its own is read back (status, the rounds table, the trainers table) and, when it differs
// from the last one, printed to stdout as one JSON line:
//   {"load": 3, "ms": 2140, "status": "TRAINING", "refresh": true, "round": "1 of 3",
//    "rounds": [{"round": 0, "finalized": true, "accepted": 4, "weights_root": "0x…", ...}],
//    "trainers": [{"index": 0, "trainer": "0x…", "accepted": 2, "credits": "…", ...}]}
// It stops after a page showing SEALED without a refresh tag ({"done": "sealed"}), or at the
// timeout ({"done": "timeout"}, exit 2). Errors go to stderr, exit 1.
// Modules resolve from the repository's node_modules, or from NODE_PATH.

import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);

/** Import an npm package by name, resolved like require() (so NODE_PATH counts). */
async function load(name) {
  return import(pathToFileURL(require.resolve(name)).href);
}

function parseArgs(argv) {
  const out = { url: null, timeoutS: 300 };
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === "--url") out.url = argv[i + 1];
    else if (argv[i] === "--timeout-s") out.timeoutS = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]} (expected --url URL [--timeout-s N])`);
  }
  if (!out.url) throw new Error("--url is required");
  if (!(out.timeoutS > 0)) throw new Error(`--timeout-s must be a positive number of seconds`);
  return out;
}

/** Runs in the page (Playwright's utility context): the figures a reader sees. */
function readPage() {
  const text = (el) => (el ? el.textContent.trim().replace(/\s+/g, " ") : null);
  const tables = [...document.querySelectorAll("table")];
  const byHeader = (label) =>
    tables.find((t) => [...t.querySelectorAll("tr:first-child th")].some((th) => text(th) === label));
  const rows = (table) => (table ? [...table.querySelectorAll("tr")].slice(1) : []);
  const cells = (tr) => [...tr.querySelectorAll("td")].map(text);
  const num = (s) => (s === null || s === "—" || s === "" ? null : Number(s));

  const rounds = rows(byHeader("held-out loss"))
    .map(cells)
    .filter((c) => c.length >= 8)
    .map((c) => ({
      round: num(c[0]),
      finalized: c[2] !== "open",
      seconds: num(c[3]),
      accepted: num(c[4]),
      quorum_met: c[5],
      weights_root: c[7],
    }));
  // the trainers' table, read by its column headers (a column added or removed does not shift
  // the others' values under the wrong names)
  const trainerTable = byHeader("credits");
  const col = trainerTable
    ? Object.fromEntries([...trainerTable.querySelectorAll("tr:first-child th")].map((th, i) => [text(th), i]))
    : {};
  const trainers = rows(trainerTable)
    .map((tr) => [...tr.querySelectorAll("td")])
    .filter((td) => td.length === Object.keys(col).length)
    .map((td) => ({
      index: num(text(td[col["#"]])),
      trainer: text(td[col["trainer"]].querySelector(".mono")),
      submitted: num(text(td[col["submitted"]])),
      accepted: num(text(td[col["accepted"]])),
      stake: text(td[col["stake"]]),
      slashed: text(td[col["slashed"]]),
      credits: text(td[col["credits"]]),
      reward: text(td[col["reward"]]),
      state: text(td[col["state"]]),
    }));
  const overview = tables[0];
  const roundRow = overview
    ? [...overview.querySelectorAll("tr")].find((tr) => text(tr.querySelector("th")) === "round")
    : null;
  return {
    title: document.title,
    status: text(document.querySelector("h1 .status")),
    refresh: document.querySelector('meta[http-equiv="refresh"]') !== null,
    round: roundRow ? text(roundRow.querySelector("td")) : null,
    rounds,
    trainers,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const chromium = (await load("@sparticuz/chromium")).default;
  const playwright = await load("playwright-core"); // CommonJS: its exports may sit on .default
  const launcher = playwright.chromium ?? playwright.default.chromium;
  const browser = await launcher.launch({
    executablePath: await chromium.executablePath(),
    args: chromium.args,
    headless: true,
  });
  const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
  const t0 = Date.now();
  try {
    const page = await browser.newPage();
    let loads = 0;
    page.on("load", () => {
      loads += 1;
    });
    const first = await page.goto(args.url, { waitUntil: "load" });
    if (!first || first.status() !== 200) {
      throw new Error(`${args.url} answered ${first ? first.status() : "nothing"}`);
    }
    let seen = 0;
    let last = "";
    const deadline = t0 + args.timeoutS * 1000;
    while (Date.now() < deadline) {
      if (loads !== seen) {
        let snap;
        try {
          snap = await page.evaluate(readPage);
        } catch (err) {
          // the page navigated (its refresh) while being read: read the next load
          await page.waitForTimeout(50);
          continue;
        }
        seen = loads;
        const key = JSON.stringify(snap);
        if (key !== last) {
          last = key;
          emit({ load: seen, ms: Date.now() - t0, ...snap });
        }
        if (snap.status === "SEALED" && !snap.refresh) {
          emit({ done: "sealed", loads: seen, ms: Date.now() - t0 });
          return 0;
        }
      }
      await page.waitForTimeout(100);
    }
    emit({ done: "timeout", loads: seen, ms: Date.now() - t0 });
    return 2;
  } finally {
    await browser.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`watch_run: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);
