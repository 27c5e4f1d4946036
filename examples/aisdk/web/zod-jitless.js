// Part of ai-client.entry.js (build.sh bundles it; it is not served): the
// first module of the bundle, so that zod is jitless before the ai
// package builds its schemas.
//
// zod, which the ai package validates the stream with, probes whether it
// may compile its checks with new Function when it builds an object
// schema: under the page's Content-Security-Policy (no 'unsafe-eval') the
// browser reports that probe as a violation, although zod catches it.
// Jitless, zod never tries.
import { config } from 'zod/v4/core';

config({ jitless: true });
