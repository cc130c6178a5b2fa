// The start form and a session's message form in a real browser (Debian's
// chromium, headless, puppeteer-core), against the `engine serve` that
// tests/integration/test_web_start.sh started. Prints "ok - ..." / "FAIL: ..."
// lines; exits 1 when a check failed.
//
// Environment: WEB_URL, WEB_ADMIN (an admin token), WEB_MODEL (the local
// model server's base URL), WEB_ID (the id the form starts), WEB_CHAT_ID (the
// chat's), WEB_OUT
// (screenshots), WEB_CHROME.
"use strict";
const path = require("path");
const puppeteer = require("puppeteer-core");
const { within, check, exitCode, text, axe } = require("./lib");

const env = process.env;
const base = env.WEB_URL;
const consoleErrors = [];
let tolerate = null;

async function setField(page, sel, value) {
  await page.$eval(sel, (el) => { el.value = ""; });
  await page.type(sel, value);
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: env.WEB_CHROME, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"],
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(within(60000).timeout);
    await page.setViewport({ width: 1200, height: 900 });
    page.on("console", (m) => { if (m.type() === "error" && !(tolerate && tolerate.test(m.text()))) consoleErrors.push(m.text()); });
    page.on("pageerror", (e) => consoleErrors.push(e.message));
    await page.goto(base + "/#/start", { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#token");
    await page.type("#token", env.WEB_ADMIN);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#start-script option[value='agent_session.lua']");
    check("the nav shows Start for a token with the start scope", await page.$eval("#nav-start", (a) => !a.hidden));
    const opts = await page.$$eval("#start-script option", (os) => os.map((o) => o.value));
    check("the scripts of the server's workflows directory are offered", opts.includes("pr_review.lua") && opts.includes("hello.lua"), opts.join(" "));

    // the PR review's form: generated from workflows/pr_review.input.schema.json
    await page.select("#start-script", "pr_review.lua");
    await page.waitForSelector("#in-pr_2erepo");
    check("a nested object is a fieldset of its fields", !!(await page.$("fieldset.group #in-pr_2enumber")));
    check("an array of strings is a textarea, one per line, its default filled",
      (await page.$eval("#in-tools", (t) => t.tagName + "|" + t.value)) === "TEXTAREA|read_file\nlist_files\nsearch");
    check("a boolean's default is pre-selected", (await page.$eval("#in-supersede", (s) => s.value)) === "true");
    check("descriptions are the fields' help", (await text(page, "#in-github_api-help")).includes("GitHub API's base URL"));
    check("required fields are marked", (await text(page, "label[for='in-pr_2erepo']")).includes("required"));
    await page.click("#start-go");
    await page.waitForFunction(() => document.getElementById("start-problems").textContent.length > 0);
    check("a missing required field: the schema's own words", (await text(page, "#in-pr_2erepo-err")) === "pr.repo is missing (owner/name)",
      await text(page, "#start-problems"));
    check("beside the field, which is marked invalid", await page.$eval("#in-pr_2erepo", (i) => i.getAttribute("aria-invalid") === "true"));
    await page.type("#in-pr_2erepo", "not a repo");
    await page.type("#in-pr_2enumber", "2");
    await page.click("#start-go");
    await page.waitForFunction(() => document.getElementById("in-pr_2erepo-err").textContent.includes("owner/name, like"));
    check("a pattern's errorMessage", (await text(page, "#in-pr_2erepo-err")) === "pr.repo must be owner/name, like octo-org/api");
    await axe(page, "the start form with its problems");
    await page.screenshot({ path: path.join(env.WEB_OUT, "start-form.png"), fullPage: true });
    // the PR review started from its form (its GitHub API a closed local port:
    // the review fails at its first fetch, after the start this checks)
    await setField(page, "#in-pr_2erepo", "octo-org/api");
    await setField(page, "#in-github_api", "http://127.0.0.1:9");
    await setField(page, "#start-id", "pr-web-1");
    await page.click("#start-go");
    await page.waitForFunction(() => location.hash === "#/s/pr-web-1", within(30000)).catch(() => null);
    check("the start form starts the PR review", await page.evaluate(() => location.hash === "#/s/pr-web-1"),
      (await text(page, "#start-problems")) + " " + (await text(page, "#start-out")));
    await page.goto(base + "/#/start");
    await page.waitForSelector("#start-script option[value='agent_session.lua']");

    // the agent session: required object fields, a refusal by the server, the start
    await page.select("#start-script", "agent_session.lua");
    await page.waitForSelector("#in-objective");
    await page.click("#start-go");
    await page.waitForFunction(() => document.getElementById("in-objective-err").textContent.length > 0);
    check("agent_session: objective's errorMessage", (await text(page, "#in-objective-err")) === "objective is missing");
    check("and model.name's", (await text(page, "#start-problems")).includes("model.name is missing"));
    await page.type("#in-objective", "Say hello, then wait for messages");
    await page.type("#in-model_2ename", "m");
    await page.select("#in-waitForMessages", "true");
    // the raw JSON: what the form made, editable; back to the form with it
    await page.click("#start-raw");
    const raw = JSON.parse(await page.$eval("#start-json", (t) => t.value));
    check("Edit as JSON shows the form's input", raw.objective === "Say hello, then wait for messages" && raw.model.name === "m" && raw.waitForMessages === true,
      JSON.stringify(raw));
    // what the form has no field for (the model's provider and URL) is written here
    raw.model.provider = "openai";
    raw.model.baseUrl = env.WEB_MODEL + "/v1";
    raw.limits = { maxModelTurns: 6, memoryMb: 256, timeoutSeconds: 300 };
    await page.$eval("#start-json", (t, v) => { t.value = v; }, JSON.stringify(raw));
    await page.click("#start-raw");
    check("back to the form with the JSON's values", (await page.$eval("#in-limits_2ememoryMb", (i) => i.value)) === "256");
    await page.click("#start-raw");
    const again = JSON.parse(await page.$eval("#start-json", (t) => t.value));
    check("what no field shows is kept through the form", again.model.baseUrl === env.WEB_MODEL + "/v1", JSON.stringify(again));
    await page.click("#start-raw");
    await setField(page, "#start-id", "bad id with spaces");
    tolerate = /400/;
    await page.click("#start-go");
    await page.waitForFunction(() => document.getElementById("start-out").textContent.startsWith("not started") ||
      document.getElementById("start-problems").textContent.length > 0);
    check("the form's input passes the schema's checks", (await text(page, "#start-problems")) === "", await text(page, "#start-problems"));
    const refusal = await text(page, "#start-out");
    check("the server's 400 is shown as it says it", /^not started: .*id/.test(refusal), refusal);
    tolerate = null;
    await setField(page, "#start-id", env.WEB_ID);
    await page.click("#start-go");
    await page.waitForFunction((id) => location.hash === "#/s/" + encodeURIComponent(id), within(30000), env.WEB_ID).catch(() => null);
    check("the start opens the new session", await page.evaluate((id) => location.hash === "#/s/" + encodeURIComponent(id), env.WEB_ID),
      await text(page, "#start-out"));
    check("started as the token's identity", await page.waitForFunction(() => document.querySelector(".meta") &&
      document.querySelector(".meta").textContent.includes("started by token:alice"), within(30000)).then(() => true, () => false));

    // the message form: shown while it runs and takes messages
    const shown = await page.waitForFunction(() => { const t = document.getElementById("talk"); return t && !t.hidden; }, within(90000)).then(() => true, () => false);
    check("a running agent session shows the message form", shown);
    await axe(page, "a session with its message form");
    await page.type("#msg-text", "hello from the form");
    await page.click("#msg-send");
    await page.waitForFunction(() => /delivered|not delivered/.test(document.getElementById("msg-out").textContent));
    check("the server's answer is shown", (await text(page, "#msg-out")) === "message delivered, sent by token:alice", await text(page, "#msg-out"));
    await page.screenshot({ path: path.join(env.WEB_OUT, "session-talk.png"), fullPage: true });

    // a chat (workflows/chat.lua), started from its generated form: the reply
    // streams in, a message typed in its form is answered in the same
    // transcript, a tool call is approved from the inbox, and the chat goes on
    await page.goto(base + "/#/start", { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#start-script option[value='chat.lua']");
    await page.select("#start-script", "chat.lua");
    await page.waitForSelector("#in-message");
    check("the chat's form: its first message, described", (await text(page, "#in-message-help")).includes("without it, the chat waits for one"),
      await text(page, "#in-message-help"));
    await page.type("#in-message", "chat-first hello");
    await page.type("#in-model_2ename", "m");
    await page.type("#in-model_2eprovider", "openai");
    await page.type("#in-model_2ebaseUrl", env.WEB_MODEL + "/v1");
    await page.$eval("#in-permissions_2etools", (t) => { t.closest("details").open = true; }); // an optional group, folded
    await setField(page, "#in-permissions_2etools", "shell");
    await setField(page, "#start-id", env.WEB_CHAT_ID);
    await page.click("#start-go");
    await page.waitForFunction((id) => location.hash === "#/s/" + encodeURIComponent(id), within(30000), env.WEB_CHAT_ID).catch(() => null);
    check("the start form starts the chat", await page.evaluate((id) => location.hash === "#/s/" + encodeURIComponent(id), env.WEB_CHAT_ID),
      (await text(page, "#start-out")) + " " + (await text(page, "#start-problems")));
    const answered = (want) => page.waitForFunction((w) => [...document.querySelectorAll(".agent-message:not(.live) .text")]
      .some((t) => t.textContent.includes(w)), within(90000), want).then(() => true, () => false);
    const talking = () => page.waitForFunction(() => { const t = document.getElementById("talk"); return t && !t.hidden; },
      within(90000)).then(() => true, () => false);
    check("the chat answers its first message", await answered("chat reply one"));
    check("and shows its message form while it waits", await talking());
    const say = async (words) => {
      await page.type("#msg-text", words);
      await page.click("#msg-send");
      await page.waitForFunction(() => /delivered/.test(document.getElementById("msg-out").textContent));
    };
    await say("stream me a reply");
    const FULL = "these words stream in one by one";
    const partial = await page.waitForFunction(() => { const t = document.querySelector(".ev.live.agent-message .text");
      return t && t.textContent.length > 0 ? t.textContent : null; }, within(90000)).then((h) => h.jsonValue(), () => "");
    check("the reply streams into the transcript: part of it shown while the model writes",
      partial.length > 0 && partial.length < FULL.length && FULL.startsWith(partial), JSON.stringify(partial));
    await fetch(env.WEB_MODEL + "/_release?gate=chat-stream", { method: "POST" });
    check("then the whole reply", await answered(FULL));
    check("and the live text is gone", !(await page.$(".ev.live.agent-message")));
    check("the message typed is in the transcript", await page.evaluate(() => [...document.querySelectorAll(".ev .text")]
      .some((t) => t.textContent === "stream me a reply")));
    await talking();
    await say("please run the tool");
    await page.goto(base + "/#/approvals");
    const cmdSel = ".approval-card:has(code.cmd)";
    const asked = await page.waitForFunction((sel) => { const c = document.querySelector(sel + " code.cmd");
      return c && c.textContent.includes("needs-ok"); }, within(90000), cmdSel).then(() => true, () => false);
    check("the chat's tool call waits in the inbox", asked, await text(page, "#inbox"));
    await page.type(cmdSel + " input", "fine from the chat");
    await page.click(cmdSel + " button.approve");
    await page.waitForFunction(() => !document.querySelector(".approval-card"), within(30000)).catch(() => null);
    check("approved from the inbox", !(await page.$(".approval-card")));
    await page.goto(base + "/#/s/" + encodeURIComponent(env.WEB_CHAT_ID));
    check("the chat goes on: the reply after the tool ran", await answered("the tool said TOOL-RAN-42"));
    check("and it waits for the next message", await talking());
    await say("one more thing");
    check("and answers the next message", await answered("still here"));
    await page.screenshot({ path: path.join(env.WEB_OUT, "chat.png"), fullPage: true });
    check("no console error", consoleErrors.length === 0, consoleErrors.join(" | "));
  } catch (e) {
    check("the browser run", false, (e.stack || String(e)) + " console: " + consoleErrors.join(" | "));
  } finally {
    await browser.close();
  }
  process.exit(exitCode());
})();
