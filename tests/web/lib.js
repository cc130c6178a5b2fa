// What the browser tests (web_test.js, web_start_test.js) share: their
// deadlines, their pass/fail lines, a selector's text and the axe-core check.
const fs = require("fs");

// Deadlines: every wait is for a state, given at least a minute, times
// TEST_TIMEOUT_SCALE (tests/integration/lib.sh): a busy machine's browser
// took longer than 5 s to draw a panel. A deadline is written within(ms).
const SCALE = Number(process.env.TEST_TIMEOUT_SCALE) > 0 ? Number(process.env.TEST_TIMEOUT_SCALE) : 1;
function within(ms) { return { timeout: Math.max(ms, 60000) * SCALE }; }

let failures = 0;
function check(what, ok, detail) {
  if (ok) console.log("ok - " + what);
  else { failures++; console.log("FAIL: " + what + (detail !== undefined ? ": " + detail : "")); }
}
// the exit status: 1 when a check failed
const exitCode = () => (failures ? 1 : 0);

const text = (page, sel) => page.$eval(sel, (el) => el.textContent).catch(() => "");

const axeSource = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
// no WCAG A/AA violation on the page as it is, in the light and the dark scheme
async function axe(page, what) {
  await page.evaluate(axeSource); // through the DevTools protocol: the page's CSP stays in force for the page
  for (const scheme of ["light", "dark"]) {
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: scheme }]);
    const r = await page.evaluate((tags) => window.axe.run(document, { runOnly: { type: "tag", values: tags } }), AXE_TAGS);
    check(`axe-core: no WCAG A/AA violation on ${what} (${scheme})`, r.violations.length === 0,
      JSON.stringify(r.violations.map((v) => ({ id: v.id, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }))));
  }
  await page.emulateMediaFeatures([]);
}

module.exports = { within, check, exitCode, text, axe };
