/**
 * HANDOFF_LEDGER_HASH naming a backend that cannot load on this machine (`native` without a prebuilt binary for the
 * platform, here made so by mocking the module away): the operator's setting to change, refused as USAGE (exit 2)
 * before anything is made, as a name that is no backend is — not an internal error (exit 70: "a bug, please report
 * it", with a stack).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { sampleSummary } from './support/tmp.js';

vi.mock('@napi-rs/blake-hash', () => {
  throw new Error('no prebuilt binary of @napi-rs/blake-hash for this platform');
});

const base = mkdtempSync(join(tmpdir(), 'hl-hash-backend-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('HANDOFF_LEDGER_HASH=native where the native backend cannot load', () => {
  it('is USAGE (exit 2) for a command on a store, verify and demo, with nothing made', async () => {
    const root = join(base, 'store');
    for (const argv of [
      ['init', '--root', root, '--host', 'h'],
      ['verify', join(base, 'no-bundle'), '--trust', join(base, 'no-trust.json')],
      ['demo', '--root', root],
    ]) {
      const c = captureIo({ env: { HANDOFF_LEDGER_HASH: 'native' } });
      const code = await main(argv, c.io);
      expect(code, `${argv[0]}: ${c.stderr()}`).toBe(2);
      expect(c.stderr(), argv[0]).toMatch(/^handoff-ledger: USAGE: HANDOFF_LEDGER_HASH=native: /);
      expect(c.stderr(), argv[0]).not.toContain('internal error');
    }
    expect(existsSync(root)).toBe(false);
  });

  it('is judged by publish before it reads its summary, as the name is', async () => {
    const root = join(base, 'publish');
    const c = captureIo({ env: { HANDOFF_LEDGER_HASH: 'native' } });
    const stdin = Readable.from([JSON.stringify(sampleSummary('unread'))]);
    const argv = ['publish', '--root', root, '--host', 'h', '--principal', 'a', '--session', 's', '--run', 'r'];
    expect(await main(argv, { ...c.io, stdin })).toBe(2);
    expect(c.stderr()).toMatch(/^handoff-ledger: USAGE: HANDOFF_LEDGER_HASH=native: /);
    expect(stdin.readableDidRead).toBe(false);
    expect(existsSync(root)).toBe(false);
  });

  it('leaves auto to fall back, as ever', async () => {
    const root = join(base, 'auto');
    const c = captureIo({ env: { HANDOFF_LEDGER_HASH: 'auto' } });
    expect(await main(['init', '--root', root, '--host', 'h', '--json'], c.io), c.stderr()).toBe(0);
    expect(JSON.parse(c.stdout())).toMatchObject({ hash: 'wasm' });
  });
});
