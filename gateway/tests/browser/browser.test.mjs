// The Stack Auth SDK in a real browser (issue 18 §0): the page is served from one origin
// (http://localhost:<port>) and calls Latchkey on another (http://127.0.0.1:<port>), so every
// call goes through a CORS preflight, with the headers the SDK really sends. Needs a built
// `latchkey` binary (LATCHKEY_BIN, default target/debug/latchkey) and Chromium
// (CHROMIUM, default /usr/bin/chromium); `bash deploy/test.sh` provides both.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import puppeteer from "puppeteer-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");
const bin = process.env.LATCHKEY_BIN ?? join(root, "target/debug/latchkey");
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";

/** A loopback port nobody listens on right now. */
async function freePort() {
  const server = createServer();
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  await new Promise((ok) => server.close(ok));
  return port;
}

async function waitReady(url, ms) {
  const until = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    if (Date.now() > until) throw new Error(`${url} not ready`);
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

test("the unmodified Stack Auth SDK signs up, out and in, upgrades an anonymous user, keeps API keys and registers and signs in with a passkey, from a browser page", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "latchkey-browser-"));
  const apiPort = await freePort();
  const server = spawn(bin, [], {
    cwd: dir,
    env: { ...process.env, LATCHKEY_HTTP_ADDR: `127.0.0.1:${apiPort}`, RUST_LOG: "warn" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let serverLog = "";
  server.stderr.on("data", (d) => (serverLog += d));
  t.after(() => {
    server.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });
  const api = `http://127.0.0.1:${apiPort}`;
  await waitReady(`${api}/health/ready`, 60_000);
  // The first start writes the project's keys once the system is up.
  let project;
  for (const until = Date.now() + 30_000; !project; ) {
    try {
      project = JSON.parse(readFileSync(join(dir, "latchkey-data/project.json"), "utf8"));
    } catch (e) {
      if (Date.now() > until) throw new Error(`no project.json: ${e}\n${serverLog}`);
      await new Promise((ok) => setTimeout(ok, 200));
    }
  }

  const bundle = await esbuild.build({
    entryPoints: [join(here, "page.js")],
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "silent",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  const script = bundle.outputFiles[0].text;
  const page = `<!doctype html><html><head><meta charset="utf-8"><title>app</title></head>
<body><script type="module" src="/app.js"></script></body></html>`;
  const site = createServer((req, res) => {
    if (req.url === "/app.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(script);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(page);
    }
  });
  await new Promise((ok) => site.listen(0, "127.0.0.1", ok));
  t.after(() => site.close());
  const origin = `http://localhost:${site.address().port}`;

  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  t.after(() => browser.close());
  const tab = await browser.newPage();
  const problems = [];
  tab.on("console", (m) => m.type() === "error" && problems.push(m.text()));
  tab.on("requestfailed", (r) => problems.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  const preflights = [];
  tab.on("request", (r) => r.method() === "OPTIONS" && preflights.push(r.url()));
  await tab.goto(origin, { waitUntil: "load" });
  await tab.waitForFunction(() => typeof window.runFlow === "function", { timeout: 20_000 });

  // The project lets users keep API keys (set by its admin, as an operator would).
  const allow = await fetch(`${api}/api/v1/internal/project`, {
    method: "PATCH",
    headers: {
      "content-type": "application/json",
      "x-stack-access-type": "admin",
      "x-stack-project-id": project.project_id,
      "x-stack-super-secret-admin-key": project.super_secret_admin_key,
    },
    body: JSON.stringify({ allow_user_api_keys: true, passkey_enabled: true, allow_localhost: true }),
  });
  assert.equal(allow.status, 200, await allow.text());

  const email = `browser-${Date.now()}@example.com`;
  const steps = await tab.evaluate((args) => window.runFlow(args), {
    baseUrl: api,
    projectId: project.project_id,
    publishableClientKey: project.publishable_client_key,
    email,
    password: "quartz-meadow-harbor-73",
  });
  const detail = `${JSON.stringify(steps)}\nbrowser: ${problems.join("\n")}\nserver: ${serverLog}`;
  assert.equal(steps.signUp, "ok", detail);
  assert.equal(steps.afterSignUp, email, detail);
  assert.equal(steps.afterSignOut, null, detail);
  assert.equal(steps.wrongPassword, "EMAIL_PASSWORD_MISMATCH", detail);
  assert.equal(steps.signIn, "ok", detail);
  assert.equal(steps.afterSignIn, email, detail);
  assert.ok(steps.userId, detail);
  // signUpAnonymously (through getUser({or: "anonymous"})), then an upgrade by signing up.
  assert.equal(steps.anonymous?.isAnonymous, true, detail);
  assert.equal(steps.upgrade, "ok", detail);
  assert.deepEqual(
    steps.upgraded,
    { id: steps.anonymous.id, isAnonymous: false, email: `upgraded-${email}` },
    detail,
  );
  // createApiKey, listApiKeys and revoke on the user.
  assert.deepEqual(steps.apiKey, { prefix: "sk_user_", type: "user", userId: steps.anonymous.id }, detail);
  assert.deepEqual(steps.apiKeys, [{ lastFour: steps.secretLastFour, valid: true }], detail);
  assert.deepEqual(steps.afterRevoke, ["manually-revoked"], detail);

  // Passkeys through Chromium's own WebAuthn stack, with a virtual platform authenticator
  // (Chrome DevTools Protocol) that keeps discoverable credentials and verifies its user.
  const cdp = await tab.createCDPSession();
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  const passkeys = await tab.evaluate((args) => window.runPasskeys(args), {
    baseUrl: api,
    projectId: project.project_id,
    publishableClientKey: project.publishable_client_key,
    email: `passkey-${email}`,
    password: "quartz-meadow-harbor-73",
  });
  const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
  const passkeyDetail = `${JSON.stringify(passkeys)}\ncredentials: ${JSON.stringify(credentials)}\nbrowser: ${problems.join("\n")}\nserver: ${serverLog}`;
  assert.equal(passkeys.signUp, "ok", passkeyDetail);
  assert.equal(passkeys.before, false, passkeyDetail);
  assert.equal(passkeys.register, "ok", passkeyDetail);
  assert.equal(passkeys.after, true, passkeyDetail);
  assert.equal(passkeys.afterSignOut, null, passkeyDetail);
  assert.equal(passkeys.signIn, "ok", passkeyDetail);
  assert.equal(passkeys.afterSignIn, `passkey-${email}`, passkeyDetail);
  // One discoverable credential for the page's host, naming the user, used once to sign in.
  assert.equal(credentials.length, 1, passkeyDetail);
  assert.equal(credentials[0].isResidentCredential, true, passkeyDetail);
  assert.equal(credentials[0].rpId, "localhost", passkeyDetail);
  assert.equal(Buffer.from(credentials[0].userHandle, "base64").toString("hex"), passkeys.userId.replaceAll("-", ""), passkeyDetail);
  assert.ok(credentials[0].signCount >= 1, passkeyDetail);

  // The calls were cross-origin, so the browser asked first; and nothing was blocked.
  assert.ok(preflights.length > 0, "no CORS preflight was made");
  assert.deepEqual(problems.filter((p) => /CORS|Access-Control/i.test(p)), [], detail);
});
