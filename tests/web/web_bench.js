// tests/bench/web_bench.sh's browser half: opens each session's page RUNS
// times in a fresh tab and reads the page's own performance marks
// (web/app.js: transcript-first, transcript-loaded, history-loaded; times
// from navigation start). Prints a table of medians.
"use strict";
const puppeteer = require("puppeteer-core");

const env = process.env;
const sizes = env.WEB_SIZES.split(/\s+/).filter(Boolean).map(Number);
const runs = Number(env.WEB_RUNS || 5);
const median = (xs) => { const s = xs.slice().sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

async function timing(browser, url, mark, selector) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  await page.goto(url, { waitUntil: "domcontentloaded" });
  await page.waitForSelector(selector, { timeout: 120000 });
  const t = await page.evaluate((names) => names.map((n) => {
    const e = performance.getEntriesByName(n)[0];
    return e ? e.startTime : NaN;
  }), mark);
  await page.close();
  return t;
}

(async () => {
  const browser = await puppeteer.launch({ executablePath: env.WEB_CHROME, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"] });
  const rows = [];
  try {
    for (const n of sizes) {
      const first = [], loaded = [], hist = [];
      for (let i = 0; i < runs; i++) {
        const [f, l] = await timing(browser, `${env.WEB_URL}/#/s/ev-${n}`, ["transcript-first", "transcript-loaded"], '#panel[data-loaded="true"]');
        first.push(f);
        loaded.push(l);
        const [h] = await timing(browser, `${env.WEB_URL}/#/s/ev-${n}/history`, ["history-loaded"], '#panel[data-loaded="true"]');
        hist.push(h);
      }
      rows.push([n, median(first), median(loaded), median(hist)]);
    }
  } finally {
    await browser.close();
  }
  const fmt = (ms) => (Number.isFinite(ms) ? ms.toFixed(0) + " ms" : "n/a");
  console.log(`| events | first transcript item | transcript loaded | engine history loaded |  (median of ${runs})`);
  console.log("|---:|---:|---:|---:|");
  for (const [n, f, l, h] of rows) console.log(`| ${n.toLocaleString("en")} | ${fmt(f)} | ${fmt(l)} | ${fmt(h)} |`);
})().catch((e) => { console.error(e); process.exit(1); });
