"""The MCP Apps agent-continuation card end to end: ahp's View in a real MCP Apps host.

Usage: apps.py AHP DATA_DIR PORT HOST_PAGE KEY WORK_DIR

AHP is the ahp binary, served here on 127.0.0.1:PORT with `--data-dir DATA_DIR` and
`--allow-origin` the host page's origin (this script starts it, and restarts it for `restart`;
its pid goes to WORK_DIR/ahp.pid, its logs to WORK_DIR/server-N.log). HOST_PAGE is the URL of
tests/apps/host.html (the official ext-apps `AppBridge` host, bundled with host.js), served by
the caller on another loopback port. KEY is an API key with communication:read and
communication:manage. Chromium's profile goes to WORK_DIR, the id of the process group
chromedriver and Chromium run in to WORK_DIR/chromedriver.pgid, for the caller's cleanup.

Three parties: the host page in headless Chromium (the chat host: its MCP client calls
present_agent_continuation, renders the card's View, forwards the View's tools/call, and takes
the View's ui/message); this script as the chat model (it reads each ui/message the host took,
and runs the turn it asks for with the official MCP Python SDK: bootstrap, inbox, reply,
complete a task attempt, consume the wake exactly once); and a second agent, the coordinator,
acting through its own endpoint (it posts, delegates, waits). The SQLite database is read
read-only for what only it shows: the wake attempts' states and carrier, the endpoint's binding.

One line per check; the first failure ends the run with exit code 1 and prints what the host
saw (its ui/messages, the Views' traffic), the browser's console and the model's calls.
"""

import asyncio
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ahp, data_dir, port, host_page, key, work = sys.argv[1:7]
base = f"http://127.0.0.1:{port}"
mcp_url = f"{base}/mcp/conversations"
origin = "{0.scheme}://{0.netloc}".format(urlsplit(host_page))
db_path = f"{data_dir}/ahp.db"

CARD = "ui://ahp/agent-continuation/v1"
MIME = "text/html;profile=mcp-app"
APP_TOOLS = sorted([
    "agent_continuation_bind", "agent_continuation_recover", "agent_continuation_state", "agent_continuation_acquire",
    "agent_continuation_prepare", "agent_continuation_finish", "agent_continuation_unbind",
    "agent_continuation_recover_endpoint",
])
# The View's heartbeat (agent_continuation_state) runs every few seconds when its acquire does
# not wait (up to 20 s when it does); its ui/message timeout is about 15 s.
HEARTBEAT = 3.0
VIEW_MESSAGE_TIMEOUT = 15.0
# Longest wait for one step that the View drives (a heartbeat, a bind, a delivery).
STEP = 25.0
ID = {
    "agentId": re.compile(r"^agt_[0-9a-f]+$"),
    "endpointId": re.compile(r"^ep_[0-9a-f]+$"),
    "wakeId": re.compile(r"^wk_[0-9a-f]+$"),
    "attemptId": re.compile(r"^wka_[0-9a-f]+$"),
    "consumeToken": re.compile(r"^wct_[0-9a-f]+$"),
}
LINE = re.compile(r"^ahp-continuation: (\{.*\})\s*$", re.M)


# ahp answers a session's DELETE with 202 Accepted, which the SDK logs as a warning each time.
logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)


# ---------------------------------------------------------------------------------------------
# ahp, which this script starts and restarts


class Server:
    def __init__(self):
        self.proc = None
        self.starts = 0
        self.log = None

    def start(self):
        self.starts += 1
        self.log = f"{work}/server-{self.starts}.log"
        for attempt in range(20):
            with open(self.log, "w") as err:
                self.proc = subprocess.Popen(
                    [ahp, "--data-dir", data_dir, "serve", "--http", f"127.0.0.1:{port}", "--allow-origin", origin],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            with open(f"{work}/ahp.pid", "w") as f:
                f.write(str(self.proc.pid))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None:
                if "MCP over HTTP" in open(self.log).read():
                    return
                time.sleep(0.05)
            if self.proc.poll() is None:
                raise Failed(f"ahp serve did not start in 30s: {open(self.log).read()[-2000:]}")
            # Exited: the port may still be held a moment after a kill; try again.
            time.sleep(0.25)
        raise Failed(f"ahp serve kept exiting: {open(self.log).read()[-2000:]}")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


server = Server()


# ---------------------------------------------------------------------------------------------
# The official MCP Python SDK, as the chat model and as the coordinator

calls = []  # the last MCP calls this script made, for the failure report


class Refused(Failed):
    def __init__(self, tool, args, content):
        self.tool, self.args, self.content = tool, args, content
        self.kind = (content or {}).get("kind") if isinstance(content, dict) else None
        super().__init__(f"{tool} refused: {json.dumps(content)[:600]} (arguments {json.dumps(redact(args))[:600]})")


def redact(args):
    return {k: ("wct_…" if k == "consumeToken" else v) for k, v in args.items()}


class Mcp:
    def __init__(self, client):
        self.c = client

    async def call(self, tool, args):
        r = await self.c.call_tool(tool, args)
        content = r.structured_content
        if content is None:
            text = "".join(getattr(x, "text", "") for x in r.content)
            try:
                content = json.loads(text)
            except ValueError:
                content = {"text": text}
        calls.append({"tool": tool, "args": redact(args), "isError": bool(r.is_error), "result": json.dumps(content)[:400]})
        del calls[:-60]
        if r.is_error:
            raise Refused(tool, args, content)
        return content

    async def tools(self):
        return [t.model_dump(by_alias=True, exclude_none=True) for t in (await self.c.list_tools()).tools]


@asynccontextmanager
async def session():
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as c:
            yield Mcp(c)


def acting(x):
    return {"agentId": x["agentId"], "endpointId": x["endpointId"], "controllerGeneration": x["controllerGeneration"]}


# ---------------------------------------------------------------------------------------------
# The database, read-only


def db(sql, *args):
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def endpoint_row(endpoint_id):
    rows = db("SELECT id, agent_id, generation, state, lease_expires_at, wake_capable, app_binding_hash, "
              "app_window_hash FROM agent_endpoints WHERE id = ?", endpoint_id)
    return rows[0] if rows else None


def attempt_row(attempt_id):
    rows = db("SELECT id, wake_id, endpoint_id, generation, state, carrier, consume_token_hash IS NOT NULL AS tokened "
              "FROM wake_attempts WHERE id = ?", attempt_id)
    return rows[0] if rows else None


def tokened_attempts(wake_id):
    return db("SELECT id, state FROM wake_attempts WHERE wake_id = ? AND consume_token_hash IS NOT NULL", wake_id)


async def until(what, probe, timeout=STEP, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"waited {timeout:.0f}s for {what}")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------------------------------------
# The host page in headless Chromium


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={work}/chromium",
                # Every View keeps its heartbeat: no timer throttling of a frame in the background.
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service("/usr/bin/chromedriver", popen_kw={"start_new_session": True})
    driver = webdriver.Chrome(service=service, options=options)
    with open(f"{work}/chromedriver.pgid", "w") as f:
        f.write(str(service.process.pid))
    driver.set_script_timeout(60)
    return driver


driver = None
console = []  # the browser's console, collected as the run goes


def host(method, *args):
    """Calls `window.ahpHost[method](...args)` and waits for its promise."""
    r = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const [method, args] = [arguments[0], arguments[1]];
        Promise.resolve()
          .then(() => window.ahpHost[method](...args))
          .then((v) => done({ ok: v === undefined ? null : v }),
                (e) => done({ error: String((e && (e.stack || e.message)) || e) }));
    """, method, list(args))
    if "error" in r:
        raise Failed(f"host page {method}{tuple(args)}: {r['error']}")
    return r["ok"]


def messages():
    return driver.execute_script("return window.ahpHost.messages.map((m) => ({ ...m }))")


def trace():
    return driver.execute_script("return window.ahpHost.trace.map((t) => ({ ...t }))")


def drain_console():
    try:
        console.extend(driver.get_log("browser"))
    except Exception:
        pass


def continuation(entry):
    """The `ahp-continuation: {…}` line of a ui/message, checked."""
    found = LINE.findall(entry["text"])
    check(len(found) == 1, f"ui/message #{entry['n']} has {len(found)} ahp-continuation lines: {entry['text'][:600]!r}")
    c = json.loads(found[0])
    check(c.get("version") == 1, f"continuation version {c.get('version')!r}: {c}")
    for k, pattern in ID.items():
        check(isinstance(c.get(k), str) and pattern.match(c[k]), f"continuation {k} {c.get(k)!r}")
    check(isinstance(c.get("controllerGeneration"), int) and c["controllerGeneration"] >= 1, f"continuation {c}")
    check(entry.get("role") == "user", f"ui/message role {entry.get('role')!r}")
    return c


async def next_message(seen, what, timeout=STEP):
    """Waits for the host's next ui/message after the first `seen`; exactly one must come."""
    new = await until(f"a ui/message ({what})", lambda: messages()[seen:], timeout)
    await asyncio.sleep(0.3)  # a second one right behind it would be a double delivery
    new = messages()[seen:]
    check(len(new) == 1, f"{len(new)} ui/messages for {what}: {[m['text'][-300:] for m in new]}")
    return new[0]


def per_attempt():
    """attemptId → the ui/messages that carried it, and wakeId → the same."""
    by_attempt, by_wake = {}, {}
    for m in messages():
        for line in LINE.findall(m["text"]):
            c = json.loads(line)
            by_attempt.setdefault(c.get("attemptId"), []).append(m["n"])
            by_wake.setdefault(c.get("wakeId"), []).append(m["n"])
    return by_attempt, by_wake


def no_double_delivery():
    by_attempt, by_wake = per_attempt()
    twice = {k: v for k, v in {**by_attempt, **by_wake}.items() if len(v) > 1}
    check(not twice, f"delivered more than once (id → ui/message numbers): {twice}")
    return len(by_attempt)


# ---------------------------------------------------------------------------------------------
# The chat model's turn for one ui/message


async def turn(entry, reply, task_result=None, wait_accepted=True):
    """Runs the turn a ui/message asks for, as a chat model would, and returns what it did."""
    c = continuation(entry)
    me = acting(c)
    if wait_accepted:
        # The host answered: the View records the attempt accepted (not yet a turn).
        await until(f"attempt {c['attemptId']} accepted",
                        lambda: (attempt_row(c["attemptId"]) or {}).get("state") in ("accepted", "consumed"), 10)
        row = attempt_row(c["attemptId"])
        check(row["state"] == "accepted", f"attempt {c['attemptId']} is {row['state']} before the turn consumed it")
    did = {"continuation": c, "replies": [], "completed": None}
    async with session() as s:
        b = await s.call("bootstrap_agent_conversation", {**me, "wakeId": c["wakeId"]})
        w = b.get("wake") or {}
        check(w.get("wakeId") == c["wakeId"] and w.get("state") == "dispatched",
              f"bootstrap's wake {w}, not {c['wakeId']} dispatched")
        inbox = await s.call("list_agent_inbox", {**me, "queuedOnly": True})
        for i, d in enumerate(inbox["deliveries"]):
            m = d["message"]
            posted = await s.call("post_message", {
                **me, "conversationId": m["conversationId"], "body": f"{reply} (re: {m['body']})",
                "replyTo": m["messageId"], "wakeId": c["wakeId"], "operationIndex": i})
            await s.call("consume_agent_delivery", {**me, "messageId": m["messageId"]})
            did["replies"].append({"to": m["messageId"], "message": posted["messageId"], "conversation": m["conversationId"]})
        if task_result is not None:
            tasks = await s.call("list_agent_tasks", {**me, "assigneeAgentId": c["agentId"], "state": "running"})
            mine = [t for t in tasks["tasks"] if (t.get("currentAttempt") or {}).get("wakeId") == c["wakeId"]]
            check(len(mine) == 1, f"running tasks whose attempt this wake delivers: {mine or tasks['tasks']}")
            attempt = mine[0]["currentAttempt"]
            done = await s.call("complete_agent_task_attempt", {
                **me, "attemptId": attempt["attemptId"], "outcome": "succeeded", "result": task_result})
            did["completed"] = {"task": mine[0]["taskId"], "attempt": attempt["attemptId"], "state": done["task"]["state"]}
        consume = {**me, "wakeId": c["wakeId"], "consumeToken": c["consumeToken"]}
        consumed = await s.call("consume_agent_wake", consume)
        check((consumed.get("wake") or {}).get("state") == "consumed" and consumed.get("stateChanged") is True,
              f"consume_agent_wake: {consumed}")
        # Exactly once: the exact retry changes nothing.
        again = await s.call("consume_agent_wake", consume)
        check(again.get("stateChanged") is False, f"consume_agent_wake retried: {again}")
    row = attempt_row(c["attemptId"])
    check(row and row["state"] == "consumed" and row["carrier"] == "mcp_app",
          f"attempt after the consume: {row} (want consumed, carrier mcp_app)")
    tokened = tokened_attempts(c["wakeId"])
    check(len(tokened) == 1 and tokened[0]["id"] == c["attemptId"], f"wake {c['wakeId']} attempts with a consume token: {tokened}")
    return did


# ---------------------------------------------------------------------------------------------
# The checks

ctx = {}


async def setup():
    """The owner's agents: the App agent (carried by the card), the coordinator, a conversation."""
    async with session() as s:
        agents = {}
        for name, handle in [("app", "app-agent"), ("coord", "coordinator"), ("app2", "expiring-agent")]:
            a = await s.call("create_agent_identity", {
                "handle": handle, "displayName": f"CI {handle}", "description": "", "idempotencyKey": f"apps-{handle}"})
            agents[name] = a["agentId"]
        ctx["agents"] = agents
        ctx["app"] = await s.call("attach_agent_endpoint", {"agentId": agents["app"], "idempotencyKey": "apps-app-ep"})
        ctx["coord"] = await s.call("attach_agent_endpoint", {
            "agentId": agents["coord"], "leaseSeconds": 3600, "idempotencyKey": "apps-coord-ep"})
        cv = await s.call("create_conversation", {
            "title": "MCP Apps continuation", "agentIds": [agents["app"], agents["coord"]], "idempotencyKey": "apps-cv1"})
        ctx["cv1"] = cv["conversationId"]
        ctx["tools"] = await s.tools()
    ctx["posts"] = 0


async def coordinator_posts(conversation, body):
    ctx["posts"] += 1
    async with session() as s:
        p = await s.call("post_message", {
            **acting(ctx["coord"]), "conversationId": conversation, "body": body,
            "idempotencyKey": f"apps-post-{ctx['posts']}"})
    return p["messageId"]


async def coordinator_sees_reply(conversation, message_id, agent_id):
    async with session() as s:
        read = await s.call("read_conversation", {**acting(ctx["coord"]), "conversationId": conversation, "limit": 200})
    replies = [m for m in read["messages"] if m.get("replyTo") == message_id and m.get("agentId") == agent_id]
    check(len(replies) == 1, f"replies to {message_id} by {agent_id} in read_conversation: {replies}")
    return replies[0]


def bound(endpoint_id, other_than=None):
    row = endpoint_row(endpoint_id)
    return (row and row["app_binding_hash"] and row["wake_capable"] == 1
            and row["app_binding_hash"] != other_than and row)


async def resumable(agent_id):
    async with session() as s:
        listed = await s.call("list_agent_identities", {"limit": 200})
    mine = [a for a in listed["agents"] if a["agentId"] == agent_id]
    return bool(mine) and mine[0].get("productionAutoResumeAvailable") is True


async def render():
    tools = {t["name"]: t for t in ctx["tools"]}
    present = tools.get("present_agent_continuation")
    check(present, f"tools/list has no present_agent_continuation: {sorted(tools)}")
    meta = present.get("_meta") or {}
    check((meta.get("ui") or {}).get("resourceUri") == CARD, f"present_agent_continuation _meta {meta}")
    missing = [t for t in APP_TOOLS if t not in tools]
    check(not missing, f"tools/list lacks {missing}")
    not_app_only = [t for t in APP_TOOLS if ((tools[t].get("_meta") or {}).get("ui") or {}).get("visibility") != ["app"]]
    check(not not_app_only, f"not app-only (_meta.ui.visibility != ['app']): {not_app_only}")

    app = ctx["app"]
    r = host("present", "main", {"agentId": app["agentId"], "endpointId": app["endpointId"],
                                 "expectedControllerGeneration": app["controllerGeneration"]})
    sc = r["structuredContent"] or {}
    check(r["mimeType"] == MIME and r["resourceUri"] == CARD, f"resource {r['resourceUri']} {r['mimeType']}")
    check(sc.get("agentId") == app["agentId"] and sc.get("endpointId") == app["endpointId"]
          and sc.get("controllerGeneration") == app["controllerGeneration"] and sc.get("handle") == "app-agent"
          and sc.get("displayName") == "CI app-agent", f"present_agent_continuation result {sc}")
    check(set(APP_TOOLS) <= set(r["appOnlyTools"]), f"app-only tools the host sees: {r['appOnlyTools']}")
    ctx["session1"] = r["sessionId"]
    await until("the View's ui/initialize", lambda: (host("slotState", "main") or {}).get("initialized"), 15)
    slot = host("slotState", "main")
    row = await until("the View's bind (agent_endpoints.app_binding_hash set, wake_capable = 1)",
                      lambda: bound(app["endpointId"]))
    ctx["hash1"] = row["app_binding_hash"]
    await until("list_agent_identities productionAutoResumeAvailable: true", lambda: resumable(app["agentId"]), 10)
    csp = r["csp"]
    return (f"host session {r['sessionId']}: present_agent_continuation → {r['resourceUri']} ({r['mimeType']}, "
            f"{r['htmlBytes']} bytes, _meta.ui.csp {json.dumps(csp)}), rendered in a sandbox=allow-scripts iframe; "
            f"View {slot['appInfo']} initialized over AppBridge; bound: wake_capable=1, "
            f"productionAutoResumeAvailable=true; {len(APP_TOOLS)} app-only tools")


async def deliver_post(conversation, body, agent, reply, slot="main", instance=None):
    """The coordinator posts; the View sends one ui/message; the model runs the turn; the
    coordinator reads the reply. Returns the continuation, the ui/message, the seconds from the
    post to the ui/message, and the reply as the coordinator read it."""
    seen = len(messages())
    t0 = time.monotonic()
    posted = await coordinator_posts(conversation, body)
    entry = await next_message(seen, f"the post {posted}")
    took = time.monotonic() - t0
    check(entry["slot"] == slot, f"ui/message from slot {entry['slot']}, not {slot}")
    if instance is not None:
        check(entry["instance"] == instance, f"ui/message from View #{entry['instance']}, not the current #{instance}")
    check(entry["answered"], f"the host did not answer ui/message #{entry['n']}")
    c = continuation(entry)
    check(c["agentId"] == agent["agentId"] and c["endpointId"] == agent["endpointId"]
          and c["controllerGeneration"] == agent["controllerGeneration"],
          f"continuation names {acting(c)}, not {acting(agent)}")
    did = await turn(entry, reply)
    check([r["to"] for r in did["replies"]] == [posted], f"the turn answered {did['replies']}, not just {posted}")
    mine = await coordinator_sees_reply(conversation, posted, agent["agentId"])
    no_double_delivery()
    return c, entry, took, mine


async def message():
    c, entry, took, reply = await deliver_post(ctx["cv1"], "status of the build?", ctx["app"], "all green")
    return (f"coordinator posted → 1 ui/message in {took:.1f}s ({c['wakeId']}, attempt {c['attemptId']}: accepted) → "
            f"model: bootstrap, inbox 1, post_message reply {reply['messageId']}, consume_agent_delivery, "
            f"consume_agent_wake (its exact retry a no-op) → attempt consumed (carrier mcp_app, one consume token); the coordinator "
            f"reads the reply: {reply['body']!r}")


async def delegation():
    result = "the answer is 42"
    seen = len(messages())
    async with session() as s:
        t = await s.call("create_agent_task", {
            **acting(ctx["coord"]), "assigneeAgentId": ctx["agents"]["app"], "title": "compute the answer",
            "instructions": "Reply with the answer.", "start": True, "idempotencyKey": "apps-task-1"})
        task = t["task"]
        attempt = task.get("currentAttempt") or {}
        check(task["state"] == "running" and attempt.get("wakeId"), f"created task {task}")
        w = await s.call("register_agent_wait", {
            **acting(ctx["coord"]), "sources": [t["taskId"]], "mode": "all", "idempotencyKey": "apps-wait-1"})
        check(w["wait"]["state"] == "waiting", f"registered wait {w}")
    entry = await next_message(seen, "the task attempt")
    c = continuation(entry)
    check(c["wakeId"] == attempt["wakeId"], f"ui/message wake {c['wakeId']}, the attempt's is {attempt['wakeId']}")
    did = await turn(entry, "n/a", task_result=result)
    check(did["completed"] and did["completed"]["attempt"] == attempt["attemptId"], f"completed {did['completed']}")
    async with session() as s:
        wait = (await s.call("read_agent_wait", {**acting(ctx["coord"]), "waitId": w["waitId"]}))["wait"]
        got = (await s.call("get_agent_task", {**acting(ctx["coord"]), "taskId": t["taskId"]}))["task"]
    check(wait["state"] == "triggered" and wait["sources"][0]["taskState"] == "succeeded", f"wait {wait}")
    check(got["state"] == "succeeded" and got["result"] == result, f"task {got}")
    no_double_delivery()
    return (f"create_agent_task {t['taskId']} (attempt {attempt['attemptId']}) + register_agent_wait {w['waitId']} → "
            f"1 ui/message ({c['wakeId']}) → model completed the attempt, consumed the wake → coordinator: "
            f"read_agent_wait triggered ({wait['sources'][0]['taskState']}), get_agent_task result {got['result']!r}")


def bind_outcomes(slot, instance):
    return [t.get("result") for t in trace() if t["slot"] == slot and t["instance"] == instance
            and t.get("method") == "tools/call:agent_continuation_bind"]


async def reload():
    app = ctx["app"]
    was = endpoint_row(app["endpointId"])
    before = was["app_binding_hash"]
    instance = host("reloadView", "main")
    await until("the refreshed View's ui/initialize", lambda: (host("slotState", "main") or {}).get("initialized"), 15)
    row = await until("the refreshed View's bind (a new app_binding_hash)", lambda: bound(app["endpointId"], before))
    check(row["app_window_hash"] and row["app_window_hash"] == was["app_window_hash"],
          f"the window recorded on the endpoint changed on a refresh: {was['app_window_hash']} → {row['app_window_hash']}")
    outcomes = bind_outcomes("main", instance)
    c, entry, took, reply = await deliver_post(ctx["cv1"], "and the deploy?", app, "deployed", instance=instance)
    n = no_double_delivery()
    session_now = driver.execute_script("return window.ahpHost.sessionId")
    check(session_now == ctx["session1"], f"the host's session changed: {ctx['session1']} → {session_now}")
    return (f"iframe re-created (View #{instance}, same session {session_now}): bound with a new "
            f"fence (bind answered {outcomes[:1]}); next post → 1 ui/message from View #{instance} in {took:.1f}s "
            f"→ consumed, reply seen; {n} attempts so far, each delivered once")


async def restart():
    app = ctx["app"]
    instance = host("slotState", "main")["instance"]
    old_session = driver.execute_script("return window.ahpHost.sessionId")
    since = time.time() * 1000
    server.kill()
    killed = time.monotonic()
    await asyncio.sleep(1)
    server.start()
    after = endpoint_row(app["endpointId"])
    r = host("reconnect")
    check(r["sessionId"] and r["sessionId"] != old_session, f"session after reconnect {r['sessionId']} (was {old_session})")

    def recovered():
        t = [x for x in trace() if x["slot"] == "main" and x["instance"] == instance and x["at"] >= since]
        missing = [i for i, x in enumerate(t) if "host_binding_missing_in_process" in (x.get("result") or "")]
        if not missing:
            return None
        rebinds = [x for x in t[missing[0]:] if x.get("method") == "tools/call:agent_continuation_recover" and not x.get("isError")]
        return rebinds[0] if rebinds else None

    await until("the View's observation host_binding_missing_in_process and its recover", recovered)
    await until("the rebind (wake_capable = 1)", lambda: bound(app["endpointId"]))
    await until("productionAutoResumeAvailable: true after the restart", lambda: resumable(app["agentId"]), 10)
    check(host("slotState", "main")["instance"] == instance, "the iframe was re-created")
    c, entry, took, reply = await deliver_post(ctx["cv1"], "are you back?", app, "back", instance=instance)
    return (f"ahp SIGKILLed and restarted on :{port} (wake_capable after restart: {after['wake_capable']}, "
            f"binding hash kept: {after['app_binding_hash'] == endpoint_row(app['endpointId'])['app_binding_hash']}); "
            f"host reconnected (session {old_session} → {r['sessionId']}); the same View #{instance} saw "
            f"host_binding_missing_in_process and recovered its binding in {time.monotonic() - killed:.1f}s; next post → 1 ui/message → "
            f"consumed, reply seen")


async def expired():
    agent = ctx["agents"]["app2"]
    lease = 5
    async with session() as s:
        ep1 = await s.call("attach_agent_endpoint", {"agentId": agent, "leaseSeconds": lease, "idempotencyKey": "apps-app2-ep"})
        cv = await s.call("create_conversation", {
            "title": "MCP Apps expiry", "agentIds": [agent, ctx["agents"]["coord"]], "idempotencyKey": "apps-cv2"})
    host("present", "exp", {"agentId": agent, "endpointId": ep1["endpointId"],
                            "expectedControllerGeneration": ep1["controllerGeneration"]})
    await until("the View's bind of the short-lease endpoint", lambda: bound(ep1["endpointId"]))
    host("removeView", "exp")
    removed = time.monotonic()
    await until(f"the {lease}s lease to run out",
                lambda: endpoint_row(ep1["endpointId"])["lease_expires_at"] < time.time() * 1e6 - 500_000, lease + 10)
    waited = time.monotonic() - removed
    instance = host("restoreView", "exp")  # the ORIGINAL tool result: the old endpoint and generation

    def successor():
        rows = db("SELECT id, generation, state, wake_capable, app_binding_hash FROM agent_endpoints "
                  "WHERE agent_id = ? AND generation = ?", agent, ep1["controllerGeneration"] + 1)
        return rows and rows[0]["state"] == "attached" and rows[0]["wake_capable"] == 1 and rows[0]["app_binding_hash"] and rows[0]

    ep2 = await until("agent_continuation_recover_endpoint's successor (generation + 1) bound", successor)
    recoveries = [t.get("result") for t in trace() if t["slot"] == "exp" and t["instance"] == instance
                  and t.get("method") == "tools/call:agent_continuation_recover_endpoint"]
    check(recoveries, "the View never called agent_continuation_recover_endpoint")
    old = endpoint_row(ep1["endpointId"])
    successor_ep = {"agentId": agent, "endpointId": ep2["id"], "controllerGeneration": ep2["generation"]}
    c, entry, took, reply = await deliver_post(cv["conversationId"], "still there?", successor_ep, "yes, on the successor",
                                               slot="exp", instance=instance)
    return (f"endpoint {ep1['endpointId']} g{ep1['controllerGeneration']} (lease {lease}s) bound, iframe removed, "
            f"lease ran out after {waited:.1f}s (now {old['state']}); iframe re-created with the original result → "
            f"recover_endpoint {recoveries[0][:160]} → successor {ep2['id']} g{ep2['generation']} bound; "
            f"post → 1 ui/message naming the successor → consumed, reply seen")


async def never_answered():
    host("setAnswerMode", "never")
    seen = len(messages())
    posted = await coordinator_posts(ctx["cv1"], "are you still listening?")
    entry = await next_message(seen, f"the post {posted}")
    t_message = entry["at"] / 1000
    check(not entry["answered"], "the host answered")
    c = continuation(entry)
    row = await until(f"attempt {c['attemptId']} delivery_unknown",
                      lambda: (attempt_row(c["attemptId"]) or {}).get("state") == "delivery_unknown" and attempt_row(c["attemptId"]),
                      VIEW_MESSAGE_TIMEOUT + 15)
    took = time.time() - t_message
    check(took >= VIEW_MESSAGE_TIMEOUT - 2, f"delivery_unknown after {took:.1f}s, before the View's timeout")
    check(row["carrier"] == "mcp_app", f"attempt {row}")
    # The View looks again (its next acquire — after its finish, as one heartbeat runs at a time —
    # would claim a wake left pending at once), and then some: still the one ui/message.
    await until("the View's next acquire after delivery_unknown", lambda: [
        t for t in trace() if t["slot"] == "main" and t["dir"] == "view→host"
        and t.get("tool") == "agent_continuation_acquire" and t["at"] > entry["at"]])
    await asyncio.sleep(HEARTBEAT)
    later = messages()[seen:]
    check(len(later) == 1, f"{len(later)} ui/messages since the post (wanted exactly 1): {[m['text'][-200:] for m in later]}")
    row = attempt_row(c["attemptId"])
    check(row["state"] == "delivery_unknown", f"attempt after the View's next acquire: {row}")
    tokened = tokened_attempts(c["wakeId"])
    check(len(tokened) == 1, f"wake {c['wakeId']} attempts with a consume token: {tokened}")
    ctx["unknown"] = (entry, posted)
    host("setAnswerMode", "answer")
    return (f"host never answered ui/message #{entry['n']} ({c['attemptId']}): attempt delivery_unknown after "
            f"{took:.1f}s; after the View's next acquire still exactly 1 ui/message for the wake, "
            f"one consume token, nothing re-sent")


async def late_consume():
    """The host never answered, but it had taken the message: the turn runs anyway and its
    exact consume still succeeds (delivery_unknown is not lost)."""
    entry, posted = ctx["unknown"]
    did = await turn(entry, "late but here", wait_accepted=False)
    check(len(did["replies"]) == 1, f"the late turn answered {did['replies']}")
    reply = await coordinator_sees_reply(ctx["cv1"], posted, ctx["agents"]["app"])
    return f"the turn for the unanswered ui/message ran later: consume_agent_wake succeeded once, attempt consumed, reply {reply['messageId']} seen"


async def invariants():
    by_attempt, _ = per_attempt()
    double = db("SELECT wake_id, COUNT(*) AS n FROM wake_attempts WHERE consume_token_hash IS NOT NULL "
                "GROUP BY wake_id HAVING COUNT(*) > 1")
    check(not double, f"wakes with more than one consume token: {double}")
    rows = db("SELECT id, state, carrier FROM wake_attempts WHERE id IN (%s)" % ",".join("?" * len(by_attempt)), *by_attempt)
    check(len(rows) == len(by_attempt), f"attempts of the ui/messages not all in the database: {rows}")
    wrong = [r for r in rows if r["carrier"] != "mcp_app" or r["state"] != "consumed"]
    check(not wrong, f"attempts not consumed through mcp_app: {wrong}")
    n = no_double_delivery()
    errors = driver.execute_script("return window.ahpHost.errors.slice()")
    return (f"{n} ui/messages, {n} attempts, each once, all consumed (carrier mcp_app), no wake with two consume "
            f"tokens; host page errors: {errors[:3]}")


CHECKS = [
    ("render", render),
    ("message", message),
    ("delegation", delegation),
    ("reload", reload),
    ("restart", restart),
    ("expired", expired),
    ("never-answered", never_answered),
    ("late-consume", late_consume),
    ("invariants", invariants),
]


def view_texts():
    """What each View shows (its status line), read inside its frame: a sandboxed frame's own
    console does not reach the browser log."""
    shown = []
    for frame in driver.find_elements("css selector", "iframe"):
        title = frame.get_attribute("title")
        try:
            driver.switch_to.frame(frame)
            shown.append((title, driver.execute_script(
                "return ['status', 'detail', 'endpoint'].map((id) => (document.getElementById(id) || {}).textContent)")))
        except Exception as e:  # noqa: BLE001 - diagnostics only
            shown.append((title, f"unreadable: {e}"))
        finally:
            driver.switch_to.default_content()
    return shown


async def check_view_script():
    """The View's inline module script as ahp serves it, parsed by `node --check` (node is on
    PATH under .ci/apps): a script that does not parse leaves the View at its first line, and
    its SyntaxError never reaches the browser log from a sandboxed frame."""
    try:
        async with session() as s:
            html = (await s.c.read_resource(CARD)).contents[0].text
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return f"(resources/read failed: {e})"
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.S)
    if len(scripts) != 1:
        return f"{len(scripts)} inline scripts"
    with open(f"{work}/view.mjs", "w") as f:
        f.write(scripts[0])
    try:
        p = subprocess.run(["node", "--check", f"{work}/view.mjs"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        return f"(node unavailable: {e})"
    return "parses" if p.returncode == 0 else p.stderr.strip()[-800:]


async def report():
    print("--- the View's script (node --check)")
    print(await check_view_script())
    print("--- what each View shows")
    try:
        for title, text in view_texts():
            print(f"{title}: {text}")
    except Exception as e:  # noqa: BLE001
        print(f"(unreadable: {e})")
    print("--- ui/messages the host took")
    try:
        for m in messages():
            print(f"#{m['n']} {m['slot']}#{m['instance']} answered={m['answered']}: {LINE.findall(m['text']) or m['text'][-300:]}")
        print("--- the Views' traffic through the bridges (last 60)")
        for t in trace()[-60:]:
            print(json.dumps(t)[:500])
        print("--- host page errors")
        for e in driver.execute_script("return window.ahpHost.errors.slice(-30)"):
            print(e)
    except Exception as e:
        print(f"(host page unreadable: {e})")
    print("--- the model's and coordinator's last MCP calls")
    for c in calls[-20:]:
        print(json.dumps(c)[:600])
    drain_console()
    print("--- browser console (last 40)")
    for e in console[-40:]:
        print(f"{e.get('level')} {e.get('message', '')[:400]}")
    print(f"--- ahp log ({server.log})")
    try:
        print(open(server.log).read()[-3000:])
    except OSError:
        pass


async def main():
    global driver
    server.start()
    await setup()
    driver = browser()
    driver.get(host_page)
    r = driver.execute_async_script(
        "const done = arguments[0]; window.ahpHost.ready.then((r) => done({ ok: r }), (e) => done({ error: String(e) }))")
    check("ok" in r, f"the host page's MCP client did not connect: {r}")
    for name, fn in CHECKS:
        t0 = time.monotonic()
        try:
            detail = await fn()
        except Failed as e:
            print(f"FAIL {name}: {e}", flush=True)
            await report()
            return 1
        except Exception as e:  # noqa: BLE001 - a crash is a failure of the check it happened in
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            await report()
            return 1
        drain_console()
        print(f"ok   {name}: {detail} [{time.monotonic() - t0:.1f}s]", flush=True)
    return 0


if __name__ == "__main__":
    rc = 1
    try:
        rc = asyncio.run(main())
    except Failed as e:
        print(f"FAIL setup: {e}")
        try:
            asyncio.run(report())
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        server.kill()
    sys.exit(rc)
