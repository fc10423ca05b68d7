// A small MCP Apps host (the chat host's side of extension `io.modelcontextprotocol/ui`) for
// .ci/apps: an MCP client (@modelcontextprotocol/client, Streamable HTTP, bearer key) to ahp's
// /mcp/conversations, and the official host SDK (`AppBridge` from
// @modelcontextprotocol/ext-apps/app-bridge) rendering each View in a sandboxed iframe
// (`sandbox="allow-scripts"`, srcdoc) over `PostMessageTransport`. The bridge is given the MCP
// client, so it forwards the View's tools/call and resources/read to the server itself.
//
// The page is bundled with esbuild into one file and loaded as host.html?mcp=URL&key=KEY.
// Selenium drives it through `window.ahpHost` (tests/apps/apps.py):
//   present(slot, args)   calls present_agent_continuation, reads its ui:// resource, renders
//                         the View in a new iframe of that slot and hands it the tool input and
//                         result once it has initialized
//   reloadView(slot)      re-creates the slot's iframe (a refresh: same MCP session, same result)
//   removeView(slot)      removes it; restoreView(slot) re-creates it from the ORIGINAL result
//   setAnswerMode(mode)   'answer': ui/message is answered at once ({}); 'never': never answered
//   reconnect()           closes the MCP client and connects it again (a new session); the
//                         bridges keep the same client object, so they forward through it
//   messages, trace, errors, sessionId: what happened, for the test to read
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const params = new URLSearchParams(location.search);
const MCP_URL = params.get("mcp");
const KEY = params.get("key");
const TOOL = "present_agent_continuation";
const HOST_INFO = { name: "ahp-ci-apps-host", version: "1.0.0" };
const MAX_TRACE = 2000;

const $ = (id) => document.getElementById(id);
function log(line) {
  const el = $("log");
  el.textContent = `${new Date().toISOString().slice(11, 23)} ${line}\n${el.textContent}`.slice(0, 20000);
}
function short(v, n = 400) {
  let s;
  try {
    s = JSON.stringify(v);
  } catch (_) {
    s = String(v);
  }
  return s && s.length > n ? `${s.slice(0, n)}…` : s;
}

const state = {
  sessionId: null,
  sessions: [], // every MCP session id this page's client had, in order
  answerMode: "answer",
  messages: [], // every ui/message: { n, slot, instance, role, text, at, mode, answered }
  trace: [], // the Views' JSON-RPC traffic through the bridges, bounded
  errors: [],
  tools: null, // tools/list as the host saw it
  slots: {}, // slot -> { args, result, html, csp, instance, iframe, bridge, initialized, appInfo }
  instances: 0,
};

const client = new Client(HOST_INFO, {
  // The MCP Apps extension, as a host announces it (SEP-1865).
  capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
});
client.onerror = (e) => {
  state.errors.push(`client: ${e && e.message}`);
};

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${KEY}` } },
  });
  await client.connect(transport);
  state.sessionId = transport.sessionId ?? null;
  state.sessions.push(state.sessionId);
  $("session").textContent = state.sessionId;
  log(`connected: session ${state.sessionId}, server ${short(client.getServerVersion())}`);
  return { sessionId: state.sessionId, server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
}

// A new MCP session (after the server restarted, say). The bridges hold the same Client object.
async function reconnect() {
  try {
    await client.close();
  } catch (e) {
    state.errors.push(`close: ${e && e.message}`);
  }
  return connect();
}

function trace(slot, instance, dir, m) {
  const t = { at: Date.now(), slot, instance, dir };
  if (m.method) t.method = m.method;
  if (m.id !== undefined) t.id = m.id;
  if (m.method === "tools/call") {
    t.tool = m.params && m.params.name;
  }
  if (m.result !== undefined) {
    const r = m.result || {};
    if (r.isError !== undefined) t.isError = r.isError;
    if (r.structuredContent !== undefined) t.result = short(r.structuredContent, 600);
  }
  if (m.error !== undefined) t.error = short(m.error, 300);
  state.trace.push(t);
  if (state.trace.length > MAX_TRACE) state.trace.splice(0, state.trace.length - MAX_TRACE);
}

// PostMessageTransport, traced both ways: what the View asks and what the host answers.
class TracedTransport extends PostMessageTransport {
  constructor(win, slot, instance) {
    super(win, win);
    this.slot = slot;
    this.instance = instance;
    this.pending = new Map(); // id -> tool name, for the answers
  }
  async start() {
    const inner = this.onmessage;
    this.onmessage = (m, extra) => {
      if (m.method === "tools/call") this.pending.set(m.id, m.params && m.params.name);
      trace(this.slot, this.instance, "view→host", m);
      inner && inner(m, extra);
    };
    return super.start();
  }
  async send(m, options) {
    const t = { ...m };
    if (m.id !== undefined && this.pending.has(m.id) && !m.method) {
      t.method = `tools/call:${this.pending.get(m.id)}`;
      this.pending.delete(m.id);
    }
    trace(this.slot, this.instance, "host→view", t);
    return super.send(m, options);
  }
}

// The host's policy for a View: the spec's default, widened only by the resource's
// `_meta.ui.csp` domains; put first in the document, so it holds besides the View's own.
function policy(csp) {
  const c = csp || {};
  const res = (c.resourceDomains || []).join(" ");
  const conn = (c.connectDomains || []).join(" ");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${res}`.trim(),
    `style-src 'unsafe-inline' ${res}`.trim(),
    `img-src data: ${res}`.trim(),
    `font-src ${res || "'none'"}`,
    `media-src data: ${res}`.trim(),
    `connect-src ${conn || "'none'"}`,
    "frame-src 'none'",
    "base-uri 'none'",
  ].join("; ");
}

function withPolicy(html, csp) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
  const m = /<head[^>]*>/i.exec(html);
  return m ? html.slice(0, m.index + m[0].length) + meta + html.slice(m.index + m[0].length) : meta + html;
}

function onMessage(slot, instance) {
  return async (p) => {
    const text = (p.content || [])
      .filter((c) => c.type === "text")
      .map((c) => c.text)
      .join("\n");
    const entry = {
      n: state.messages.length + 1,
      slot,
      instance,
      role: p.role,
      text,
      at: Date.now(),
      mode: state.answerMode,
      answered: false,
    };
    state.messages.push(entry);
    $("count").textContent = String(state.messages.length);
    log(`ui/message #${entry.n} from ${slot}#${instance} (${state.answerMode})`);
    if (state.answerMode === "never") return new Promise(() => {});
    entry.answered = true;
    return {};
  };
}

// Renders the slot's View anew from its stored resource and tool result.
async function mount(slot) {
  const s = state.slots[slot];
  if (s.iframe) throw new Error(`slot ${slot} already has a View`);
  const instance = ++state.instances;
  s.instance = instance;
  s.initialized = false;
  s.appInfo = null;
  let box = document.getElementById(`slot-${slot}`);
  if (!box) {
    box = document.createElement("div");
    box.className = "slot";
    box.id = `slot-${slot}`;
    box.innerHTML = `<div><b>${slot}</b> <span class="inst"></span></div>`;
    $("views").appendChild(box);
  }
  box.querySelector(".inst").textContent = `View #${instance}`;
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.setAttribute("title", `${slot} View #${instance}`);
  iframe.srcdoc = withPolicy(s.html, s.csp);
  box.appendChild(iframe);
  const bridge = new AppBridge(
    client,
    HOST_INFO,
    { openLinks: {}, serverTools: {}, serverResources: {}, logging: {}, message: { text: {} } },
    {
      hostContext: {
        theme: "light",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        platform: "web",
        toolInfo: { tool: s.tool },
      },
    },
  );
  bridge.onmessage = onMessage(slot, instance);
  bridge.onerror = (e) => state.errors.push(`${slot}#${instance} bridge: ${e && e.message}`);
  bridge.addEventListener("initialized", () => {
    if (s.instance !== instance) return;
    s.initialized = true;
    s.appInfo = bridge.getAppVersion() || null;
    log(`${slot}#${instance} initialized: ${short(s.appInfo)}`);
    bridge.sendToolInput({ arguments: s.args }).catch((e) => state.errors.push(`tool-input: ${e.message}`));
    bridge.sendToolResult(s.result).catch((e) => state.errors.push(`tool-result: ${e.message}`));
  });
  s.iframe = iframe;
  s.bridge = bridge;
  await bridge.connect(new TracedTransport(iframe.contentWindow, slot, instance));
  return instance;
}

async function unmount(slot) {
  const s = state.slots[slot];
  if (!s || !s.iframe) return;
  const { bridge, iframe } = s;
  s.iframe = null;
  s.bridge = null;
  s.instance = null;
  iframe.remove();
  try {
    await bridge.close();
  } catch (e) {
    state.errors.push(`${slot} close: ${e.message}`);
  }
}

async function present(slot, args) {
  if (!state.tools) state.tools = (await client.listTools()).tools;
  const tool = state.tools.find((t) => t.name === TOOL);
  if (!tool) throw new Error(`tools/list has no ${TOOL}: ${state.tools.map((t) => t.name).join(", ")}`);
  const uri = getToolUiResourceUri(tool);
  if (!uri) throw new Error(`${TOOL} has no _meta.ui.resourceUri: ${short(tool._meta)}`);
  const result = await client.callTool({ name: TOOL, arguments: args });
  if (result.isError) throw new Error(`${TOOL} refused: ${short(result.structuredContent || result.content)}`);
  const read = await client.readResource({ uri });
  const c = read.contents && read.contents[0];
  if (!c || typeof c.text !== "string") throw new Error(`resources/read ${uri}: no text content: ${short(read)}`);
  if (c.mimeType !== RESOURCE_MIME_TYPE) throw new Error(`resources/read ${uri}: mimeType ${c.mimeType}, not ${RESOURCE_MIME_TYPE}`);
  const csp = c._meta && c._meta.ui && c._meta.ui.csp;
  await unmount(slot);
  state.slots[slot] = { args, result, html: c.text, csp, tool, uri };
  const instance = await mount(slot);
  return {
    instance,
    uri,
    resourceUri: c.uri,
    mimeType: c.mimeType,
    csp: csp === undefined ? null : csp,
    htmlBytes: c.text.length,
    structuredContent: result.structuredContent,
    appOnlyTools: state.tools.filter((t) => isToolVisibilityAppOnly(t)).map((t) => t.name),
    sessionId: state.sessionId,
  };
}

async function reloadView(slot) {
  await unmount(slot);
  return mount(slot);
}

function slotState(slot) {
  const s = state.slots[slot];
  if (!s) return null;
  return { instance: s.instance, initialized: s.initialized, appInfo: s.appInfo, mounted: !!s.iframe };
}

window.ahpHost = {
  state,
  get messages() {
    return state.messages;
  },
  get trace() {
    return state.trace;
  },
  get errors() {
    return state.errors;
  },
  get sessionId() {
    return state.sessionId;
  },
  connect,
  reconnect,
  present,
  reloadView,
  removeView: unmount,
  restoreView: mount,
  slotState,
  setAnswerMode(mode) {
    if (mode !== "answer" && mode !== "never") throw new Error(`answer mode ${mode}`);
    state.answerMode = mode;
    $("mode").textContent = mode;
  },
};
window.ahpHost.ready = connect().then(
  (r) => r,
  (e) => {
    state.errors.push(`connect: ${e && e.message}`);
    throw e;
  },
);
