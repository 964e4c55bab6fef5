import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ManifestLog } from '../../manifests/log/log.js';
import { LedgerError } from '../../src/errors.js';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { exportBundle, type ExportSource } from '../../src/ops/export.js';
import { sampleSummary, tempDir } from '../support/tmp.js';

/**
 * A filtered export reads a proof per exported manifest (inclusion) and per candidate session (session heads): on a
 * large log these loops are most of its work, and an abort (SIGINT on the CLI) must end them, not wait them out.
 */
async function ledgerOf(root: string, sessions: number, perSession: number): Promise<Ledger> {
  const ledger = await openLedger({ root, host: 'host-a', onNotice: () => {} });
  for (let s = 0; s < sessions; s++)
    for (let i = 0; i < perSession; i++)
      await ledger.publish({ principal: 'alice', session: `s${s}`, run: 'r1' }, sampleSummary(`${s}.${i}`));
  return ledger;
}

/** The ledger as an export source whose log counts the calls of `method` and aborts `abort` at the first one. */
function counting(
  ledger: Ledger,
  method: 'treeNodes' | 'sessionHeadNodes',
  abort: AbortController | undefined,
  snapshot: boolean,
): { source: ExportSource; calls: () => number } {
  let calls = 0;
  const log = new Proxy(ledger.log, {
    get(target, name) {
      if (name === 'readSnapshot' && !snapshot) return undefined;
      const v = Reflect.get(target, name, target) as unknown;
      if (typeof v !== 'function') return v;
      if (name !== method) return (v as (...a: unknown[]) => unknown).bind(target);
      return (...args: unknown[]) => {
        calls++;
        abort?.abort();
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as ManifestLog;
  const source: ExportSource = {
    host: ledger.host,
    log,
    blobs: ledger.blobs,
    checkpoint: () => ledger.checkpoint(),
  };
  return { source, calls: () => calls };
}

describe('export cancelled while it reads the proofs of a filtered bundle', () => {
  it('stops reading inclusion proofs at the abort (CANCELLED, nothing left)', async () => {
    const dir = tempDir();
    const ledger = await ledgerOf(join(dir, 'store'), 1, 24);
    try {
      const full = counting(ledger, 'treeNodes', undefined, true);
      await exportBundle(full.source, { out: join(dir, 'full'), session: 's0' });
      expect(full.calls()).toBeGreaterThanOrEqual(24); // a proof read per manifest
      const abort = new AbortController();
      const cut = counting(ledger, 'treeNodes', abort, true);
      const err = await exportBundle(cut.source, { out: join(dir, 'cut'), session: 's0', signal: abort.signal }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LedgerError);
      expect((err as LedgerError).code).toBe('CANCELLED');
      expect(cut.calls()).toBe(1); // the proof being read when the abort came, and no other
      expect(readdirSync(dir).sort()).toEqual(['full', 'store']);
    } finally {
      await ledger.close();
    }
  });

  it('stops proving session heads at the abort (CANCELLED, nothing left)', async () => {
    const dir = tempDir();
    const ledger = await ledgerOf(join(dir, 'store'), 16, 1);
    try {
      // Without a read snapshot the heads are proven from the log as the export reads it.
      const full = counting(ledger, 'sessionHeadNodes', undefined, false);
      await exportBundle(full.source, { out: join(dir, 'full'), principal: 'alice' });
      const abort = new AbortController();
      const cut = counting(ledger, 'sessionHeadNodes', abort, false);
      const err = await exportBundle(cut.source, {
        out: join(dir, 'cut'),
        principal: 'alice',
        signal: abort.signal,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LedgerError);
      expect((err as LedgerError).code).toBe('CANCELLED');
      // The session being proven when the abort came, and no more: of 16, each proven by about as many reads.
      expect(cut.calls()).toBeLessThanOrEqual(full.calls() / 8);
      expect(readdirSync(dir).sort()).toEqual(['full', 'store']);
    } finally {
      await ledger.close();
    }
  });
});
