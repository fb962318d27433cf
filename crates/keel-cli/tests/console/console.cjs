// The web console in headless Chromium (driven by playwright-core), against a live
// `keel serve` with API keys. Run by crates/keel-cli/tests/it/console_browser.rs, which passes:
// BASE (http://127.0.0.1:PORT), OPERATOR_KEY, CLIENT_KEY, CHROMIUM (its path), SHOTS (the
// folder for screenshots). Any failed expectation throws: the process exits 1 with the reason.
"use strict";

const { chromium } = require("playwright-core");
const assert = require("node:assert/strict");
const path = require("node:path");

const { BASE, OPERATOR_KEY, CLIENT_KEY, CHROMIUM, SHOTS } = process.env;
const TIMEOUT = 60_000;

async function api(method, route, body) {
  const response = await fetch(BASE + route, {
    method,
    headers: { "Authorization": `Bearer ${OPERATOR_KEY}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function start(input) {
  const started = await api("POST", "/api/requests", { input });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  return started.body.requestId;
}

async function until(what, check) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function ended(id) {
  return until(`run ${id} to end`, async () => {
    const run = await api("GET", `/api/requests/${id}`);
    return ["completed", "failed", "cancelled"].includes(run.body.status) && run.body;
  });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));

  // A client key cannot open the console; an operator key can.
  await page.goto(BASE + "/console");
  await page.fill("#key", CLIENT_KEY);
  await page.click("button[type=submit]");
  await page.getByText("That key may not open the console").waitFor();
  await page.fill("#key", OPERATOR_KEY);
  await page.click("button[type=submit]");
  await page.locator("#health .n").filter({ hasText: /ok|degraded/ }).waitFor();
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "keel_console");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  await page.screenshot({ path: path.join(SHOTS, "overview.png") });

  // A state-changing request without the CSRF token is refused, even with the cookie.
  const csrfless = await page.evaluate(() => fetch("/api/requests", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ input: "Hi" }),
  }).then((r) => r.status));
  assert.equal(csrfless, 403);

  // A run's events appear live, in order, while it runs: the run waits for an approval (so
  // it is surely still running when the page shows it), is approved through the API, and the
  // rest of its events arrive on the open page.
  const live = await start("Write the live file");
  await page.goto(`${BASE}/console#/requests/${live}`);
  await page.locator('#timeline li[data-type="runtime.approval.requested"]').waitFor();
  assert.equal(await page.locator('#timeline li[data-type="runtime.request.completed"]').count(), 0,
    "the run had not ended when the page showed it");
  const asked = (await api("GET", "/api/approvals?status=pending")).body.data.find((a) => a.requestId === live);
  await api("POST", `/api/approvals/${asked.approvalId}/approve`, {});
  await page.locator('#timeline li[data-type="runtime.request.completed"]').waitFor();
  const seqs = await page.locator("#timeline li[data-seq]").evaluateAll((rows) => rows.map((r) => Number(r.dataset.seq)));
  // Narration, derived live, sits between the events it describes.
  await page.locator('#timeline li.narration').filter({ hasText: "Completed" }).waitFor();
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), "events in order, none missing");
  await page.locator("#output").filter({ hasText: "Done:" }).waitFor();
  // Its cost at the model's declared prices, exactly as recorded, beside its tokens.
  const cost = (await api("GET", `/api/requests/${live}`)).body.usage.cost;
  assert.ok(cost && cost.currency === "USD", `the run has a cost: ${JSON.stringify(cost)}`);
  await page.getByText(`${cost.amount} USD`, { exact: true }).first().waitFor();

  // A repaired tool call shows what the gateway changed as a diff of its arguments.
  const repaired = await start("Please repair this");
  await ended(repaired);
  await page.goto(`${BASE}/console#/requests/${repaired}`);
  const diff = page.locator("[data-diff]");
  await diff.waitFor();
  assert.equal(await diff.locator("del").first().textContent(), '"5"');
  assert.equal(await diff.locator("ins").first().textContent(), "5");
  await page.screenshot({ path: path.join(SHOTS, "request-timeline.png"), fullPage: true });

  // The tools page counts the repair.
  await page.goto(`${BASE}/console#/tools`);
  const readFile = page.locator("#tools tbody tr").filter({ hasText: "read_file" });
  await readFile.waitFor();
  assert.equal(await readFile.locator("td").nth(4).textContent(), "1", "one repaired call of read_file");
  await page.goto(`${BASE}/console#/requests/${repaired}`);
  await page.locator('#timeline li[data-type="runtime.request.completed"]').waitFor();

  // Fork the repaired run after its fourth event: the new run opens and completes.
  await page.fill('input[name="at"]', "4");
  await page.getByRole("button", { name: "Fork" }).click();
  await until("the fork's page", async () => !page.url().endsWith(repaired) && page.url().includes("#/requests/run_"));
  await page.locator('#timeline li[data-type="runtime.request.forked"]').waitFor();
  await page.locator('#timeline li[data-type="runtime.request.completed"]').waitFor();

  // A run of over 5,000 events renders in batches: every row arrives, and no single change to
  // the page adds more than one batch (300 rows), whatever the machine's speed. The longest
  // task is printed for information only: on a loaded machine it measures the machine.
  const long = await start("A long answer");
  await ended(long);
  await page.evaluate(() => {
    window.longest = 0;
    window.batches = [];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) window.longest = Math.max(window.longest, entry.duration);
    }).observe({ type: "longtask", buffered: false });
    new MutationObserver((records) => {
      for (const record of records) {
        if (record.target.id !== "timeline") continue;
        const rows = [...record.addedNodes].filter((node) => node.nodeName === "LI").length;
        if (rows) window.batches.push(rows);
      }
    }).observe(document.body, { childList: true, subtree: true });
  });
  await page.goto(`${BASE}/console#/requests/${long}`);
  await page.locator('#timeline li[data-type="runtime.request.completed"]').waitFor();
  const rows = await page.locator("#timeline li[data-seq]").count();
  assert.ok(rows > 5000, `${rows} rows`);
  const { longest, batches } = await page.evaluate(() => ({ longest: window.longest, batches: window.batches }));
  console.log(`5,000-event run: ${rows} rows in ${batches.length} batches, longest task ${Math.round(longest)} ms`);
  assert.ok(batches.length >= Math.ceil(rows / 300), `the rows came in ${batches.length} batches`);
  assert.ok(Math.max(...batches) <= 300, `one change added ${Math.max(...batches)} rows`);

  // Approve a pending call and watch the run complete; deny another.
  const approved = await start("Write the first file");
  await page.goto(`${BASE}/console#/approvals`);
  const card = page.locator("#approvals section.card");
  await card.first().waitFor();
  await page.screenshot({ path: path.join(SHOTS, "approvals.png") });
  await card.first().getByRole("button", { name: "Approve", exact: true }).click();
  await until("the approved card to go", async () => (await card.count()) === 0);
  assert.equal((await ended(approved)).status, "completed");
  const denied = await start("Write the second file");
  await card.first().waitFor();
  await card.first().getByLabel("Reason").fill("not today");
  await card.first().getByRole("button", { name: "Deny" }).click();
  await until("the denied card to go", async () => (await card.count()) === 0);
  await ended(denied);
  const decisions = (await api("GET", "/api/approvals")).body.data
    .filter((a) => a.requestId === approved || a.requestId === denied);
  const statuses = decisions.map((a) => a.status).sort();
  assert.deepEqual(statuses, ["approved", "denied"], JSON.stringify(decisions));

  // A decision made elsewhere disappears from the inbox live.
  await start("Write the third file");
  await card.first().waitFor();
  const pending = (await api("GET", "/api/approvals?status=pending")).body.data[0];
  await api("POST", `/api/approvals/${pending.approvalId}/deny`, { reason: "from the API" });
  await until("the card decided elsewhere to go", async () => (await card.count()) === 0);

  // Readable on a phone-width screen: the requests list fits without horizontal scrolling.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${BASE}/console#/requests`);
  await page.locator("#requests tbody tr").first().waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone screen`);

  assert.deepEqual(errors, [], "no script errors");
  await browser.close();
})().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
