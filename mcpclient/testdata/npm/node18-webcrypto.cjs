// Preloaded with `node -r` when the tests start an npm MCP server.
//
// The reference servers use the Web Crypto global (crypto.randomUUID for
// session ids), which Node.js has by default only from version 19 on. On
// Node 18, the version Debian 12 packages, the streamable HTTP transport
// otherwise fails every request with "crypto is not defined". Newer Node
// versions already have the global, and this file then does nothing.
'use strict';

if (typeof globalThis.crypto === 'undefined') {
  globalThis.crypto = require('node:crypto').webcrypto;
}
