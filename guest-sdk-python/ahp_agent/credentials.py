"""Resolving the credential references of the session's MCP servers through the host's vault
(interface `credentials`). Keep a value in memory only: never log or checkpoint it.

    from ahp_agent import credentials, snapshot

    for server in snapshot.mcp_servers():
        try:
            token = credentials.resolve(server.cred_ref).text()
        except credentials.Error as e:
            print(f"{server.server}: {e.kind}")  # not-allowed, not-found, unavailable
"""

from wit_world.imports import credentials as _raw

from ._errors import AhpError, call


class Error(AhpError):
    """A resolution was refused (every refusal is audited): `kind` is `"not-allowed"`,
    `"not-found"` or `"unavailable"`."""


class Credential:
    """A resolved secret. Its `repr` never shows the value."""

    __slots__ = ("cred_ref", "value")

    def __init__(self, cred_ref, value):
        self.cred_ref = cred_ref
        self.value = value

    def text(self):
        """The value as UTF-8 text (`UnicodeDecodeError` if it is not)."""
        return self.value.decode("utf-8")

    def __repr__(self):
        return f"Credential(cred_ref={self.cred_ref!r}, value=<{len(self.value)} bytes>)"


def resolve(cred_ref):
    """Resolves `cred_ref` to its value (audited, without the value). At most 64 calls per
    turn; past that, `Error` of kind `"not-allowed"`."""
    raw = call(Error, _raw.resolve, cred_ref)
    return Credential(raw.cred_ref, bytes(raw.value))
