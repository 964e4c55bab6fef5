/** What the checkpoint tests share: a ledger on one origin, a scope per session, publishing n summaries, refusals. */
import { expect } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { LedgerError } from '../../src/errors.js';
import { sampleSummary } from '../support/tmp.js';

export const ORIGIN = 'example.com/handoffs';

export const scope = (session: string) => ({ principal: 'alice', session, run: 'r1' });

export const open = (root: string, extra: Partial<Parameters<typeof openLedger>[0]> = {}) =>
  openLedger({ root, host: 'host-a', origin: ORIGIN, ...extra });

/** Publishes `n` summaries into `session`, one after another; their receipts. */
export async function publishMany(ledger: Ledger, session: string, n: number) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await ledger.publish(scope(session), sampleSummary(`${session}-${i}`)));
  return out;
}

/** The LedgerError `p` rejects with (it must reject with one). */
export async function refusal(p: Promise<unknown>): Promise<LedgerError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LedgerError);
  return err as LedgerError;
}
