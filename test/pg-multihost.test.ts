/**
 * Scale-out: two Node processes acting as two hosts, each with its own key,
 * publish concurrently into the same sessions through one PostgreSQL database. Chains must stay
 * linear and verifying, every manifest attributed to the host that signed it, resume on either host
 * must return the latest summary, an export from the database must verify offline, and a database
 * restart mid-run must fail in-flight publishes with STORAGE_FAILED while losing nothing acknowledged.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { openPostgresBackends } from '../src/ledger/pg-backend.js';
import { exportBundle } from '../src/ops/export.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { mergeTrust, type TrustStore } from '../manifests/format/trust.js';
import { verifyBundle } from '../manifests/audit/verify-chain.js';
import { nodeVerifier } from '../manifests/crypto/ed25519.node.js';
import { describePostgres } from './support/postgres.js';
import { tempDir } from './support/tmp.js';

const HOST_SCRIPT = fileURLToPath(new URL('./support/pg-host.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/src/ledger/pg-backend.js', import.meta.url));
const SESSIONS = ['s0', 's1', 's2'];

type Msg =
  | {
      type: 'ack';
      host: string;
      marker: string;
      session: string;
      seq: number;
      id: string;
      digest: string;
      lostRaces: number;
    }
  | { type: 'fail'; host: string; marker: string; session: string; code: string; error: string }
  | { type: 'resumed'; host: string; session: string; seq: number; id: string; task: string }
  | { type: 'stopped' | 'closed'; host: string };

class HostProcess {
  readonly messages: Msg[] = [];
  private stderr = '';
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];

  constructor(config: object) {
    this.child = spawn(process.execPath, [HOST_SCRIPT, JSON.stringify(config)]);
    this.child.stderr.on('data', (d) => (this.stderr += d));
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      this.messages.push(JSON.parse(line) as Msg);
      for (const w of this.waiters.splice(0)) w();
    });
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
    void this.exited.then(() => this.waiters.splice(0).forEach((w) => w()));
  }

  count(type: Msg['type']): number {
    return this.messages.filter((m) => m.type === type).length;
  }

  /** Appends this host lost to the other host (CHAIN_CONFLICT) and retried. */
  lostRaces(): number {
    return this.messages.reduce((n, m) => n + (m.type === 'ack' ? m.lostRaces : 0), 0);
  }

  /** Resolves once `predicate` holds; rejects (with the host's stderr) if the process exits first. */
  async until(predicate: () => boolean, what: string, timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (this.child.exitCode !== null || Date.now() > deadline) {
        const last = this.messages.slice(-5).map((m) => JSON.stringify(m));
        throw new Error(
          `host never reached "${what}" (exit ${this.child.exitCode}); last messages:\n${last.join('\n')}\nstderr:\n${this.stderr}`,
        );
      }
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 500);
      });
    }
  }

  send(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  async finish(): Promise<void> {
    this.child.stdin.end();
    const code = await this.exited;
    if (code !== 0) throw new Error(`host exited with ${code}; stderr:\n${this.stderr}`);
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

describePostgres('two hosts sharing one PostgreSQL database', (pg) => {
  let schemas = 0;

  /** Runs both hosts until each has `acks` acknowledged publishes (after `midRun`, if given), then resumes on both. */
  async function runTwoHosts(options: { acks: number; midRun?: () => Promise<void> }) {
    if (!existsSync(BUILT)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    const schema = `mh${process.pid}_${schemas++}`;
    const connectionString = pg.connectionString;
    const hosts = [
      { host: 'host-a', root: tempDir('hl-host-a-') },
      { host: 'host-b', root: tempDir('hl-host-b-') },
    ];
    // Each host's key is created in its own root; every host trusts both keys.
    const trusts: TrustStore[] = [];
    for (const h of hosts) {
      const ledger = await openLedger({
        ...h,
        ...(await openPostgresBackends({ connectionString, schema })),
        onNotice: () => {},
      });
      trusts.push(ledger.trustStore());
      await ledger.close();
    }
    const trust = mergeTrust(...trusts);
    const procs = hosts.map(
      (h) => new HostProcess({ ...h, connectionString, schema, trust, sessions: SESSIONS, workers: 2 }),
    );
    try {
      await Promise.all(procs.map((p) => p.until(() => p.count('ack') >= options.acks, `${options.acks} acks`)));
      // Run on until the hosts have really raced for one head (and lost, and retried) a few times.
      const raced = () => procs.reduce((n, p) => n + p.lostRaces(), 0) >= 3;
      await procs[0]!.until(raced, 'three lost races');
      if (options.midRun) {
        await options.midRun();
        const base = procs.map((p) => p.count('ack'));
        await Promise.all(
          procs.map((p, i) => p.until(() => p.count('ack') >= base[i]! + options.acks, 'acks after the restart')),
        );
      }
      procs.forEach((p) => p.send('stop'));
      await Promise.all(procs.map((p) => p.until(() => p.count('stopped') === 1, 'stopped')));
      procs.forEach((p) => p.send('resume'));
      await Promise.all(procs.map((p) => p.finish()));
    } finally {
      procs.forEach((p) => p.kill());
    }
    return { schema, trust, messages: procs.flatMap((p) => p.messages) };
  }

  /** Everything the database holds, checked from a third process's point of view (this one). */
  async function checkDatabase(run: Awaited<ReturnType<typeof runTwoHosts>>) {
    const acks = run.messages.filter((m): m is Extract<Msg, { type: 'ack' }> => m.type === 'ack');
    const fails = run.messages.filter((m): m is Extract<Msg, { type: 'fail' }> => m.type === 'fail');
    const auditor = await openLedger({
      root: tempDir('hl-auditor-'),
      host: 'auditor',
      trust: run.trust,
      ...(await openPostgresBackends({ connectionString: pg.connectionString, schema: run.schema })),
      onNotice: () => {},
    });
    try {
      const chains = new Map<string, Awaited<ReturnType<typeof auditor.history>>>();
      // history() verifies every signature (each host's key), every prev link, and that the chain ends at its head.
      for (const session of SESSIONS) chains.set(session, await auditor.history({ principal: 'alice', session }));
      for (const [session, chain] of chains) {
        expect(
          chain.map((e) => e.manifest.seq),
          session,
        ).toEqual(chain.map((_, i) => i));
        for (const e of chain) {
          const key = run.trust.keys.find((k) => k.keyId === e.manifest.keyId);
          expect(key?.host, `${session}#${e.manifest.seq} signed by its host's key`).toBe(e.manifest.host);
        }
      }
      // Nothing acknowledged is lost, and each acknowledged manifest names the host that published it.
      for (const ack of acks) {
        const stored = chains.get(ack.session)![ack.seq];
        expect(stored?.id, `ack ${ack.marker}`).toBe(ack.id);
        expect(stored!.manifest.host).toBe(ack.host);
        expect(stored!.manifest.summary.digest).toBe(ack.digest);
      }
      // A publish without expectedPrev (the odd workers') that lost a race retried on a held head, which cannot be
      // lost: its caller never saw CHAIN_CONFLICT.
      for (const ack of acks)
        if (Number(ack.marker.split('/')[1]) % 2 === 1) expect(ack.lostRaces, `ack ${ack.marker}`).toBe(0);
      expect(new Set(acks.map((a) => a.host))).toEqual(new Set(['host-a', 'host-b']));
      for (const chain of chains.values()) expect(new Set(chain.map((e) => e.manifest.host)).size).toBe(2);

      // Resume on either host returns the latest summary of every session.
      for (const session of SESSIONS) {
        const head = chains.get(session)!.at(-1)!;
        const resumed = run.messages.filter((m) => m.type === 'resumed' && m.session === session);
        expect(resumed.map((m) => (m as Extract<Msg, { type: 'resumed' }>).id)).toEqual([head.id, head.id]);
      }

      // An export from the database (global log order, with blobs) verifies offline.
      const out = join(tempDir('hl-export-'), 'bundle');
      expect((await exportBundle(auditor, { out, withBlobs: true })).unavailableBlobs).toEqual([]);
      const report = await verifyBundle(await openBundleDir(out), {
        trust: mergeTrust(run.trust, auditor.trustStore()),
        verifier: nodeVerifier,
      });
      expect(report.findings).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.chains.map((c) => c.session).sort()).toEqual(SESSIONS);
      const total = [...chains.values()].reduce((n, c) => n + c.length, 0);
      expect(report.counts.lines).toBe(total);
      expect(report.counts.blobsChecked).toBe(
        new Set([...chains.values()].flat().map((e) => e.manifest.summary.digest)).size,
      );

      // Entries nobody acknowledged can only be publishes whose commit outcome the client could not learn.
      const acked = new Set(acks.map((a) => a.id));
      const unacked = [...chains.values()].flat().filter((e) => !acked.has(e.id));
      const failedMarkers = new Set(fails.map((f) => f.marker));
      for (const e of unacked) {
        const summary = JSON.parse(new TextDecoder().decode(await auditor.blobs.get(e.manifest.summary.digest))) as {
          task: string;
        };
        expect(failedMarkers.has(summary.task.replace('publish ', '')), `unacknowledged ${summary.task}`).toBe(true);
      }
      return { acks, fails, unacked, total };
    } finally {
      await auditor.close();
    }
  }

  it('keeps every chain linear and verifying while two hosts publish concurrently into the same sessions', async () => {
    const run = await runTwoHosts({ acks: 15 });
    const { acks, fails, unacked, total } = await checkDatabase(run);
    // The hosts raced for the same heads: the losers got CHAIN_CONFLICT and retried; no chain forked.
    expect(acks.reduce((n, a) => n + a.lostRaces, 0)).toBeGreaterThanOrEqual(3);
    expect(fails).toEqual([]);
    expect(unacked).toEqual([]);
    expect(total).toBeGreaterThanOrEqual(30);
  }, 180_000);

  it('fails in-flight publishes with STORAGE_FAILED across a database restart, then carries on, losing nothing acknowledged', async () => {
    const run = await runTwoHosts({ acks: 10, midRun: () => pg.cluster.restart() });
    const { fails, unacked } = await checkDatabase(run);
    // The restart must have hit publishes in flight, and those fail with the storage code only.
    expect(fails.length).toBeGreaterThan(0);
    expect([...new Set(fails.map((f) => f.code))]).toEqual(['STORAGE_FAILED']);
    expect(unacked.length).toBeLessThanOrEqual(fails.length);
  }, 180_000);
});
