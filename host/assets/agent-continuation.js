// The agent-continuation card's View: the MCP App pull carrier of one agent's wakes.
//
// Inlined by host/src/mcp/app_card.rs after the MCP Apps SDK (`ExtApps`, in scope). The chat
// host renders it for `present_agent_continuation`; its tool result names the exact agent,
// endpoint and controller generation — the only identity the card ever takes, except from a
// strict endpoint-replacement envelope. Then, on every heartbeat: observe the binding
// (`agent_continuation_state`), bind it when this process does not hold it, acquire the next
// wake (waiting for it on the server when none is pending), prepare it (the server crosses the
// durable dispatch fence) and ask the host to run one turn (`ui/message`), then record what the
// host said (`agent_continuation_finish`).
//
// Never twice: an attempt past the fence gets at most one `ui/message`, from this View, ever.
// A prepare answer that is missing, malformed or names anything else, a host that does not
// answer in time, an error — all end the attempt `delivery_unknown`. Only the turn's exact
// `consume_agent_wake` proves it ran.
// A module: strict already.

const BINDING_PREFIX = "ahp_host_binding_";
const HEARTBEAT_MS = 3000; // while visible
const HIDDEN_HEARTBEAT_MS = 30000; // hidden or in the background: slower, never stopped
// An idle acquire waits this long on the server for the agent's next wake (the server ends it
// at the wake, and sooner when the endpoint's lease is short): a message reaches the chat at
// once, not at the next heartbeat. A heartbeat that waited is followed by the next at once.
const ACQUIRE_WAIT_SECONDS = 20;
const MESSAGE_TIMEOUT_MS = 15000; // the host's answer to ui/message
const CLAIM_SECONDS = 60;
const MAX_MESSAGE_BYTES = 4096;
const ID = {
  agent: /^agt_[0-9a-f]{24}$/,
  endpoint: /^ep_[0-9a-f]{24}$/,
  wake: /^wk_[0-9a-f]{24}$/,
  attempt: /^wka_[0-9a-f]{24}$/,
  token: /^wct_[0-9a-f]{64}$/,
};

const $ = (id) => document.getElementById(id);
function show(id, text) {
  $(id).textContent = text;
}

// 128 bits from the browser's secure source, or nothing: no binding without them.
function newBindingId() {
  if (!globalThis.crypto || typeof globalThis.crypto.getRandomValues !== "function") return null;
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return BINDING_PREFIX + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const bindingId = newBindingId();
const app = new ExtApps.App({ name: "ahp-agent-continuation", version: "1" }, {}, { autoResize: true });

let identity = null; // { agentId, endpointId, controllerGeneration }
let epoch = 0; // bumped when a replacement retargets the card: older work becomes inert
let busy = false;
let timer = null;
let lastBeat = 0; // when the latest heartbeat started (ms)
let stopped = false; // torn down: no more heartbeats
const sent = new Set(); // attempts this View sent a ui/message for

function isIdentity(v) {
  return (
    v !== null &&
    typeof v === "object" &&
    ID.agent.test(v.agentId) &&
    ID.endpoint.test(v.endpointId) &&
    Number.isSafeInteger(v.controllerGeneration) &&
    v.controllerGeneration >= 1
  );
}

function render(status, detail) {
  show("status", status);
  if (detail !== undefined) show("detail", detail);
  if (identity) {
    show("endpoint", `${identity.endpointId} · generation ${identity.controllerGeneration}`);
  }
}

class Refusal extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

async function call(name, args) {
  const acting = {
    agentId: identity.agentId,
    endpointId: identity.endpointId,
    controllerGeneration: identity.controllerGeneration,
  };
  const r = await app.callServerTool({ name, arguments: { ...acting, bindingId, ...args } });
  if (r.isError) {
    const c = r.structuredContent || {};
    throw new Refusal(typeof c.kind === "string" ? c.kind : "refused", typeof c.message === "string" ? c.message : name);
  }
  return r.structuredContent || {};
}

// The automatic continuation message from a prepare answer, or null if it is not exactly
// the one this View asked for.
function automaticMessage(answer, attemptId) {
  const m = answer && answer.output && answer.output.app_protocol && answer.output.app_protocol.automatic_message;
  if (!m || typeof m !== "object" || m.version !== 1) return null;
  const exact =
    m.agentId === identity.agentId &&
    m.endpointId === identity.endpointId &&
    m.controllerGeneration === identity.controllerGeneration &&
    m.attemptId === attemptId &&
    ID.wake.test(m.wakeId) &&
    ID.token.test(m.consumeToken) &&
    typeof m.text === "string" &&
    new TextEncoder().encode(m.text).length <= MAX_MESSAGE_BYTES &&
    m.text.includes(m.consumeToken);
  return exact ? m : null;
}

async function finish(attemptId, outcome) {
  try {
    await call("agent_continuation_finish", { attemptId, outcome });
  } catch (e) {
    // The next heartbeat's acquire shows the attempt again; it is then finished as unknown.
    render("Waiting", `could not record ${outcome}: ${e.message}`);
  }
}

// Crosses the fence for a claimed attempt and sends its one ui/message.
async function deliver(attemptId, mine) {
  if (sent.has(attemptId)) return;
  const answer = await call("agent_continuation_prepare", { attemptId });
  // Past the fence: whatever happens now, never again for this attempt.
  sent.add(attemptId);
  if (mine !== epoch) return; // the card was retargeted meanwhile: the next acquire settles it
  const message = automaticMessage(answer, attemptId);
  if (!message) {
    await finish(attemptId, "delivery_unknown");
    render("Waiting", "the server's continuation message was not usable; not sent");
    return;
  }
  render("Continuing", `asking the host to resume ${identity.agentId}`);
  let outcome = "delivery_unknown";
  try {
    const r = await app.sendMessage(
      { role: "user", content: [{ type: "text", text: message.text }] },
      { timeout: MESSAGE_TIMEOUT_MS },
    );
    if (!(r && r.isError)) outcome = "dispatch_accepted";
  } catch (_) {
    // No answer, or an error: the host may or may not have taken it.
  }
  await finish(attemptId, outcome);
  render(
    outcome === "dispatch_accepted" ? "Handed to the host" : "Delivery unknown",
    outcome === "dispatch_accepted" ? "the turn proves itself by consuming its wake" : "not sent again",
  );
}

async function bind() {
  const r = await call("agent_continuation_bind", {});
  render("Bound", r.outcome === "rebound" ? "took over from this window's earlier card" : "waiting for messages and tasks");
}

// The endpoint expired: ask the server to decide, and follow only an exact replacement.
async function recoverEndpoint(mine) {
  const r = await call("agent_continuation_recover_endpoint", {});
  if (mine !== epoch) return;
  const rec = r.endpointRecovery;
  if (!rec || rec.kind !== "replaced") {
    render("Stale", rec && rec.kind === "live" ? "the endpoint is live" : "the endpoint could not be replaced");
    return;
  }
  const next = rec.successor;
  const exact =
    rec.old &&
    rec.old.agentId === identity.agentId &&
    rec.old.endpointId === identity.endpointId &&
    rec.old.controllerGeneration === identity.controllerGeneration &&
    isIdentity(next) &&
    next.agentId === identity.agentId &&
    next.controllerGeneration === identity.controllerGeneration + 1;
  if (!exact) {
    render("Stale", "the replacement did not name this card's endpoint");
    return;
  }
  epoch += 1;
  identity = { agentId: next.agentId, endpointId: next.endpointId, controllerGeneration: next.controllerGeneration };
  sent.clear();
  render("Reconnecting…", "the endpoint was replaced");
  await bind();
}

async function heartbeat() {
  if (busy || !identity || stopped) return;
  busy = true;
  lastBeat = Date.now();
  const mine = epoch;
  try {
    const state = await call("agent_continuation_state", {});
    if (mine !== epoch) return;
    if (!state.hostBinding || !state.hostBinding.bound) {
      if (state.holder === "other_view" && !state.sameWindow) {
        render("Carried elsewhere", "another window's card carries this agent");
        return;
      }
      if (state.recovery && state.recovery.kind === "host_binding_missing_in_process") {
        await call("agent_continuation_recover", {});
        render("Bound", "recovered after the server restarted");
      } else {
        await bind();
      }
      if (mine !== epoch) return;
    }
    const got = await call("agent_continuation_acquire", {
      claimSeconds: CLAIM_SECONDS,
      waitSeconds: ACQUIRE_WAIT_SECONDS,
    });
    if (mine !== epoch) return;
    const a = got.attempt;
    if (got.kind === "claimed" || (got.kind === "open" && a && a.state === "claimed")) {
      await deliver(a.attemptId, mine);
    } else if (got.kind === "open" && a && a.state === "dispatched") {
      // Past the fence with no outcome this View could record: unknown, never re-sent.
      await finish(a.attemptId, "delivery_unknown");
    } else if (got.kind === "open") {
      render("Handed to the host", "waiting for the turn to consume its wake");
    } else {
      render("Bound", "waiting for messages and tasks");
    }
  } catch (e) {
    if (mine !== epoch) return;
    if (e.kind === "stale_endpoint") {
      try {
        await recoverEndpoint(mine);
      } catch (r) {
        render("Stale", r.message);
      }
    } else {
      render("Waiting", e.message);
    }
  } finally {
    busy = false;
    schedule();
  }
}

// The next heartbeat one interval after the latest began: at once after one that waited.
function schedule() {
  clearTimeout(timer);
  if (stopped) return;
  const interval = document.visibilityState === "hidden" ? HIDDEN_HEARTBEAT_MS : HEARTBEAT_MS;
  timer = setTimeout(heartbeat, Math.max(0, interval - (Date.now() - lastBeat)));
}

function adopt(result) {
  const s = result && result.structuredContent;
  if (identity || !isIdentity(s)) return; // only the first, exact identity: nothing retargets it
  identity = { agentId: s.agentId, endpointId: s.endpointId, controllerGeneration: s.controllerGeneration };
  show("agent", typeof s.displayName === "string" ? s.displayName : s.agentId);
  render("Binding…");
  heartbeat();
}

app.ontoolresult = adopt;
app.onteardown = async () => {
  stopped = true;
  clearTimeout(timer);
  if (identity) {
    try {
      await call("agent_continuation_unbind", {});
    } catch (_) {
      // Best effort: a refreshed card of this window may bind in its place anyway.
    }
  }
  return {};
};
document.addEventListener("visibilitychange", schedule);

if (!bindingId) {
  render("Unavailable", "this browser has no secure random source: the card cannot bind");
} else {
  app.connect().then(
    () => render("Connected", "waiting for the agent's identity"),
    (e) => render("Unavailable", `could not connect to the host: ${e.message}`),
  );
}
