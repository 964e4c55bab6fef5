/**
 * Run only by test/adapters/lowest.config.ts: each SDK the adapter suite loads there by its bare name is the copy in
 * HL_LOWEST_PEERS at the version asked for (HL_LOWEST_VERSIONS, name → version), not the repository's own.
 */
import { describe, expect, it } from 'vitest';

const expected = JSON.parse(process.env.HL_LOWEST_VERSIONS ?? '{}') as Record<string, string>;

describe('the peer SDKs under test', () => {
  it('are loaded from the lowest versions of the declared ranges', async () => {
    expect(Object.keys(expected).length).toBeGreaterThan(0);
    for (const [name, version] of Object.entries(expected)) {
      // Through the same resolution as the suite's own imports (the config's alias): not a path built here.
      const spec = `${name}/package.json`;
      const manifest = (await import(/* @vite-ignore */ spec)) as { default: { version: string } };
      expect(manifest.default.version, name).toBe(version);
    }
  });

  it('serve their code from those copies (the SDKs that export their VERSION)', async () => {
    for (const name of ['openai', '@anthropic-ai/sdk'].filter((n) => expected[n] !== undefined)) {
      const spec = `${name}/version`;
      const mod = (await import(/* @vite-ignore */ spec)) as { VERSION: string };
      expect(mod.VERSION, name).toBe(expected[name]);
    }
  });

  it("resolve a subpath through the package's exports (ai/test)", async () => {
    const spec = 'ai/test';
    const mod = (await import(/* @vite-ignore */ spec)) as Record<string, unknown>;
    expect(Object.keys(mod).length).toBeGreaterThan(0);
  });
});
