// Preloaded with `node -r` when the tests start an npm MCP server over HTTP.
//
// The reference servers call listen(port) without a host, which binds every
// interface, and offer no setting for the address. This file wraps
// net.Server's listen so that whatever address the server asks for (none, a
// host name, or an options object), it listens on 127.0.0.1 only: a test
// server must never be reachable from outside the machine.
'use strict';

const net = require('node:net');

const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    // listen({port, host, ...}): replace the host, keep the rest. A handle
    // or a Unix socket path (an object without a port) is left alone.
    if (first.port !== undefined) args[0] = { ...first, host: '127.0.0.1' };
  } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback]): set or insert the host.
    if (typeof args[1] === 'string') args[1] = '127.0.0.1';
    else args.splice(1, 0, '127.0.0.1');
  } else if (args.length === 0 || typeof first === 'function') {
    // listen([callback]): a free port, on loopback.
    args.unshift(0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
