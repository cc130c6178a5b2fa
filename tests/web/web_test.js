// The web page in a real browser (Debian's chromium, headless, driven by
// puppeteer-core), against the `engine serve` that tests/integration/test_web.sh
// started. Prints "ok - ..." / "FAIL: ..." lines; exits 1 when a check failed.
//
// Environment: WEB_URL (the server), WEB_ADMIN and WEB_VIEWER (tokens: admin,
// read only), WEB_INPUT (the session's input), WEB_OUT (screenshots),
// WEB_CHROME (the browser), WEB_TREE (a delegating session), WEB_FORK_SRC (a
// hello.lua waiting for its approval: forked here), WEB_EVAL (an eval run).
"use strict";
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");
const { within, check, exitCode, text, axe } = require("./lib");

const env = process.env;
const base = env.WEB_URL;
const ID = "web-1";

const consoleErrors = [], foreign = [];
let tolerate = null; // a console error expected now (a refused request the test makes on purpose)

async function newPage(ctx, label) {
  const page = await ctx.newPage();
  page.setDefaultTimeout(within(60000).timeout); // goto and the waits without their own
  await page.setViewport({ width: 1200, height: 900 });
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const t = m.text();
    if (tolerate && tolerate.test(t)) return;
    consoleErrors.push(label + ": " + t);
  });
  page.on("pageerror", (e) => consoleErrors.push(label + ": " + e.message));
  page.on("request", (r) => {
    const u = r.url();
    if (!(u === base || u.startsWith(base + "/") || u.startsWith("data:") || u.startsWith("blob:"))) foreign.push(u);
  });
  return page;
}

async function signIn(page, token, hash) {
  await page.goto(base + "/" + (hash || ""), { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#token", within(10000));
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.getElementById("who").textContent.length > 0, within(10000));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// opens a gate of the model server (WEB_MODEL): the stream held there goes on
async function release(gate) {
  const r = await fetch(env.WEB_MODEL + "/_release?gate=" + gate, { method: "POST" });
  check(`the model server opened gate ${gate}`, r.ok, String(r.status));
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: env.WEB_CHROME, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"],
  });
  try {
    const downloads = path.join(env.WEB_OUT, "downloads");
    fs.rmSync(downloads, { recursive: true, force: true });
    fs.mkdirSync(downloads, { recursive: true });
    const adminCtx = await browser.createBrowserContext({ downloadBehavior: { policy: "allow", downloadPath: downloads } });
    const page = await newPage(adminCtx, "admin");
    await signIn(page, env.WEB_ADMIN);
    await page.waitForSelector("table.sessions tbody", within(10000));
    check("the token is kept in sessionStorage, not in a cookie or the URL",
      await page.evaluate((t) => sessionStorage.getItem("engine.token") === t && !document.cookie && !location.href.includes(t), env.WEB_ADMIN));
    check("the page shows who the token is", (await text(page, "#who")).includes("token:alice"));

    // the session starts while the list is open: the list shows it live
    const res = await fetch(base + "/v1/workflows", {
      method: "POST", headers: { Authorization: "Bearer " + env.WEB_ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ script: "agent_session.lua", id: ID, input: JSON.parse(env.WEB_INPUT) }),
    });
    check("the session started (201)", res.status === 201, res.status + " " + (await res.text()));
    await page.waitForSelector(`tr[data-id="${ID}"]`, within(15000)).catch(() => null);
    check("the list shows the started session, live", !!(await page.$(`tr[data-id="${ID}"]`)));
    check("with its objective as text", (await text(page, `tr[data-id="${ID}"] td.objective`)).includes("<b>code</b>"));

    // keyboard: the session's link, then Enter. (The live list may draw the
    // row again between the focus and the key, and the key then goes to the
    // page: the two are tried again until the panel shows, up to a deadline.)
    const panelBy = Date.now() + within(60000).timeout;
    while (!(await page.$("#panel")) && Date.now() < panelBy) {
      await page.focus(`tr[data-id="${ID}"] a`).catch(() => null);
      await page.keyboard.press("Enter");
      await page.waitForSelector("#panel", { timeout: 2000 }).catch(() => null);
    }
    check("Enter on the session's link opens it", !!(await page.$("#panel")));

    // the model's words as they are written: the model server holds the turn
    // until the page reads the session's stream (gate w0: the words are not
    // kept for a page that comes later), then after 6 events (gate w1) and
    // after 12 (gate w2) until the test opens each, so the page is seen
    // mid-stream however slow the machine
    const liveLonger = (n) => page.waitForFunction((n) => {
      const t = document.querySelector(".ev.live .text");
      return t && t.textContent.length > n;
    }, within(60000), n).catch(() => null);
    const hasMessage = async () => !!(await page.$('li[data-type="agent.message"]'));
    await page.waitForSelector("#panel li[data-type]", within(60000)).catch(() => null);
    await release("w0"); // (whatever the page showed: the session goes on, so one failure does not hide the rest)
    await liveLonger(5);
    const first = await text(page, ".ev.live .text");
    const whyStreaming = await text(page, "#why");
    const messageBefore = await hasMessage();
    await release("w1");
    await liveLonger(first.length);
    const second = await text(page, ".ev.live .text");
    check("agent.delta text shows while the model writes", first.length > 5 && !messageBefore, `${first.length} chars, message already: ${messageBefore}`);
    check("and grows as it streams", second.length > first.length && !(await hasMessage()), `${first.length} then ${second.length}`);
    // while it streams (held at w2), the header says what it waits on: the model call, for how long, which attempt
    const why2 = await text(page, "#why");
    await release("w2");
    check("while it streams, the header says a model call is in flight, for how long and its attempt",
      /^model call in flight for \d+ s, attempt \d/.test(whyStreaming) || /^model call in flight for \d+ s, attempt \d/.test(why2),
      whyStreaming + " / " + why2);
    check("the admin has signal and cancel", !!(await page.$("#sig-name")) && !!(await page.$("button.deny")));
    const box1 = await page.$eval("#panel", (el) => el.getBoundingClientRect().top);

    await page.waitForSelector('li[data-type="approval.requested"]', within(60000)).catch(() => null);
    check("the approval request is in the transcript", !!(await page.$('li[data-type="approval.requested"]')));
    const box2 = await page.$eval("#panel", (el) => el.getBoundingClientRect().top);
    check("no layout shift above the transcript while it streams", Math.abs(box2 - box1) < 1, `${box1} -> ${box2}`);
    await page.waitForFunction(() => /waiting for approval of \S+ since/.test(document.getElementById("why").textContent), within(10000)).catch(() => null);
    check("the header says why it waits", /^waiting for approval of (shell|publish_review) since \d/.test(await text(page, "#why")), await text(page, "#why"));
    // the page is painted again every few seconds while the session is live:
    // what is being typed into the signal form stays
    await page.type("#sig-name", "half-typed");
    const repainted = (r) => /\/v1\/workflows\/[^/?]+$/.test(r.url()) && r.request().method() === "GET";
    await page.waitForResponse(repainted, within(30000)).catch(() => null);
    await page.waitForResponse(repainted, within(30000)).catch(() => null);
    check("what is typed into the signal form survives the page's repaints",
      (await page.$eval("#sig-name", (el) => el.value).catch(() => "")) === "half-typed");
    check("the shell command is highlighted", (await text(page, 'li[data-type="approval.requested"] code.cmd')) === "echo hello > /workspace/output/note.txt");
    const msg = await text(page, 'li[data-type="agent.message"] .text');
    check("hostile markup from the model is shown as text", msg.includes('<img src=x onerror="window.__pwned=1">') && msg.includes("javascript:"), msg.slice(0, 120));
    check("and runs nothing: no img, script or javascript: link made, nothing set",
      await page.evaluate(() => !document.querySelector("main img, main script, a[href^='javascript']") && window.__pwned === undefined));
    await page.screenshot({ path: path.join(env.WEB_OUT, "session-waiting.png") });

    // a token without approve: sees the request, no button; a forged answer is 403
    const viewCtx = await browser.createBrowserContext();
    const viewer = await newPage(viewCtx, "viewer");
    await viewer.emulateTimezone("Asia/Kolkata"); // UTC+5:30: the page's times must follow the viewer's zone
    await signIn(viewer, env.WEB_VIEWER, "#/approvals");
    await viewer.waitForSelector(".approval-card", within(10000)).catch(() => null);
    check("the viewer's inbox shows the pending request", !!(await viewer.$(".approval-card")));
    check("but no approve or deny button", !(await viewer.$("button.approve, button.deny")));
    await viewer.goto(base + "/#/s/" + ID);
    await viewer.waitForSelector('li[data-type="approval.requested"]', within(10000)).catch(() => null);
    {
      const seen = !!(await viewer.$('li[data-type="approval.requested"]'));
      const forbidden = await viewer.$$eval("button.approve, button.deny, #sig-name", (els) => els.map((e) => e.outerHTML.slice(0, 120)));
      check("nor on the session page, nor signal or cancel", seen && forbidden.length === 0,
        seen ? "shown: " + forbidden.join(" | ") : "the request is not in the transcript");
    }
    const shown = await viewer.$eval('li[data-seq="1"] time', (t) => ({ iso: t.getAttribute("datetime"), text: t.textContent }));
    const want = new Intl.DateTimeFormat(await viewer.evaluate(() => navigator.language),
      { timeZone: "Asia/Kolkata", dateStyle: "short", timeStyle: "medium" }).format(new Date(shown.iso));
    check("times are in the viewer's time zone", shown.text === want, `${shown.iso} shown as ${shown.text}, want ${want}`);
    await viewer.goto(base + "/#/approvals");
    await viewer.waitForSelector(".approval-card", within(10000)).catch(() => null);
    tolerate = /403/;
    const forged = await viewer.evaluate(async (id, token) => {
      const a = await (await fetch("/v1/approvals", { headers: { Authorization: "Bearer " + token } })).json();
      const rid = a.approvals[0].request_id;
      const r = await fetch(`/v1/workflows/${id}/approvals/${encodeURIComponent(rid)}`, {
        method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
        body: JSON.stringify({ approved: true, reason: "forged" }) });
      return r.status;
    }, ID, env.WEB_VIEWER);
    await sleep(200);
    tolerate = null;
    check("a forged approval with the read-only token is 403", forged === 403, String(forged));

    // the inbox: the exact call, the policy's reason, approve with a reason
    await page.goto(base + "/#/approvals");
    await page.waitForFunction(() => document.querySelectorAll(".approval-card button.approve").length === 2, within(10000)).catch(() => null);
    const cards = await page.$$eval(".approval-card", (cs) => cs.map((c) => c.dataset.key));
    check("the inbox shows both requests of the turn", cards.length === 2, JSON.stringify(cards));
    const shellSel = ".approval-card:has(code.cmd)", pubSel = ".approval-card:has(.draft)";
    check("the inbox shows the shell command", (await text(page, shellSel + " code.cmd")) === "echo hello > /workspace/output/note.txt");
    check("and the policy's reason", (await text(page, shellSel + " .reason")).includes("requires approval for 'shell'"));
    check("and the arguments pretty-printed", (await text(page, shellSel + " pre")).includes('\n  "command"'));
    const draft = await text(page, pubSel + " .draft");
    check("a publish shows the review it would publish: its findings with file and line",
      draft.includes("Review to publish") && draft.includes("src/bucket.py") && draft.includes("42") && draft.includes("<img src=x"), draft);
    check("and the publishing policy's reason", (await text(page, pubSel + " .reason")).includes("publishes outside the session"));
    check("a finding's markup in the inbox stays text", await page.evaluate(() => !document.querySelector("main img") && window.__pwned === undefined));
    await axe(page, "the approvals inbox");
    await page.screenshot({ path: path.join(env.WEB_OUT, "inbox.png"), fullPage: true });
    await page.type(shellSel + " input", "typed in the browser");
    await page.click(shellSel + " button.approve");
    const t0 = Date.now();
    await page.waitForFunction(() => document.querySelectorAll(".approval-card").length === 1, within(10000)).catch(() => null);
    check("the answered request leaves the approver's inbox", (await page.$$(".approval-card")).length === 1 && !(await page.$(shellSel)));
    await viewer.waitForFunction(() => document.querySelectorAll(".approval-card").length === 1, within(5000)).catch(() => null);
    const gone = Date.now() - t0;
    check(`and every other open inbox at once (${gone} ms)`, (await viewer.$$(".approval-card")).length === 1 && !(await viewer.$(shellSel)) && gone < 5000);
    await page.type(pubSel + " input", "typed in the browser");
    await page.click(pubSel + " button.approve");
    await page.waitForFunction(() => !document.querySelector(".approval-card"), within(10000)).catch(() => null);
    check("the publish approved too: the inbox is empty", !(await page.$(".approval-card")));

    // the session completes: who decided and why, the findings, the artifacts
    await page.goto(base + "/#/s/" + ID);
    await page.waitForSelector('#panel[data-ended="completed"]', within(90000)).catch(() => null);
    check("the session completes", !!(await page.$('#panel[data-ended="completed"]')), await text(page, "#why"));
    await page.waitForSelector("table.findings", within(10000)).catch(() => null);
    const decided = await text(page, 'li[data-type="approval.decided"]');
    check("the transcript says who approved, and why", decided.includes("Approved by token:alice") && decided.includes("typed in the browser"), decided);
    check("no approve button for a decided request", !(await page.$('li[data-type="approval.requested"] button.approve')));
    // each kind drawn for a person (web/event_kinds.json), its JSON one click away:
    // what the screenshot shows is the panel's rendered text (innerText skips
    // what a closed expander holds)
    await page.screenshot({ path: path.join(env.WEB_OUT, "session-kinds.png"), fullPage: true });
    const seen = await page.evaluate(() => {
      const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
      const jsonBlocks = [...document.querySelectorAll("#panel pre")].filter(shown)
        .filter((p) => /^\s*[[{]/.test(p.textContent)).map((p) => p.textContent.slice(0, 80));
      const inner = (sel) => { const e = document.querySelector(sel); return e ? e.innerText : ""; };
      return {
        jsonBlocks, sandbox: inner('li[data-type="sandbox.ready"]'),
        shell: inner('li[data-type="tool.requested"] code.cmd'),
        review: !!document.querySelector('li[data-type="tool.requested"] table.findings'),
        final: inner('li[data-type="agent.message"]:last-of-type'),
        finalTable: [...document.querySelectorAll('li[data-type="agent.message"]')].some((li) => li.querySelector("table.findings")),
        jsonLines: document.getElementById("panel").innerText.split("\n").filter((l) => /^\s*[[{]\s*"/.test(l)).slice(0, 3),
      };
    });
    check("no JSON block on the page unless expanded", seen.jsonBlocks.length === 0, JSON.stringify(seen.jsonBlocks));
    check("no line of the page's text is raw JSON", seen.jsonLines.length === 0, JSON.stringify(seen.jsonLines));
    check("sandbox.ready is one line", /^sandbox ready: \S+/m.test(seen.sandbox) && !seen.sandbox.includes("{"), seen.sandbox);
    check("a shell call shows its command", seen.shell.includes("echo hello > /workspace/output/note.txt"), seen.shell);
    check("publish_review's call shows its findings as a table", seen.review);
    check("the model's final answer shows as its outcome (summary, findings table)", seen.finalTable, seen.final.slice(0, 200));
    const exp = 'li[data-type="tool.requested"] details.json';
    await page.click(exp + " > summary");
    const opened = await page.$eval(exp + " pre", (p) => p.getClientRects().length > 0 && p.textContent).catch(() => "");
    let parsed = null;
    try { parsed = JSON.parse(opened); } catch (e) { parsed = null; }
    check("a tool call's JSON is one click away", parsed !== null && typeof parsed === "object", String(opened).slice(0, 120));
    const findings = await text(page, "table.findings tbody");
    check("the findings as a table with file and line", findings.includes("src/bucket.py") && findings.includes("42"), findings);
    check("a finding's markup stays text", findings.includes("<script>") && !(await page.$("main script")) &&
      (await page.evaluate(() => window.__pwned === undefined)));
    await page.waitForSelector("table.artifacts", within(10000)).catch(() => null);
    const arts = await text(page, "table.artifacts");
    check("the artifacts listed with size and hash", /note\.txt/.test(arts) && /6 B/.test(arts), arts);
    // the download button: the bytes of the artifact, fetched with the token
    await page.click("table.artifacts button");
    let got = "";
    for (let i = 0; i < 50 && !got; i++) {
      await sleep(100);
      try { got = fs.readFileSync(path.join(downloads, "note.txt"), "utf8"); } catch (e) { got = ""; }
    }
    check("the artifact downloads from the page", got === "hello\n", JSON.stringify(got));
    // the signed audit export (test_web.sh checks it with engine audit verify)
    await page.click("#audit-export");
    let audit = "";
    for (let i = 0; i < 100 && !audit.endsWith("}\n"); i++) {
      await sleep(100);
      try { audit = fs.readFileSync(path.join(downloads, "web-1.audit.jsonl"), "utf8"); } catch (e) { audit = ""; }
    }
    check("the audit export downloads from the page", audit.includes('"format":"engine-audit/1"') && audit.includes('"kind":"seal"'),
      audit.slice(0, 120));
    check("the header says it completed", /^completed at/.test(await text(page, "#why")), await text(page, "#why"));
    await axe(page, "the session page");
    await page.screenshot({ path: path.join(env.WEB_OUT, "session.png"), fullPage: true });

    // the engine's history tab, by keyboard
    await page.focus("#tab-history");
    await page.keyboard.press("Enter");
    await page.waitForSelector('#panel[data-loaded="true"] .history .row', within(10000)).catch(() => null);
    check("the engine's history opens in its tab", (await page.$$(".history .row")).length > 5);

    // a stuck workflow says why: the event and the script line
    await page.goto(base + "/#/s/nd");
    await page.waitForFunction(() => /^stuck/.test(document.getElementById("why").textContent), within(10000)).catch(() => null);
    const stuck = await text(page, "#why");
    check("a stuck workflow's header names the event and the script line",
      /non-determinism at event #2/.test(stuck) && /nondet\.lua:5/.test(stuck), stuck);

    // the list once it ended: its numbers in the row
    await page.goto(base + "/#/");
    await page.waitForSelector(`tr[data-id="${ID}"]`, within(10000)).catch(() => null);
    const row = await text(page, `tr[data-id="${ID}"]`);
    check("the list's row has the session's numbers (turns, tool calls, tokens)", /completed/.test(row) && /180/.test(row), row);
    await page.screenshot({ path: path.join(env.WEB_OUT, "sessions.png") });

    // ---- a tree of sessions (WEB_TREE: test_web.sh started it and waited for
    // its end): a parent that delegated two sub-reviews in one turn
    const TREE = env.WEB_TREE;
    if (TREE) {
      const parent = await (await fetch(base + "/v1/workflows/" + TREE, { headers: { Authorization: "Bearer " + env.WEB_ADMIN } })).json();
      const kids = (parent.children || []).map((c) => c.id);
      check("the parent has two sub-sessions", kids.length === 2, JSON.stringify(kids));
      await page.goto(base + "/#/s/" + TREE);
      await page.waitForFunction((n) => document.querySelectorAll('#panel li[data-type="delegation"][data-status="completed"]').length === n &&
        document.getElementById("panel").hasAttribute("data-ended") && document.getElementById("tree-total"), within(60000), kids.length).catch(() => null);
      const items = await page.$$eval('#panel li[data-type="delegation"]', (ls) => ls.map((li) => {
        const a = li.querySelector("a.open-child");
        const spend = li.querySelector(".deleg-spend");
        return { child: li.dataset.child, status: li.dataset.status, href: a ? a.getAttribute("href") : "", text: li.textContent,
          spend: spend ? spend.textContent : "" };
      }));
      check("each delegation is one item of the parent's transcript, naming its sub-session",
        items.length === 2 && items.map((i) => i.child).join(" ") === kids.join(" ") &&
        items.every((i, k) => i.href === "#/s/" + kids[k] && i.status === "completed"), JSON.stringify(items));
      check("with its objective and its spend", /Review part A/.test(items[0] && items[0].text) && /Review part B/.test(items[1] && items[1].text) &&
        /^1\D?100 tokens · 1 turn · 0 tool calls/.test(items[0] && items[0].spend) && /^2\D?200 tokens/.test(items[1] && items[1].spend),
        JSON.stringify(items.map((i) => i.spend)));
      const apart = await page.evaluate(() => document.querySelectorAll('#panel li[data-type^="delegation."]').length +
        [...document.querySelectorAll('#panel li[data-type^="tool."] .kind')].filter((k) => /delegate/.test(k.textContent)).length);
      check("its events (the call, started, ended, the result) are not items of their own", apart === 0, String(apart));
      const total = await page.$eval("#tree-total", (p) => ({ sessions: p.dataset.sessions, tokens: p.dataset.tokens, text: p.textContent })).catch(() => ({}));
      check("the tree's totals: three sessions, each one's own spend once (the API's tree)",
        parent.tree && parent.tree.tokens === 3340 && total.sessions === "3" && total.tokens === String(parent.tree.tokens) &&
        total.text.includes("$" + parent.tree.cost_usd.toFixed(4)), JSON.stringify({ tree: parent.tree, shown: total }));
      check("its sub-sessions listed with their status", (await page.$$("#tree ul.children li")).length === 2);
      const meta = await text(page, ".meta");
      check("the header has the session's tokens and cost (its result's), and no part left out shows as null",
        /3\D?340 tokens · \$0\.3340/.test(meta) && !/\bnull\b/.test(meta), meta);
      await axe(page, "a delegating session's page");
      await page.screenshot({ path: path.join(env.WEB_OUT, "tree-parent.png"), fullPage: true });

      // a click on the item (on its text, not its link) opens the sub-session
      const sidIs = (id) => page.waitForFunction((id) => {
        const s = document.querySelector("h1 .sid");
        return s && s.textContent === id && document.getElementById("why").textContent !== "…";
      }, within(30000), id).catch(() => null);
      await page.click(`#panel li[data-type="delegation"][data-child="${kids[0]}"] p.text`);
      await sidIs(kids[0]);
      check("a click on the delegation opens its sub-session", (await page.evaluate(() => location.hash)) === "#/s/" + kids[0] &&
        (await text(page, "h1 .sid")) === kids[0], await page.evaluate(() => location.hash));
      await page.waitForSelector("#parent-link a", within(30000)).catch(() => null);
      const back = await page.$eval("#parent-link a", (a) => ({ text: a.textContent, href: a.getAttribute("href") })).catch(() => ({}));
      check("the sub-session names its parent, with a link", back.text === TREE && back.href === "#/s/" + TREE, JSON.stringify(back));
      await axe(page, "a sub-session's page");
      await page.screenshot({ path: path.join(env.WEB_OUT, "tree-child.png"), fullPage: true });
      await page.click("#parent-link a");
      await sidIs(TREE);
      check("which leads back to the parent", (await text(page, "h1 .sid")) === TREE);
      // by keyboard: the item's link, then Enter
      const link = `#panel li[data-type="delegation"] a.open-child[href="#/s/${kids[1]}"]`;
      await page.waitForSelector(link, within(30000)).catch(() => null);
      await page.focus(link).catch(() => null);
      await page.keyboard.press("Enter");
      await sidIs(kids[1]);
      check("Enter on a delegation's link opens the other sub-session", (await text(page, "h1 .sid")) === kids[1]);

      // the list: the sub-sessions right under their parent, marked
      await page.goto(base + "/#/");
      await page.waitForSelector(`tr[data-id="${kids[1]}"]`, within(30000)).catch(() => null);
      const rows = await page.$$eval("table.sessions tbody tr", (trs) => trs.map((tr) => ({ id: tr.dataset.id, cls: tr.className })));
      const at = rows.findIndex((r) => r.id === TREE);
      check("the list puts the sub-sessions right under their parent, indented",
        at >= 0 && rows.slice(at + 1, at + 3).map((r) => r.id).join(" ") === kids.join(" ") &&
        rows.slice(at + 1, at + 3).every((r) => /\bchild\b/.test(r.cls) && /\bdepth-1\b/.test(r.cls)), JSON.stringify(rows.slice(Math.max(0, at), at + 3)));
      await axe(page, "the sessions list with a tree");
      await page.screenshot({ path: path.join(env.WEB_OUT, "sessions-tree.png") });
    }

    // ---- "Fork from here" (WEB_FORK_SRC: a hello.lua waiting for its
    // approval), a fork's source and its forks
    const SRCWF = env.WEB_FORK_SRC;
    if (SRCWF) {
      const hdr = { Authorization: "Bearer " + env.WEB_ADMIN };
      const srcEvents = async () => (await (await fetch(base + "/v1/workflows/" + SRCWF + "/events?after=0", { headers: hdr })).json()).events;
      const before = await srcEvents();
      const point = before.find((e) => e.type === "approval.requested");
      check("the fork's source waits at its approval", !!point, JSON.stringify(before.map((e) => e.type)));
      await page.goto(base + "/#/s/" + SRCWF);
      const item = `#panel li[data-type="approval.requested"]`;
      await page.waitForSelector(item + " button.fork-here", within(30000)).catch(() => null);
      check("a transcript item has \"Fork from here\"", !!(await page.$(item + " button.fork-here")));
      check("the read-only token has none", !(await viewer.goto(base + "/#/s/" + SRCWF).then(() =>
        viewer.waitForSelector("#panel li[data-type]", within(30000))).then(() => viewer.$("button.fork-here")).catch(() => null)));
      await page.click(item + " button.fork-here");
      await page.waitForSelector(item + " form.fork-form", within(10000)).catch(() => null);
      check("it opens a form at the item, with the input patch and the model as fields",
        !!(await page.$(item + " form.fork-form textarea[id^=fork-patch]")) && !!(await page.$(item + " form.fork-form textarea[id^=fork-model]")));
      await axe(page, "the fork form");
      // a patch that is not JSON: said so, nothing sent
      await page.type(item + " form.fork-form input[id^=fork-id]", "fk-web");
      await page.type(item + " form.fork-form textarea[id^=fork-patch]", "{approval_timeout: 1");
      await page.click(item + " form.fork-form button[type=submit]");
      await page.waitForFunction((s) => /not JSON/.test((document.querySelector(s + " .fork-out") || {}).textContent || ""), within(10000), item).catch(() => null);
      check("an input patch that is not JSON is named, and nothing is forked", /^the input patch is not JSON/.test(await text(page, item + " .fork-out")) &&
        (await fetch(base + "/v1/workflows/fk-web", { headers: hdr })).status === 404, await text(page, item + " .fork-out"));
      await page.$eval(item + " form.fork-form textarea[id^=fork-patch]", (t) => { t.value = ""; });
      await page.type(item + " form.fork-form textarea[id^=fork-patch]", '{"approval_timeout": 1}');
      await page.screenshot({ path: path.join(env.WEB_OUT, "fork-form.png"), fullPage: true });
      await page.click(item + " form.fork-form button[type=submit]");
      const sidIs2 = (id) => page.waitForFunction((id) => {
        const s = document.querySelector("h1 .sid");
        return s && s.textContent === id && document.getElementById("why").textContent !== "…";
      }, within(30000), id).catch(() => null);
      await sidIs2("fk-web");
      check("the fork is made and opened", (await page.evaluate(() => location.hash)) === "#/s/fk-web", await page.evaluate(() => location.hash));
      await page.waitForSelector("#fork-link a", within(30000)).catch(() => null);
      const from = await page.$eval("#fork-link", (s) => ({ text: s.textContent, href: s.querySelector("a").getAttribute("href") })).catch(() => ({}));
      check("the fork names its parent, where and who forked it, with a link",
        from.href === "#/s/" + SRCWF && from.text === `forked from ${SRCWF} at #${point.seq} by token:alice`, JSON.stringify(from));
      const fj = await (await fetch(base + "/v1/workflows/fk-web", { headers: hdr })).json();
      check("the API's fork: at the item's event, the patch applied, made by the browser's token",
        fj.forked_from && fj.forked_from.id === SRCWF && fj.forked_from.seq === point.seq && fj.forked_from.by === "token:alice" &&
        fj.input && fj.input.approval_timeout === 1, JSON.stringify({ forked_from: fj.forked_from, input: fj.input }));
      await page.waitForSelector('#panel[data-ended="completed"]', within(60000)).catch(() => null);
      check("the fork runs on (its approval times out as patched)", !!(await page.$('#panel[data-ended="completed"]')), await text(page, "#why"));
      const prefix = await (await fetch(base + "/v1/workflows/fk-web/events?after=0", { headers: hdr })).json();
      check("its events up to the point are the source's",
        JSON.stringify(prefix.events.slice(0, point.seq).map((e) => [e.seq, e.type, e.payload])) ===
        JSON.stringify(before.slice(0, point.seq).map((e) => [e.seq, e.type, e.payload])));
      await axe(page, "a fork's page");
      await page.screenshot({ path: path.join(env.WEB_OUT, "fork.png"), fullPage: true });
      await page.click("#fork-link a");
      await sidIs2(SRCWF);
      await page.waitForSelector(`#forks li[data-id="fk-web"] a`, within(30000)).catch(() => null);
      const kids = await page.$$eval("#forks li", (ls) => ls.map((li) => ({ id: li.dataset.id, text: li.textContent,
        href: li.querySelector("a").getAttribute("href") }))).catch(() => []);
      check("the source lists its forks, each a link with its status, point and who",
        kids.length === 1 && kids[0].href === "#/s/fk-web" && /completed/.test(kids[0].text) &&
        kids[0].text.includes(`at #${point.seq} by token:alice`), JSON.stringify(kids));
      check("the source is unchanged", JSON.stringify(await srcEvents()) === JSON.stringify(before));
      // the same id again with another request: the API's refusal, shown
      await page.waitForSelector(item + " button.fork-here", within(30000)).catch(() => null);
      await page.click(item + " button.fork-here");
      await page.waitForSelector(item + " form.fork-form", within(10000)).catch(() => null);
      await page.type(item + " form.fork-form input[id^=fork-id]", "fk-web");
      tolerate = /409/;
      await page.click(item + " form.fork-form button[type=submit]");
      await page.waitForFunction((s) => /not forked/.test((document.querySelector(s + " .fork-out") || {}).textContent || ""), within(10000), item).catch(() => null);
      tolerate = null;
      const refused = await text(page, item + " .fork-out");
      check("a fork the API refuses says why, and stays on the source", /^not forked: .*fk-web/.test(refused) &&
        (await page.evaluate(() => location.hash)) === "#/s/" + SRCWF, refused);
      // the list: the fork's row names its source
      await page.goto(base + "/#/");
      await page.waitForSelector('tr[data-id="fk-web"]', within(30000)).catch(() => null);
      const frow = await page.$eval('tr[data-id="fk-web"] td.sid-cell', (td) => ({ text: td.textContent,
        href: (td.querySelector(".parent-note a") || { getAttribute: () => "" }).getAttribute("href") })).catch(() => ({}));
      check("the list marks a fork with its source", frow.text === `fk-web fork of ${SRCWF}` && frow.href === "#/s/" + SRCWF, JSON.stringify(frow));
    }

    // ---- an eval run (WEB_EVAL: test_web.sh ran it): its cases as a table
    // linking to each case's session
    const EVAL = env.WEB_EVAL;
    if (EVAL) {
      const ev = await (await fetch(base + "/v1/workflows/" + EVAL, { headers: { Authorization: "Bearer " + env.WEB_ADMIN } })).json();
      const cases = ((ev.result || {}).cases || []);
      await page.goto(base + "/#/s/" + EVAL);
      await page.waitForSelector("table.eval-cases tbody tr", within(30000)).catch(() => null);
      const rows = await page.$$eval("table.eval-cases tbody tr", (trs) => trs.map((tr) => ({ case: tr.dataset.case,
        cells: [...tr.children].map((c) => c.textContent), href: (tr.querySelector("a") || { getAttribute: () => "" }).getAttribute("href") })));
      check("an eval run shows a table of its cases", rows.length === cases.length && cases.length === 2 &&
        rows.every((r, i) => r.case === cases[i].case), JSON.stringify(rows));
      check("each case links to its session", rows.every((r, i) => r.href === "#/s/" + cases[i].session), JSON.stringify(rows.map((r) => r.href)));
      const heads = await page.$$eval("table.eval-cases thead th", (ths) => ths.map((t) => t.textContent));
      check("with a column per scorer, its result per case, and the outcome, turns, tokens, cost and PASS/FAIL",
        ev.result.scorers.every((s) => heads.includes(s)) && rows.every((r, i) => r.cells.includes(cases[i].outcome) &&
          r.cells.includes(String(cases[i].turns)) && r.cells[r.cells.length - 1] === (cases[i].pass ? "PASS" : "FAIL") &&
          r.cells[2 + ev.result.scorers.indexOf("outcome")] === "ok"), JSON.stringify({ heads, rows }));
      const foot = await text(page, "table.eval-cases tfoot");
      check("and the totals", foot.includes(ev.result.totals.passed + "/" + ev.result.totals.cases), foot);
      await axe(page, "an eval run's page");
      await page.screenshot({ path: path.join(env.WEB_OUT, "eval.png"), fullPage: true });
      await page.click(`table.eval-cases tbody tr[data-case="${cases[0].case}"] a`);
      await page.waitForFunction((id) => {
        const s = document.querySelector("h1 .sid");
        return s && s.textContent === id;
      }, within(30000), cases[0].session).catch(() => null);
      check("a case's link opens its session", (await text(page, "h1 .sid")) === cases[0].session);
      await page.waitForSelector("#parent-link a", within(30000)).catch(() => null);
      check("which names the eval run as its parent", (await text(page, "#parent-link a")) === EVAL);
    }

    // a phone's width: nothing wider than the screen
    await page.setViewport({ width: 375, height: 800 });
    for (const hash of ["#/", "#/approvals", "#/s/" + ID].concat(TREE ? ["#/s/" + TREE] : [], env.WEB_EVAL ? ["#/s/" + env.WEB_EVAL] : [])) {
      await page.goto(base + "/" + hash);
      await sleep(600);
      const w = await page.evaluate(() => document.documentElement.scrollWidth);
      check(`readable at 375 px: ${hash} has no sideways scroll`, w <= 376, String(w));
    }
    await page.screenshot({ path: path.join(env.WEB_OUT, "session-phone.png") });

    check("no console error on any page", consoleErrors.length === 0, JSON.stringify(consoleErrors.slice(0, 5)));
    check("no request to another origin", foreign.length === 0, JSON.stringify(foreign.slice(0, 5)));
    console.log("# screenshots in " + env.WEB_OUT + ": sessions.png, session-waiting.png, inbox.png, session.png, session-kinds.png, session-phone.png" +
      (TREE ? ", tree-parent.png, tree-child.png, sessions-tree.png" : ""));
  } finally {
    await browser.close();
  }
  process.exit(exitCode());
})().catch((e) => { console.log("FAIL: " + (e && e.stack || e)); process.exit(1); });
