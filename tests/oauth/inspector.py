"""The official MCP Inspector's web UI, driven in headless Chromium, against `ahp serve --http`.

Usage: inspector.py INSPECTOR_URL AHP_BASE ISSUER OTHER_PAGE WORK_DIR

INSPECTOR_URL is the URL the Inspector printed (with its MCP_INSPECTOR_API_TOKEN); AHP_BASE is
ahp's `http://host:port`, served with `--allow-origin` the Inspector's origin; ISSUER is the
authorization server (tests/oauth/authorization-server.mjs: login and consent automated);
OTHER_PAGE is a page of an origin ahp does not allow. Chromium's profile goes to WORK_DIR, and
the id of the process group chromedriver and Chromium run in to WORK_DIR/chromedriver.pgid, for
the caller's cleanup.

What a user does: add a server by hand (ahp's /mcp, Streamable HTTP), connect — the Inspector
answers the 401 with the OAuth flow: metadata, dynamic client registration, then the browser
goes to the authorization server and back to the Inspector's /oauth/callback — and open the
Tools tab. Then the token the Inspector holds is read from its Connection Info and checked:
an ES256 JWT for ahp's /mcp, refused by /mcp/conversations. Last, the browser itself calls ahp
from the Inspector's page (CORS for the allowed origin) and from OTHER_PAGE (refused).

One line per check; the first failure ends the run with exit code 1 (and prints the page).
"""

import base64
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import ElementClickInterceptedException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

# The six transfer tools ahp serves at /mcp.
TRANSFER_TOOLS = ["activate", "get_status", "provision_runtime", "push_state", "report_usage", "snapshot_state"]
# Longest wait for one UI step (the OAuth flow is one step: a few redirects on loopback).
STEP_SECONDS = 30

inspector_url, base, issuer, other_page, work = sys.argv[1:6]
mcp = f"{base}/mcp"
inspector = urllib.parse.urlsplit(inspector_url)
inspector_origin = f"{inspector.scheme}://{inspector.netloc}"


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={work}/chromium"]:
        options.add_argument(arg)
    # The navigations the OAuth flow makes, from Chromium's own log.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    # chromedriver and Chromium in a process group of their own, which the caller kills.
    service = Service("/usr/bin/chromedriver", popen_kw={"start_new_session": True})
    driver = webdriver.Chrome(service=service, options=options)
    with open(f"{work}/chromedriver.pgid", "w") as f:
        f.write(str(service.process.pid))
    return driver


def wait(d, condition, what):
    try:
        return WebDriverWait(d, STEP_SECONDS).until(condition)
    except TimeoutException:
        raise Failed(f"waited {STEP_SECONDS}s for {what}")


def button(d, text, scope=None):
    xpath = f".//button[normalize-space()='{text}']"
    return wait(scope or d, EC.element_to_be_clickable((By.XPATH, xpath)), f"the button {text!r}")


def press(d, element):
    """Clicks `element` as a user would; when a card still settling or a toast covers it (the
    click lands on the other element), the click goes to the element itself."""
    try:
        element.click()
    except ElementClickInterceptedException:
        d.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].click()", element)


def add_server(d):
    d.get(inspector_url)
    press(d, button(d, "Add Servers"))
    press(d, button(d, "+ Add manually"))
    dialog = wait(d, EC.visibility_of_element_located((By.CSS_SELECTOR, "[role=dialog]")), "the Add dialog")
    dialog.find_element(By.XPATH, ".//label[normalize-space()='Server ID *']/following::input[1]").send_keys("ahp")
    dialog.find_element(By.XPATH, ".//label[normalize-space()='Transport']/following::input[1]").click()
    wait(d, EC.element_to_be_clickable((By.XPATH, "//*[@role='option'][normalize-space()='streamable-http']")),
         "the transport option streamable-http").click()
    url = wait(dialog, lambda s: s.find_element(By.XPATH, ".//label[normalize-space()='URL *']/following::input[1]"),
               "the URL field")
    url.send_keys(mcp)
    press(d, button(d, "Add", dialog))
    card = wait(d, EC.presence_of_element_located(
        (By.XPATH, "//*[normalize-space(text())='ahp']/ancestor::*[.//*[normalize-space(text())='Streamable HTTP']][1]")),
        "the server card")
    shown = card.get_attribute("textContent")
    check(mcp in shown, f"the card shows no {mcp}: {shown!r}")
    return f"server 'ahp' added by hand: {mcp}, Streamable HTTP"


def connect(d):
    switch = d.find_element(By.CSS_SELECTOR, "input[aria-label='Connect or disconnect \"ahp\"']")
    d.execute_script("arguments[0].click()", switch)  # Mantine's switch hides its input
    # The page goes to the authorization server and comes back: the header is found anew each time.
    def status(_):
        try:
            header = d.find_element(By.CSS_SELECTOR, "[data-testid=connection-status]")
            state = header.get_attribute("data-status")
            return (state, header.get_attribute("data-error-message")) if state in ("connected", "error") else None
        except WebDriverException:
            return None

    state, error = wait(d, status, "the connection")
    check(state == "connected", f"connection failed: {error}")
    return "connected"


def oauth_flow(d):
    """The flow the browser went through, from its navigations."""
    navigations = []
    for entry in d.get_log("performance"):
        m = json.loads(entry["message"])["message"]
        if m["method"] == "Network.requestWillBeSent" and m["params"].get("type") == "Document":
            navigations.append(urllib.parse.urlsplit(m["params"]["request"]["url"]))
    authorize = [u for u in navigations if f"{u.scheme}://{u.netloc}" == issuer and u.path == "/auth"]
    check(authorize, f"the browser never reached {issuer}/auth: {[u.geturl()[:80] for u in navigations]}")
    q = dict(urllib.parse.parse_qsl(authorize[0].query))
    check(q.get("code_challenge_method") == "S256" and q.get("code_challenge"), f"no PKCE S256: {q}")
    check(q.get("resource") == mcp, f"authorization resource {q.get('resource')!r}, not {mcp}")
    callback = f"{inspector_origin}/oauth/callback"
    check(q.get("redirect_uri") == callback, f"redirect_uri {q.get('redirect_uri')!r}, not {callback}")
    back = [u for u in navigations if f"{u.scheme}://{u.netloc}{u.path}" == callback]
    check(back, "the browser never came back to the Inspector's callback")
    r = dict(urllib.parse.parse_qsl(back[0].query))
    check(r.get("code") and r.get("iss") == issuer, f"callback without a code from {issuer}: {r}")
    interactions = sum(1 for u in navigations if u.path.startswith("/interaction/"))
    return (f"browser: {issuer}/auth (PKCE S256, resource={mcp}, scope={q.get('scope')!r}) → "
            f"{interactions} login/consent pages → {callback} with a code")


def tools(d):
    press(d, wait(d, EC.element_to_be_clickable((By.XPATH, "//header//*[normalize-space(text())='Tools']")), "the Tools tab"))
    screen = wait(d, EC.presence_of_element_located((By.CSS_SELECTOR, "[data-testid=tools-screen][data-tool-count]")),
                  "the tools screen")
    wait(d, lambda _: screen.get_attribute("data-tool-count") == str(len(TRANSFER_TOOLS)),
         f"{len(TRANSFER_TOOLS)} tools (shows {screen.get_attribute('data-tool-count')})")
    # textContent, not .text: Selenium's .text is the *visible* text, '' for an item a settling
    # card still covers (CI once read ['', 'get_status', …] from a screen that listed all six).
    def listed():
        return sorted(e.get_attribute("textContent").strip()
                      for e in screen.find_elements(By.CSS_SELECTOR, "button.list-item p"))
    try:
        WebDriverWait(d, STEP_SECONDS).until(lambda _: listed() == TRANSFER_TOOLS)
    except TimeoutException:
        pass
    names = listed()
    check(names == TRANSFER_TOOLS, f"tools {names}, not {TRANSFER_TOOLS}")
    return f"Tools tab lists {', '.join(names)}"


def decode(part):
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def token(d):
    """The access token the Inspector holds, from its Connection Info."""
    press(d, wait(d, EC.element_to_be_clickable((By.XPATH, "//header//*[normalize-space(text())='Servers']")),
                 "the Servers tab"))
    press(d, button(d, "Connection Info"))
    dialog = wait(d, EC.visibility_of_element_located((By.CSS_SELECTOR, "[role=dialog]")), "Connection Info")
    wait(d, lambda _: "AUTHORIZED" in dialog.text, "OAuth status AUTHORIZED")

    def shown_tokens():
        return [w for w in dialog.get_attribute("innerText").split() if w.count(".") == 2 and w.startswith("eyJ")]
    try:
        WebDriverWait(d, STEP_SECONDS).until(lambda _: shown_tokens())
    except TimeoutException:
        pass
    jwts = shown_tokens()
    check(len(jwts) == 1, f"no access token in Connection Info: {dialog.text[-400:]!r}")
    header, claims = decode(jwts[0].split(".")[0]), decode(jwts[0].split(".")[1])
    check(header.get("alg") == "ES256" and header.get("typ") == "at+jwt", f"token header {header}")
    check(claims.get("aud") == mcp and claims.get("iss") == issuer and claims.get("sub") == "alice", f"claims {claims}")
    check("Dynamic (DCR)" in dialog.text, "the client was not registered dynamically")
    press(d, dialog.find_element(By.CSS_SELECTOR, "button[aria-label=Close]"))
    return jwts[0], (f"Connection Info: AUTHORIZED, client registration Dynamic (DCR), token ES256 at+jwt "
                     f"aud={claims['aud']} iss={claims['iss']} sub={claims['sub']} scope={claims.get('scope')!r}")


def post(url, bearer):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ci", "version": "1"}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {bearer}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=10) as r:
            return r.status, ""
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("WWW-Authenticate", "")


def audience(jwt):
    status, _ = post(mcp, jwt)
    check(status == 200, f"{mcp} refused the Inspector's token: HTTP {status}")
    status, challenge = post(f"{base}/mcp/conversations", jwt)
    check(status == 401 and 'error="invalid_token"' in challenge, f"/mcp/conversations answered {status} {challenge}")
    return f"the token opens {mcp} (200) and not {base}/mcp/conversations (401 invalid_token)"


# The browser's own calls to ahp: the metadata, /mcp without and with the token. Each result is
# what the page could read, or the error the browser gave it.
BROWSER_CALLS = """
const [base, jwt, done] = arguments;
const init = {method: 'initialize', params: {protocolVersion: '2025-11-25', capabilities: {},
  clientInfo: {name: 'page', version: '1'}}, jsonrpc: '2.0', id: 1};
const post = (bearer) => fetch(base + '/mcp', {method: 'POST', body: JSON.stringify(init), headers: Object.assign(
  {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream',
   'MCP-Protocol-Version': '2025-11-25'}, bearer ? {'Authorization': 'Bearer ' + bearer} : {})});
const read = (p) => p.then(async (r) => ({status: r.status, www: r.headers.get('www-authenticate'),
  session: r.headers.get('mcp-session-id'), body: (await r.text()).slice(0, 4000)}), (e) => ({error: String(e)}));
Promise.all([read(fetch(base + '/.well-known/oauth-protected-resource/mcp')), read(post(null)), read(post(jwt))])
  .then(done);
"""


def browser_calls(d, jwt):
    d.set_script_timeout(STEP_SECONDS)
    prm, anonymous, authorized = d.execute_async_script(BROWSER_CALLS, base, jwt)
    check(prm.get("status") == 200 and json.loads(prm["body"]).get("resource") == mcp, f"metadata: {prm}")
    check(anonymous.get("status") == 401 and "resource_metadata=" in (anonymous.get("www") or ""), f"no token: {anonymous}")
    check(authorized.get("status") == 200 and authorized.get("session"), f"with the token: {authorized}")
    line = (f"from the Inspector's page ({inspector_origin}, allowed): metadata read, /mcp 401 with its challenge "
            f"readable, 200 with the token and Mcp-Session-Id readable")
    d.get(other_page)
    refused = d.execute_async_script(BROWSER_CALLS, base, jwt)
    check(all("error" in r for r in refused), f"a page of another origin read ahp's answers: {refused}")
    other = urllib.parse.urlsplit(other_page)
    return f"{line}; from {other.scheme}://{other.netloc} (not allowed): all three refused by the browser ({refused[0]['error']})"


def main():
    d = browser()
    step = "start"
    try:
        for step, run in [("add", add_server), ("connect", connect), ("oauth", oauth_flow), ("tools", tools)]:
            print(f"ok   {step}: {run(d)}", flush=True)
        step = "token"
        jwt, line = token(d)
        print(f"ok   token: {line}", flush=True)
        step = "audience"
        print(f"ok   audience: {audience(jwt)}", flush=True)
        step = "cors"
        print(f"ok   cors: {browser_calls(d, jwt)}", flush=True)
    except Exception as e:  # noqa: BLE001 — any failure is reported as the step's
        print(f"FAIL {step}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        try:
            print(f"--- page at {d.current_url}\n{d.find_element(By.TAG_NAME, 'body').text[:2000]}")
        except Exception:  # noqa: BLE001
            pass
        return 1
    finally:
        d.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
