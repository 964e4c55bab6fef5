/** What the checkpoint tests share: a ledger on one origin, a scope per session, publishing n summaries, refusals. */
import { expect } from 'vitest';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { openLedger } from '../../src/ledger/open.js';
import { LevelManifestLog } from '../../manifests/log/level/log.js';
import type { ManifestLog } from '../../manifests/log/log.js';
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

/**
 * Stores `origin` as the log's name the way a log stored any valid name before new logs were held to `isNewOrigin`
 * (its own record write): what a store named with a bidi or format character then holds.
 */
export async function nameAsBefore(log: ManifestLog, origin: string): Promise<void> {
  await (log as unknown as { _origin(p: string): Promise<string> })._origin(origin);
}

/** Makes `root` an embedded store whose log is named `origin` as before the rule (nothing else in it yet). */
export async function embeddedNamedAsBefore(root: string, origin: string): Promise<void> {
  mkdirSync(join(root, 'manifests-v1'), { recursive: true, mode: 0o700 });
  const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
  try {
    await nameAsBefore(log, origin);
  } finally {
    await log.close();
  }
}

/** Where an embedded ledger's LevelDB log lives (its `manifests-v1/`). */
export const logLocation = (ledger: Ledger): string =>
  ((ledger.log as LevelManifestLog).raw as unknown as { location: string }).location;

/**
 * Edits a closed embedded store's LevelDB records behind the log's back (`undefined`: removed), as someone who can
 * write the storage would.
 */
export async function editClosedLog(
  location: string,
  change: (log: LevelManifestLog) => Promise<Record<string, string | undefined>>,
): Promise<void> {
  const log = await LevelManifestLog.open(location);
  try {
    const ops = await change(log);
    for (const [key, value] of Object.entries(ops))
      if (value === undefined) await log.raw.del(key);
      else await log.raw.put(key, value);
  } finally {
    await log.close();
  }
}
