#!/bin/sh
# Regenerates ai-client.js, the vendored browser build of the ai package's
# client that the page imports, from ai-client.entry.js with the pinned
# esbuild of ui/testdata/npm (install it there first: npm ci --no-fund
# --no-audit). The output is the same bytes for the same packages: commit it
# after a change of ui/testdata/npm/package-lock.json (a Go test of
# examples/aisdk compares the two).
#
# usage: examples/aisdk/web/build.sh [OUTFILE]   (default: ai-client.js here)
set -eu

web=$(cd "$(dirname "$0")" && pwd)
npm=$(cd "$web/../../../ui/testdata/npm" && pwd)
out=${1:-$web/ai-client.js}
case $out in /*) ;; *) out=$PWD/$out ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The entry is outside npm's folder: NODE_PATH makes esbuild find 'ai'.
cd "$web"
NODE_PATH="$npm/node_modules" "$npm/node_modules/.bin/esbuild" ai-client.entry.js \
	--bundle --format=esm --platform=browser --target=es2022 --minify \
	--log-level=warning --metafile="$tmp/meta.json" --outfile="$tmp/ai-client.js"

# The header names every package in the bundle, with its version and
# license, as their package.json files say, and the command.
node - "$tmp/meta.json" "$npm/node_modules" >"$tmp/header.js" <<'JS'
const fs = require('fs');
const path = require('path');
const [meta, modules] = process.argv.slice(2);
const inputs = Object.values(JSON.parse(fs.readFileSync(meta, 'utf8')).outputs)[0].inputs;
const pkgs = new Map();
for (const [file, v] of Object.entries(inputs)) {
  const m = file.match(/^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//);
  if (!m || v.bytesInOutput === 0) continue;
  // The inputs' paths are relative to the working folder, web/.
  const p = JSON.parse(fs.readFileSync(path.resolve(m[1], 'package.json'), 'utf8'));
  pkgs.set(`${p.name}@${p.version}`, p.license);
}
const ver = JSON.parse(fs.readFileSync(path.join(modules, 'esbuild', 'package.json'), 'utf8')).version;
const lines = [
  '// ai-client.js: the browser build of the ai package\'s client (AbstractChat,',
  '// DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses)',
  '// for examples/aisdk. Generated: do not edit.',
  '//',
  '// Packages (name@version license):',
  ...[...pkgs].sort(([a], [b]) => a < b ? -1 : 1).map(([p, l]) => `//   ${p} ${l}`),
  '//',
  `// Built with esbuild@${ver} by examples/aisdk/web/build.sh:`,
  '//   esbuild ai-client.entry.js --bundle --format=esm --platform=browser --target=es2022 --minify',
  '',
];
process.stdout.write(lines.join('\n'));
JS
cat "$tmp/header.js" "$tmp/ai-client.js" >"$out"
