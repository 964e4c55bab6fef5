/**
 * The adapter suite against the lowest versions of the optional peer SDKs that package.json's ranges admit
 * (test/adapter-peer-ranges.test.ts runs it): each SDK's name, and any subpath of it (`ai/test`), is resolved from
 * the directory that holds HL_LOWEST_PEERS (a node_modules directory) instead of the repository, through the
 * package's own `exports`; `<sdk>/package.json` is that copy's manifest, so the run can check which one it loads.
 */
import { dirname, join } from 'node:path';
import { defineConfig } from 'vitest/config';

const dir = process.env.HL_LOWEST_PEERS;
if (!dir) throw new Error('HL_LOWEST_PEERS (a node_modules directory with the lowest peer SDKs) is not set');
/** The SDKs the parent installed there (HL_LOWEST_VERSIONS: name → version). */
const peers = Object.keys(JSON.parse(process.env.HL_LOWEST_VERSIONS ?? '{}') as Record<string, string>);
if (peers.length === 0) throw new Error('HL_LOWEST_VERSIONS (the SDKs installed in HL_LOWEST_PEERS) is not set');
/** The name itself or a subpath of it, never another package whose name starts alike (`@ai-sdk/…`, `aix`). */
const peerOf = (id: string) => peers.find((name) => id === name || id.startsWith(`${name}/`));

export default defineConfig({
  plugins: [
    {
      name: 'lowest-peers',
      enforce: 'pre',
      async resolveId(id) {
        const name = peerOf(id);
        if (name === undefined) return null;
        if (id === `${name}/package.json`) return join(dir, name, 'package.json');
        // As if imported by a file beside that node_modules (one that exists: Vite resolves a bare name from the
        // project root when the importer is not a file): its copy, its exports map.
        const resolved = await this.resolve(id, join(dirname(dir), 'package.json'), { skipSelf: true });
        if (!resolved) throw new Error(`lowest-peers: ${id} does not resolve from ${dir}`);
        return resolved;
      },
    },
  ],
  test: {
    include: ['test/adapters/*.test.ts', 'test/adapters/peer-versions.check.ts'],
    exclude: ['test/adapters/packaging.test.ts'],
    testTimeout: 60_000,
    pool: 'forks',
  },
});
