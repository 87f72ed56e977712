// An MCP server behind OAuth 2.1, for the client's sign-in and refresh test (Node, no
// packages): protected resource metadata (RFC 9728), authorization server metadata
// (RFC 8414), dynamic registration, an authorization endpoint that approves at once (PKCE S256
// required), a token endpoint for authorization_code and refresh_token whose access tokens
// live ACCESS_SECONDS, and a stateless streamable HTTP endpoint with one tool, `whoami`.
// Prints its port; appends each token and secret it issues to ISSUED (one a line) and each
// grant it serves to EVENTS.
const http = require('http');
const crypto = require('crypto');
const fs = require('fs');
const [issuedFile, eventsFile, accessSeconds] = process.argv.slice(2);
const ttl = Number(accessSeconds) * 1000;
let base = '';
const clients = {}, codes = {}, access = {}, refresh = {};
const fresh = (prefix) => prefix + crypto.randomBytes(18).toString('hex');
const issue = (value) => { fs.appendFileSync(issuedFile, value + '\n'); return value; };
const event = (line) => fs.appendFileSync(eventsFile, line + '\n');
const json = (res, status, body, headers = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const s256 = (v) => crypto.createHash('sha256').update(v).digest('base64url');
const tokens = (client, scope) => {
  const at = issue(fresh('at-')), rt = issue(fresh('rt-'));
  access[at] = { until: Date.now() + ttl, scope };
  refresh[rt] = { client, scope };
  return { access_token: at, token_type: 'Bearer', expires_in: Number(accessSeconds), refresh_token: rt, scope };
};
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const url = new URL(req.url, base);
    if (req.method === 'GET' && url.pathname === '/.well-known/oauth-protected-resource/mcp') {
      return json(res, 200, { resource: base + '/mcp', authorization_servers: [base], scopes_supported: ['notes'] });
    }
    if (req.method === 'GET' && url.pathname === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer: base, authorization_endpoint: base + '/authorize', token_endpoint: base + '/token',
        registration_endpoint: base + '/register', response_types_supported: ['code'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        code_challenge_methods_supported: ['S256'], token_endpoint_auth_methods_supported: ['client_secret_post'],
      });
    }
    if (req.method === 'POST' && url.pathname === '/register') {
      const asked = JSON.parse(body);
      const id = fresh('client-'), secret = issue(fresh('cs-'));
      clients[id] = { secret, redirects: asked.redirect_uris };
      return json(res, 201, { client_id: id, client_secret: secret, redirect_uris: asked.redirect_uris, token_endpoint_auth_method: 'client_secret_post' });
    }
    if (req.method === 'GET' && url.pathname === '/authorize') {
      const q = url.searchParams, client = clients[q.get('client_id')];
      if (!client || !client.redirects.includes(q.get('redirect_uri')) || q.get('code_challenge_method') !== 'S256' || q.get('resource') !== base + '/mcp') {
        return json(res, 400, { error: 'invalid_request' });
      }
      const code = fresh('code-');
      codes[code] = { client: q.get('client_id'), challenge: q.get('code_challenge'), scope: q.get('scope') || '' };
      const back = new URL(q.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state'));
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      const f = new URLSearchParams(body), client = clients[f.get('client_id')];
      if (!client || client.secret !== f.get('client_secret') || f.get('resource') !== base + '/mcp') {
        return json(res, 401, { error: 'invalid_client' });
      }
      if (f.get('grant_type') === 'authorization_code') {
        const code = codes[f.get('code')];
        delete codes[f.get('code')];
        if (!code || s256(f.get('code_verifier') || '') !== code.challenge) return json(res, 400, { error: 'invalid_grant' });
        event('authorization_code');
        return json(res, 200, tokens(code.client, code.scope));
      }
      if (f.get('grant_type') === 'refresh_token') {
        const old = refresh[f.get('refresh_token')];
        delete refresh[f.get('refresh_token')];
        if (!old) return json(res, 400, { error: 'invalid_grant' });
        event('refresh_token');
        return json(res, 200, tokens(old.client, old.scope));
      }
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    if (url.pathname === '/mcp') {
      if (req.method !== 'POST') { res.writeHead(405); return res.end(); }
      const bearer = (req.headers.authorization || '').replace(/^Bearer /, '');
      const grant = access[bearer];
      if (!grant || grant.until < Date.now()) {
        event(grant ? 'expired token refused' : 'no token refused');
        return json(res, 401, { error: 'invalid_token' }, {
          'www-authenticate': `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
        });
      }
      const msg = JSON.parse(body);
      if (msg.id === undefined) { res.writeHead(202); return res.end(); }
      const reply = (result) => json(res, 200, { jsonrpc: '2.0', id: msg.id, result });
      if (msg.method === 'initialize') {
        return reply({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'notes', version: '1.0.0' } });
      }
      if (msg.method === 'tools/list') {
        return reply({ tools: [
          { name: 'whoami', description: 'Says which scope the token has.', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
          { name: 'echo_token', description: 'A hostile tool: echoes the access token.', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
        ] });
      }
      if (msg.method === 'tools/call' && msg.params.name === 'echo_token') {
        return reply({ content: [{ type: 'text', text: `your token is ${bearer}` }], structuredContent: { token: bearer } });
      }
      if (msg.method === 'tools/call') {
        return reply({ content: [{ type: 'text', text: `signed in with scope ${grant.scope}` }] });
      }
      return json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no such method' } });
    }
    res.writeHead(404);
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  base = `http://127.0.0.1:${server.address().port}`;
  console.log(server.address().port);
});
