/**
 * The adapter suite against the lowest versions of the optional peer SDKs that package.json's ranges admit
 * (test/adapter-peer-ranges.test.ts runs it): each SDK's bare name resolves to the copy installed in
 * HL_LOWEST_PEERS (a node_modules directory) instead of the repository's own.
 */
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

const dir = process.env.HL_LOWEST_PEERS;
if (!dir) throw new Error('HL_LOWEST_PEERS (a node_modules directory with the lowest peer SDKs) is not set');
const peers = ['openai', '@anthropic-ai/sdk', '@google/genai', 'ai'];

export default defineConfig({
  resolve: {
    // `find` as a pattern: the name itself or a subpath of it (`ai/test`), never another package that starts alike.
    alias: peers.map((name) => ({
      find: new RegExp(`^${name.replace(/[/@]/g, (c) => `\\${c}`)}(?=/|$)`),
      replacement: join(dir, name),
    })),
  },
  test: {
    include: ['test/adapters/*.test.ts', 'test/adapters/peer-versions.check.ts'],
    exclude: ['test/adapters/packaging.test.ts'],
    testTimeout: 60_000,
    pool: 'forks',
  },
});
