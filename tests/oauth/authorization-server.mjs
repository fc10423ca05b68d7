// A local OAuth 2.1 authorization server for ahp's MCP authorization tests, built on the
// `oidc-provider` library (npm, pinned by .ci/oauth to 9.13.3), not on any ahp code.
//
// Usage: node authorization-server.mjs [port]      (or AS_PORT=...; default 0 = any free port)
// Listens on 127.0.0.1 only; prints `AS ready <issuer>` on stdout once it accepts requests.
//
// What it does:
// - issuer http://127.0.0.1:<port>; metadata (RFC 8414) at /.well-known/oauth-authorization-server
//   and /.well-known/openid-configuration;
// - open dynamic client registration (RFC 7591) at /reg, no initial access token; native
//   clients may register http://127.0.0.1:<any port>/... or http://localhost:... redirect URIs;
//   a client that registers a `scope` (the MCP Python SDK registers the scope it was first
//   challenged with) may later request only those: oidc-provider answers others invalid_scope;
// - authorization code flow only, PKCE S256 required for every client;
// - resource indicators (RFC 8707): a token requested with `resource=<http(s) URL>` is a JWT
//   access token (RFC 9068: header typ "at+jwt", alg ES256) whose `aud` is that URL and whose
//   `scope` claim holds the granted ones among ahp's scopes (transfer:read transfer:write
//   transfer:meter communication:read communication:manage); `sub` is always "alice";
// - the signing key is an ES256 (P-256) key generated at start-up, published at /jwks.
//
// Login and consent are automated, no forms: the interaction URL (/interaction/<uid>) logs in
// the fixed account `alice` and grants every scope and resource the authorization request
// asked for, then redirects back into the flow. A client just follows redirects (keeping
// cookies: oidc-provider binds the interaction to a cookie) from the authorization URL until it
// reaches its own redirect_uri, which carries `code`, `state` and `iss`.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';

const ACCOUNT = 'alice';
const RESOURCE_SCOPES = 'transfer:read transfer:write transfer:meter communication:read communication:manage';

const port = Number(process.argv[2] ?? process.env.AS_PORT ?? 0);
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), alg: 'ES256', use: 'sig' };

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  // offline_access lets a client ask for a refresh token; openid is oidc-provider's own.
  scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES.split(' ')],
  responseTypes: ['code'],
  clientDefaults: {
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    id_token_signed_response_alg: 'ES256',
    token_endpoint_auth_method: 'none',
  },
  enabledJWA: { idTokenSigningAlgValues: ['ES256'] },
  pkce: { required: () => true },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true, initialAccessToken: false },
    resourceIndicators: {
      enabled: true,
      // A token request that omits `resource` gets the one granted at authorization, if only one was.
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        if (!/^https?:\/\//.test(resourceIndicator)) throw new errors.InvalidTarget();
        return {
          scope: RESOURCE_SCOPES,
          audience: resourceIndicator,
          accessTokenTTL: 3600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  ttl: { AccessToken: 3600, AuthorizationCode: 60, Grant: 3600, Interaction: 600, Session: 3600, RefreshToken: 86400 },
});
const { Grant } = provider;

// The automated login + consent: the same steps as oidc-provider's devInteractions form
// submission, for the fixed account and everything asked for.
async function interaction(req, res) {
  const { prompt: { name, details }, grantId, session, params } = await provider.interactionDetails(req, res);
  if (name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT } }, { mergeWithLastSubmission: false });
    return;
  }
  if (name !== 'consent') throw new Error(`unexpected prompt ${name}`);
  const grant = grantId ? await Grant.find(grantId) : new Grant({ accountId: session.accountId, clientId: params.client_id });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

const handle = provider.callback();
server.on('request', (req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      console.error('interaction failed:', err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`interaction failed: ${err.message}\n`);
    });
    return;
  }
  handle(req, res);
});
provider.on('server_error', (_ctx, err) => console.error('server_error:', err));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
console.log(`AS ready ${issuer}`);
