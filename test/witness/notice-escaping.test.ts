/**
 * A witness's answer reaches the ledger's notices, which go to `onNotice` or, by default, console.warn: not only the
 * CLI, which escapes what it prints. The witness's words are escaped where the notice is made, so a refusal carrying
 * terminal escapes (clear the screen, print a fake verdict, reverse the text) reaches every receiver as inert text.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isTerminalSafe } from '../../manifests/encoding/printable.js';
import { openLedger } from '../../src/ledger/open.js';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../support/capture-io.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

const scope = { principal: 'alice', session: 's1', run: 'r1' };
const HOSTILE = '\u001b[2J\u001b[31mverdict: OK\u001b[0m \u202esdrawkcab\u0007';
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end(HOSTILE);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const refusal = (notices: string[]) => notices.find((n) => n.includes('refused the checkpoint'));

describe('a witness refusal carrying terminal escapes', () => {
  it.each([
    ['an onNotice of the caller’s', true],
    ['the default, console.warn', false],
  ])('reaches %s escaped', async (_, own) => {
    const notices: string[] = [];
    const warn = vi.spyOn(console, 'warn').mockImplementation((m: unknown) => void notices.push(String(m)));
    const ledger = await openLedger({
      root: join(tempDir(), 'store'),
      host: 'host-n',
      witnesses: { witnesses: [url], timeoutMs: 2000, retryMs: 60_000 },
      ...(own ? { onNotice: (m: string) => notices.push(m) } : {}),
    });
    try {
      await ledger.publish(scope, sampleSummary('refused with escapes'));
      await expect.poll(() => refusal(notices), { timeout: 15_000 }).toBeDefined();
      const notice = refusal(notices)!;
      expect(notice).toContain('403');
      // What to do about a 403, the refusal every `keys rotate` brings until the witness lists the new key, and every
      // host of a shared store whose checkpoint key it was never given (it spoke of `keys rotate` alone).
      expect(notice).toMatch(
        /: add this host's `keys vkey` to its logs.json and restart it; after `keys rotate`, the new one; each host of a shared store signs with its own\)$/,
      );
      expect(notice).toContain('\\x1b[2J\\x1b[31mverdict: OK\\x1b[0m \\u{202e}sdrawkcab\\x07');
      expect(isTerminalSafe(notice)).toBe(true);
      expect(notices.every((n) => isTerminalSafe(n) && !n.includes('\n'))).toBe(true);
    } finally {
      await ledger.close();
      warn.mockRestore();
    }
  });
});

describe('the CLI printing a witness refusal', () => {
  it('prints the notice escaped once: ESC reads as \\x1b, not as a backslash followed by x1b', async () => {
    const root = join(tempDir(), 'store');
    const env = { HANDOFF_LEDGER_ROOT: root, HANDOFF_LEDGER_HOST: 'h1' };
    expect(await main(['init', '--root', root, '--host', 'h1'], captureIo({ env }).io)).toBe(0);
    const summary = join(tempDir(), 's.json');
    writeFileSync(summary, JSON.stringify(sampleSummary('s')));
    const args = ['--root', root, '--host', 'h1'];
    expect(
      await main(
        ['publish', ...args, '--principal', 'a', '--session', 's', '--run', 'r', summary],
        captureIo({ env }).io,
      ),
    ).toBe(0);
    const c = captureIo({ env });
    await main(['checkpoint', ...args, '--witness', url], c.io);
    const line = c
      .stderr()
      .split('\n')
      .find((l) => l.includes('refused the checkpoint'));
    expect(line).toContain('403 \\x1b[2J\\x1b[31mverdict: OK\\x1b[0m \\u{202e}sdrawkcab\\x07');
    expect(isTerminalSafe(c.stderr())).toBe(true);
  }, 60_000);
});
