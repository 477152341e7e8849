// The page's script: the unmodified Stack Auth SDK, as an app would use it in the browser.
import { StackClientApp } from "@stackframe/js";

window.runFlow = async ({ baseUrl, projectId, publishableClientKey, email, password }) => {
  const app = new StackClientApp({
    baseUrl,
    projectId,
    publishableClientKey,
    tokenStore: "memory",
    redirectMethod: "none",
    devTool: false,
    noAutomaticPrefetch: true,
  });
  const steps = {};
  const up = await app.signUpWithCredential({ email, password, noRedirect: true, noVerificationCallback: true });
  steps.signUp = up.status === "ok" ? "ok" : String(up.error);
  steps.afterSignUp = (await app.getUser())?.primaryEmail ?? null;
  await app.signOut();
  steps.afterSignOut = (await app.getUser())?.primaryEmail ?? null;
  const wrong = await app.signInWithCredential({ email, password: password + "x", noRedirect: true });
  steps.wrongPassword = wrong.status === "ok" ? "ok" : wrong.error?.errorCode ?? String(wrong.error);
  const inn = await app.signInWithCredential({ email, password, noRedirect: true });
  steps.signIn = inn.status === "ok" ? "ok" : String(inn.error);
  const user = await app.getUser();
  steps.afterSignIn = user?.primaryEmail ?? null;
  steps.userId = user?.id ?? null;

  // A visitor gets an anonymous user, then signs up: the same user, now a full one.
  await app.signOut();
  const anonymous = await app.getUser({ or: "anonymous" });
  steps.anonymous = anonymous ? { id: anonymous.id, isAnonymous: anonymous.isAnonymous } : null;
  const upgrade = await app.signUpWithCredential({
    email: `upgraded-${email}`, password, noRedirect: true, noVerificationCallback: true,
  });
  steps.upgrade = upgrade.status === "ok" ? "ok" : String(upgrade.error);
  const upgraded = await app.getUser();
  steps.upgraded = upgraded
    ? { id: upgraded.id, isAnonymous: upgraded.isAnonymous, email: upgraded.primaryEmail }
    : null;

  // The user's API keys: created (the secret once), listed by their last four, revoked.
  const key = await upgraded.createApiKey({ description: "from the browser", expiresAt: null });
  steps.apiKey = { prefix: key.value.slice(0, 8), type: key.type, userId: key.userId };
  const listed = await upgraded.listApiKeys();
  steps.apiKeys = listed.map((k) => ({ lastFour: k.value.lastFour, valid: k.isValid() }));
  steps.secretLastFour = key.value.slice(-4);
  await listed[0].revoke();
  steps.afterRevoke = (await upgraded.listApiKeys()).map((k) => k.whyInvalid());
  return steps;
};

// Passkeys, as an app's account page and sign-in page use them: the SDK rewrites the relying
// party to the page's host and calls the browser's WebAuthn API (a virtual authenticator here).
// The SDK needs a redirect method for both; this one records where it would go.
window.runPasskeys = async ({ baseUrl, projectId, publishableClientKey, email, password }) => {
  const navigations = [];
  const app = new StackClientApp({
    baseUrl,
    projectId,
    publishableClientKey,
    tokenStore: "memory",
    redirectMethod: { navigate: (url) => navigations.push(String(url)) },
    devTool: false,
    noAutomaticPrefetch: true,
  });
  const steps = {};
  const up = await app.signUpWithCredential({ email, password, noRedirect: true, noVerificationCallback: true });
  steps.signUp = up.status === "ok" ? "ok" : String(up.error);
  const user = await app.getUser();
  steps.userId = user?.id ?? null;
  steps.before = user?.passkeyAuthEnabled ?? null;
  const registered = await user.registerPasskey();
  steps.register = registered.status === "ok" ? "ok" : registered.error?.errorCode ?? String(registered.error);
  steps.after = (await app.getUser())?.passkeyAuthEnabled ?? null;
  await app.signOut();
  steps.afterSignOut = (await app.getUser())?.id ?? null;
  const signedIn = await app.signInWithPasskey();
  steps.signIn = signedIn.status === "ok" ? "ok" : signedIn.error?.errorCode ?? String(signedIn.error);
  steps.afterSignIn = (await app.getUser())?.primaryEmail ?? null;
  steps.navigations = navigations;
  return steps;
};
