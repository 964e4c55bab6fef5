/**
 * Hosts whose clocks disagree, publishing to one session: a manifest is never dated before the head it links to
 * (the auditor's `TIME_REVERSED`), so two honest hosts a little apart (NTP keeps them milliseconds to seconds apart)
 * leave a chain every auditor passes. A head dated further ahead of the publishing host's clock than
 * MAX_HEAD_LEAD_MS is not followed: its manifest is dated by the host's own clock, the notice says why, and the
 * auditor sees the reversal. Both backends: one root opened by two hosts in turn, and two hosts sharing PostgreSQL.
 */
import { describe, expect, it } from 'vitest';
import type { Ledger } from '../src/ledger/ledger.js';
import { MAX_HEAD_LEAD_MS } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { verifyChain } from '../manifests/audit/verify-chain.js';
import type { TrustStore } from '../manifests/format/trust.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's', run: 'r' };

/** The createdAt of each manifest of session `s`, in seq order. */
async function datesOf(ledger: Ledger): Promise<string[]> {
  return (await ledger.history(scope)).map((h) => h.manifest.createdAt);
}

/** The auditor's findings on the whole log, under `trust`. */
async function audited(ledger: Ledger, trust: TrustStore): Promise<string[]> {
  const lines: string[] = [];
  for await (const e of ledger.log.entries()) lines.push(e.envelope);
  return (await verifyChain(lines, { trust })).findings.map((f) => `${f.code}@${f.seq}`);
}

const t0 = Date.parse('2026-12-04T10:00:00.000Z');

/** host-a publishes seq 0 of session s on `root` at t0, and closes the store. */
async function headByHostA(root: string): Promise<void> {
  const a = await openLedger({ root, host: 'host-a', clock: () => new Date(t0), onNotice: () => {} });
  await a.publish(scope, sampleSummary(1));
  await a.close();
}

describe('a host whose clock is behind the head it links to, embedded store', () => {
  it('dates its manifest at the head’s createdAt: no TIME_REVERSED for fsck or the auditor', async () => {
    const root = tempDir();
    await headByHostA(root);
    // Another host of the store, its clock 2 s behind (the old code dated its manifest 2 s before the head).
    const b = await openLedger({ root, host: 'host-b', clock: () => new Date(t0 - 2000), onNotice: () => {} });
    try {
      await b.publish(scope, sampleSummary(2));
      expect(await datesOf(b)).toEqual(['2026-12-04T10:00:00.000Z', '2026-12-04T10:00:00.000Z']);
      expect((await fsck(b)).findings).toEqual([]);
      expect(await audited(b, b.trustStore())).toEqual([]);
      // On its own head as well: the date it signed is remembered.
      await b.publish(scope, sampleSummary(3));
      expect((await datesOf(b))[2]).toBe('2026-12-04T10:00:00.000Z');
    } finally {
      await b.close();
    }
  });

  it(`does not follow a head dated more than ${MAX_HEAD_LEAD_MS / 60_000} min ahead: its own clock, a notice, and the auditor's TIME_REVERSED`, async () => {
    const root = tempDir();
    await headByHostA(root);
    const notices: string[] = [];
    const behind = t0 - MAX_HEAD_LEAD_MS - 1;
    const b = await openLedger({
      root,
      host: 'host-b',
      clock: () => new Date(behind),
      onNotice: (m) => notices.push(m),
    });
    try {
      await b.checkPublish(scope); // the notice is publish's: a check says nothing of the date
      expect(notices).toEqual([]);
      await b.publish(scope, sampleSummary(2));
      expect((await datesOf(b))[1]).toBe(new Date(behind).toISOString());
      expect(notices).toEqual([
        expect.stringMatching(
          /^publish: session s's head \(seq 0\) is dated 2026-12-04T10:00:00\.000Z, 300001 ms after this host's clock: this manifest is dated by the clock \(an auditor will see TIME_REVERSED\); check the hosts' clocks$/,
        ),
      ]);
      expect((await fsck(b)).findings).toEqual([expect.objectContaining({ code: 'TIME_REVERSED', seq: 1 })]);
      expect(await audited(b, b.trustStore())).toEqual(['TIME_REVERSED@1']);
    } finally {
      await b.close();
    }
  });

  it('says nothing of a head its own key signed, dated ahead of a clock stepped back since (its own floor dates it)', async () => {
    const root = tempDir();
    await headByHostA(root);
    const notices: string[] = [];
    const again = await openLedger({
      root,
      host: 'host-a',
      clock: () => new Date(t0 - 10 * 60_000),
      onNotice: (m) => notices.push(m),
    });
    try {
      await again.publish(scope, sampleSummary(2));
      // The key never signs before what it signed: no reversal, so no notice of one (the old code said one was coming).
      expect(await datesOf(again)).toEqual(['2026-12-04T10:00:00.000Z', '2026-12-04T10:00:00.000Z']);
      expect(notices.filter((n) => n.includes('TIME_REVERSED'))).toEqual([]);
      expect((await fsck(again)).findings).toEqual([]);
    } finally {
      await again.close();
    }
  });
});

describe('checkPublish dates as publish would', () => {
  it("refuses a key whose window closes between this host's clock and the head it would follow (KEY_EXPIRED, as publish)", async () => {
    const root = tempDir();
    await headByHostA(root);
    const first = await openLedger({ root, host: 'host-b', clock: () => new Date(t0 - 2000), onNotice: () => {} });
    const own = first.trustStore().keys.find((k) => k.host === 'host-b')!;
    await first.close();
    // host-b's key is valid until 1 s before the head's date: its clock (2 s behind) is inside the window, the date
    // its manifest would carry (the head's) is not.
    const b = await openLedger({
      root,
      host: 'host-b',
      clock: () => new Date(t0 - 2000),
      onNotice: () => {},
      trust: { version: 1, keys: [{ ...own, notAfter: new Date(t0 - 1000).toISOString() }] },
    });
    try {
      await expect(b.publish(scope, sampleSummary(2))).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
      await expect(b.checkPublish(scope)).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
    } finally {
      await b.close();
    }
  });
});

let schemas = 0;
const nextSchema = () => `skew${process.pid}_${schemas++}`;

describePostgres('hosts whose clocks disagree, sharing PostgreSQL', (pg) => {
  it('take turns on one session without ever dating a manifest before its head', async () => {
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    let now = Date.parse('2026-12-04T10:00:00.000Z');
    // h1's clock runs 1.5 s ahead of h2's; they publish in turn, each 1 ms after the other by real time.
    const root1 = tempDir();
    const h1Options = { root: root1, host: 'h1', postgres, clock: () => new Date(now), onNotice: () => {} };
    let h1 = await openLedger(h1Options);
    const h2 = await openLedger({
      root: tempDir(),
      host: 'h2',
      postgres,
      trust: h1.trustStore(),
      clock: () => new Date(now - 1500),
      onNotice: () => {},
    });
    // Each host trusts the other's key (each publishes on the other's heads, which resume, and so publish, verify).
    await h1.close();
    h1 = await openLedger({ ...h1Options, trust: h2.trustStore() });
    try {
      for (let i = 0; i < 6; i++) {
        await (i % 2 === 0 ? h1 : h2).publish(scope, sampleSummary(i));
        now += 1;
      }
      const dates = await datesOf(h2);
      expect(dates).toHaveLength(6);
      expect([...dates].sort()).toEqual(dates);
      expect((await fsck(h2)).findings).toEqual([]);
      expect(await audited(h2, h2.trustStore())).toEqual([]);
    } finally {
      await h2.close();
      await h1.close();
    }
  });
});
