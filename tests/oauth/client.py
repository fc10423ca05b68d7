"""Drive the official MCP Python SDK's OAuth client (mcp==2.3.0) against an MCP server.

Usage: client.py URL [--scopes "S ..." [--allow-step-up]] [--call TOOL JSON]...
                     [--mode legacy|auto|2026-07-28] [--show-token]

Connects to URL (Streamable HTTP) through `mcp.client.auth.OAuthClientProvider`, which does the
whole authorization itself: the 401 challenge, protected resource metadata (RFC 9728),
authorization server metadata, dynamic client registration, the authorization code flow with
PKCE and the RFC 8707 `resource` parameter, and step-up on 403 insufficient_scope. Then it
initializes, lists the tools and calls each `--call TOOL JSON` in order (default: none).

No browser: the redirect handler follows the authorization URL with an httpx2 client (the SDK's
HTTP library; cookies kept, redirects followed one by one) until it reaches the registered
redirect_uri, and the callback handler hands the SDK the `code`, `state` and `iss` found there.
The authorization server must therefore log in and consent without a form (as
tests/oauth/authorization-server.mjs does).

--scopes: the SDK ignores a client's own scope when the server names one (its scope selection is
the WWW-Authenticate `scope`, else the metadata's `scopes_supported`), so a client limited to some
scopes is modelled here, on the user-agent side: the redirect handler rewrites the `scope` of every
authorization request the SDK makes to these scopes: all of them (the user never consents to more,
so a step-up the SDK attempts on 403 insufficient_scope gets no more either), or with
--allow-step-up only the first one (a step-up goes out as the SDK makes it).

Prints one JSON object on stdout: `tools` (names), `results` (one per call: tool, isError,
structuredContent, text), `authorizations` (per authorization request: the scope and resource the
SDK asked for, the scope sent, the scope granted), `token` (the last access token's JOSE header and
claims, decoded without verification; with --show-token also the raw `access_token`), `http`
(every request the SDK's HTTP client made: method, URL, status, WWW-Authenticate, and the form
fields of token requests), and `error` on failure.

Exits 0 if everything succeeded (a tool result with isError still counts as reaching the tool), 1
otherwise, with the error on stderr as well.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import sys
import traceback
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit, urlunsplit

import anyio
import httpx2
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class InMemoryTokenStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """The redirect and callback handlers: follow the authorization URL to the redirect_uri."""

    def __init__(
        self, redirect_uri: str, scopes: str | None, allow_step_up: bool, authorizations: list[dict[str, Any]]
    ) -> None:
        self.redirect_uri = redirect_uri
        self.scopes = scopes
        self.allow_step_up = allow_step_up
        self.authorizations = authorizations
        self.result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        self.result = None
        parts = urlsplit(authorization_url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        record: dict[str, Any] = {
            "sdk_scope": query.get("scope"),
            "resource": query.get("resource"),
            "code_challenge_method": query.get("code_challenge_method"),
            "prompt": query.get("prompt"),
        }
        if self.scopes is not None and not (self.allow_step_up and self.authorizations):
            query["scope"] = self.scopes
            authorization_url = urlunsplit(parts._replace(query=urlencode(query)))
        record["sent_scope"] = query.get("scope")
        self.authorizations.append(record)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            url = authorization_url
            for _ in range(20):
                response = await browser.get(url)
                location = response.headers.get("location")
                if response.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise RuntimeError(
                        f"authorization stopped at {url} with HTTP {response.status_code}: {response.text[:500]}"
                    )
                url = urljoin(url, location)
                if url.split("?", 1)[0] == self.redirect_uri:
                    params = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
                    if "error" in params:
                        raise RuntimeError(f"authorization refused: {params}")
                    self.result = AuthorizationCodeResult(
                        code=params["code"], state=params.get("state"), iss=params.get("iss")
                    )
                    return
            raise RuntimeError("authorization did not reach the redirect_uri in 20 redirects")

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("no authorization response")
        return self.result


class TracingTransport(httpx2.AsyncBaseTransport):
    """Records every request the SDK's HTTP client sends and the status it gets."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.log = log

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        entry: dict[str, Any] = {"method": request.method, "url": str(request.url)}
        if request.method == "POST" and request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            form = {k: v[-1] for k, v in parse_qs(request.content.decode()).items()}
            entry["form"] = {k: form[k] for k in ("grant_type", "resource", "scope", "code_verifier") if k in form}
            if "code_verifier" in entry["form"]:
                entry["form"]["code_verifier"] = f"<{len(form['code_verifier'])} chars>"
        elif request.method == "POST" and request.content:
            try:
                body = json.loads(request.content)
                entry["rpc"] = body.get("method") if isinstance(body, dict) else None
                if isinstance(body, dict) and body.get("method") == "tools/call":
                    entry["tool"] = body.get("params", {}).get("name")
                if "redirect_uris" in (body if isinstance(body, dict) else {}):
                    entry["registration"] = body
            except ValueError:
                pass
        entry["has_bearer"] = request.headers.get("authorization", "").startswith("Bearer ")
        response = await self.inner.handle_async_request(request)
        entry["status"] = response.status_code
        if "www-authenticate" in response.headers:
            entry["www_authenticate"] = response.headers["www-authenticate"]
        self.log.append(entry)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def decode_jwt(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None

    def part(s: str) -> Any:
        return json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))

    return {"header": part(parts[0]), "claims": part(parts[1])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    storage = InMemoryTokenStorage()
    # Nothing listens here: the headless browser stops at the redirect to it.
    redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
    browser = HeadlessBrowser(redirect_uri, args.scopes, args.allow_step_up, summary["authorizations"])
    auth = OAuthClientProvider(
        server_url=args.url,
        client_metadata=OAuthClientMetadata(
            client_name="ahp oauth test (mcp python sdk)",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    try:
        async with httpx2.AsyncClient(
            auth=auth,
            transport=TracingTransport(summary["http"]),
            timeout=httpx2.Timeout(30, read=300),
        ) as http:
            async with Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
                summary["protocol_version"] = client.protocol_version
                tools = await client.list_tools()
                summary["tools"] = [t.name for t in tools.tools]
                for name, raw in args.call or []:
                    result = await client.call_tool(name, json.loads(raw))
                    text = [c.text for c in result.content if getattr(c, "type", None) == "text"]
                    summary["results"].append(
                        {
                            "tool": name,
                            "isError": bool(result.is_error),
                            "structuredContent": result.structured_content,
                            "text": "\n".join(text),
                        }
                    )
    finally:
        for record, token in zip(summary["authorizations"], storage.history):
            record["granted_scope"] = token.scope
            record["refresh_token"] = token.refresh_token is not None
        if storage.tokens is not None:
            summary["token"] = decode_jwt(storage.tokens.access_token)
            if args.show_token:
                summary["access_token"] = storage.tokens.access_token
        if storage.client_info is not None:
            summary["client_id"] = storage.client_info.client_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parser.add_argument("--scopes", help="narrow every authorization request to these space-separated scopes")
    parser.add_argument("--allow-step-up", action="store_true", help="narrow only the first authorization")
    parser.add_argument("--call", nargs=2, action="append", metavar=("TOOL", "JSON"), help="call TOOL with JSON args")
    parser.add_argument("--show-token", action="store_true", help="include the raw access token in the summary")
    parser.add_argument("--mode", default="legacy", help="legacy (initialize, the default), auto, or 2026-07-28")
    args = parser.parse_args()
    summary: dict[str, Any] = {"url": args.url, "tools": [], "results": [], "authorizations": [], "http": []}
    code = 0
    try:
        anyio.run(run, args, summary)
    except BaseException as e:  # noqa: BLE001 - report whatever stopped the flow
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        summary["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exception(e, file=sys.stderr)
        print(f"error: {summary['error']}", file=sys.stderr)
        code = 1
    print(json.dumps(summary, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
