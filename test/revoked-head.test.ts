/**
 * A session whose head a key revocation covers: resume refuses it (KEY_REVOKED), and so publish, checkPublish and
 * compact (before the model is asked) refuse to extend it with the same code, for the handoff they would write would
 * not resume either (resume verifies the head and the entry before it). Both backends; the revocation made by this
 * ledger after it appended the head (its remembered head judged again), after a reopening, and by another process of
 * a shared root. A revocation that covers only the entry before the head leaves publish free (the next handoff
 * resumes again), and a head this ledger appended under keys unchanged since is not read again. And a host key another
 * process of a shared root revoked from a later time signs nothing new, on a new session either.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import type { OpenLedgerOptions } from '../src/ledger/options.js';
import { compact } from '../src/index.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { describePostgres } from './support/postgres.js';
import { countingModel } from './support/counting-model.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice', session: 's2', run: 'r' };
const transcript = [{ role: 'user' as const, content: 'add retries' }];
const T0 = Date.parse('2026-12-05T10:00:00.000Z');
/** Before the head's createdAt: the key is found compromised from then on. */
const COMPROMISED_FROM = '2026-12-05T10:00:00.500Z';

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'passed',
    (err: { name?: string; code?: string; message?: string }) => `${err.name} ${err.code}: ${err.message}`,
  );

type Open = (extra?: Partial<OpenLedgerOptions>) => Promise<Ledger>;

/** The clock every ledger of a case reads: a test moves it on. */
function clock() {
  const c = { now: T0, at: () => new Date(c.now) };
  return c;
}

/**
 * Session s2's head (seq 0, by the old key at T0 + 1 s) is covered by the revocation: publish, checkPublish and
 * compact refuse with resume's own code, and a message that says why and what to do; the model is not asked, nothing
 * is appended; another session publishes.
 */
async function refusedOnRevokedHead(ledger: Ledger, oldKey: string, newSession: string): Promise<void> {
  const head = await ledger.log.head('s2');
  expect(await refusal(ledger.resume(scope))).toMatch(/^ManifestError KEY_REVOKED: /);
  const published = await refusal(ledger.publish(scope, sampleSummary('refused')));
  expect(published).toBe(
    `ManifestError KEY_REVOKED: session s2: its head (seq 0) is signed by a revoked key (key ${JSON.stringify(oldKey)} of host "host-a" was revoked at "${COMPROMISED_FROM}"): resume refuses that head, and would refuse a handoff published on it too, so nothing was published; continue in a new session (README, "Key rotation runbook", step 4)`,
  );
  expect(await refusal(ledger.checkPublish(scope))).toBe(published);
  const model = countingModel();
  expect(await refusal(compact({ ledger, scope, model, transcript }))).toBe(published);
  expect(model.asked).toBe(0);
  // With expectedPrev naming the head (the README's recipe), the same.
  const model2 = countingModel();
  expect(await refusal(compact({ ledger, scope, model: model2, transcript, expectedPrev: head!.id }))).toBe(published);
  expect(model2.asked).toBe(0);
  expect(await ledger.log.head('s2')).toEqual(head);
  // The refusal is the session's: a new one starts with the new key, and resumes.
  const fresh = { ...scope, session: newSession };
  const ok = countingModel();
  expect((await compact({ ledger, scope: fresh, model: ok, transcript })).receipt.seq).toBe(0);
  expect(ok.asked).toBe(1);
  expect((await ledger.resume(fresh))?.seq).toBe(0);
}

/** The reviewer's scenario on one ledger: s2's seq 0 by the old key, then revoke (from before it) and rotate. */
async function reviewersScenario(open: Open, order: 'revoke, rotate' | 'rotate, revoke'): Promise<void> {
  const c = clock();
  let ledger = await open({ clock: c.at });
  try {
    c.now = T0 + 1000;
    await ledger.publish(scope, sampleSummary(0));
    const oldKey = ledger.keyId;
    c.now = T0 + 60_000;
    if (order === 'revoke, rotate') {
      await ledger.revokeKey(oldKey, COMPROMISED_FROM);
      await ledger.rotateKey();
    } else {
      await ledger.rotateKey();
      await ledger.revokeKey(oldKey, COMPROMISED_FROM);
    }
    c.now += 1000;
    // This ledger appended the head under keys that have changed since: it is judged again.
    await refusedOnRevokedHead(ledger, oldKey, 's3');
    await ledger.close();
    ledger = await open({ clock: c.at });
    await refusedOnRevokedHead(ledger, oldKey, 's4');
  } finally {
    await ledger.close();
  }
}

/**
 * A revocation that covers the entry before the head, not the head: resume refuses the session until the next publish,
 * which publish makes (the head it links to verifies), and resume then verifies again.
 */
async function revokedBeforeTheHead(open: Open): Promise<void> {
  const c = clock();
  const ledger = await open({ clock: c.at });
  try {
    c.now = T0 + 1000;
    await ledger.publish(scope, sampleSummary(0));
    const oldKey = ledger.keyId;
    c.now += 1000;
    await ledger.rotateKey();
    c.now += 1000;
    await ledger.publish(scope, sampleSummary(1)); // seq 1 by the new key
    await ledger.revokeKey(oldKey, COMPROMISED_FROM);
    expect(await refusal(ledger.resume(scope))).toMatch(/^ManifestError KEY_REVOKED: /);
    await ledger.checkPublish(scope);
    const model = countingModel();
    expect((await compact({ ledger, scope, model, transcript })).receipt.seq).toBe(2);
    expect((await ledger.resume(scope))?.seq).toBe(2);
  } finally {
    await ledger.close();
  }
}

/** Counts the log's entry reads of `ledger` (what judging a head it does not remember takes). */
function countEntryReads(ledger: Ledger): { reads: number } {
  const counter = { reads: 0 };
  const log = ledger.log as { entry: Ledger['log']['entry'] };
  const entry = log.entry.bind(ledger.log);
  log.entry = (...args) => {
    counter.reads++;
    return entry(...args);
  };
  return counter;
}

/** Publishes on a head this ledger appended read no entry; after the keys change, the head is read and judged once. */
async function rememberedHeads(open: Open): Promise<void> {
  const ledger = await open();
  try {
    await ledger.publish(scope, sampleSummary(0));
    // On PostgreSQL the first read after this process wrote trust.json (at open) loads the keys again (freshTrust),
    // which is a change of the keys: the head is judged again there, before counting.
    await ledger.checkPublish(scope);
    const counted = countEntryReads(ledger);
    for (let i = 1; i <= 3; i++) await ledger.publish(scope, sampleSummary(i));
    await ledger.checkPublish(scope);
    expect(counted.reads).toBe(0);
    await ledger.rotateKey(); // the keys changed: the head this ledger appended is judged again, once
    await ledger.checkPublish(scope);
    await ledger.publish(scope, sampleSummary(4));
    await ledger.publish(scope, sampleSummary(5));
    expect(counted.reads).toBe(1);
  } finally {
    await ledger.close();
  }
}

describe('a session whose head a key revocation covers, embedded store', () => {
  const open: Open = (extra = {}) => {
    const root = (open as { root?: string }).root!;
    return openLedger({ root, host: 'host-a', onNotice: () => {}, ...extra });
  };
  const fresh = () => ((open as { root?: string }).root = tempDir());

  it.each(['revoke, rotate', 'rotate, revoke'] as const)(
    '%s: publish, checkPublish and compact refuse KEY_REVOKED as resume does, before the model is asked; also after reopening',
    async (order) => {
      fresh();
      await reviewersScenario(open, order);
    },
  );

  it('a revocation covering only the entry before the head: publish goes on, and resume verifies again', async () => {
    fresh();
    await revokedBeforeTheHead(open);
  });

  it('a head this ledger appended is not read again until the keys change', async () => {
    fresh();
    await rememberedHeads(open);
  });

  it('another process of a shared root revoked the key: publish and checkPublish read trust.json again, as resume does', async () => {
    const base = tempDir();
    const level = await LevelManifestLog.open(join(base, 'log'));
    // A log that says it is not exclusive: two processes of a host, as on PostgreSQL.
    const shared = Object.create(level, { exclusive: { value: false }, close: { value: async () => {} } });
    const root = join(base, 'root');
    const c = clock();
    try {
      await sharedRootRevocation((host) => openLedger({ root, host, log: shared, clock: c.at, onNotice: () => {} }), c);
    } finally {
      await level.close();
    }
  });
});

/**
 * Processes of one root: A (host-a) published s2's head, B (host-b) judged it then; another process of host-a revokes
 * A's key from before that head and rotates. B, whose keys did not change in this process, reads trust.json again
 * as resume does and refuses, as A does.
 */
async function sharedRootRevocation(open: (host: string) => Promise<Ledger>, c: { now: number }): Promise<void> {
  const a = await open('host-a');
  const b = await open('host-b');
  const revoker = await open('host-a');
  try {
    c.now = T0 + 1000;
    await a.publish(scope, sampleSummary(0));
    await b.checkPublish(scope);
    const oldKey = a.keyId;
    c.now = T0 + 60_000;
    await revoker.revokeKey(oldKey, COMPROMISED_FROM);
    await revoker.rotateKey();
    c.now += 1000;
    const published = await refusal(b.publish(scope, sampleSummary('refused')));
    expect(published).toMatch(/^ManifestError KEY_REVOKED: session s2: its head \(seq 0\) is signed by a revoked key /);
    expect(await refusal(b.checkPublish(scope))).toBe(published);
    expect(await refusal(a.checkPublish(scope))).toBe(published);
    expect(await refusal(a.publish(scope, sampleSummary('refused')))).toBe(published);
    expect(await refusal(b.resume(scope))).toMatch(/^ManifestError KEY_REVOKED: /);
    expect((await a.log.head('s2'))?.seq).toBe(0);
  } finally {
    await a.close();
    await b.close();
    await revoker.close();
  }
}

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
});

/**
 * The reviewer's scenario through the CLI (`store`: `--root DIR`, and `--postgres URL` on PostgreSQL): s2's seq 0 is
 * signed by the old key after the time it is revoked from; publish is refused (KEY_REVOKED, exit 1) as resume is,
 * nothing is appended, and a new session publishes and resumes.
 */
function cliScenario(store: string[]): void {
  const cli = (args: string[], input = '') => {
    const env: NodeJS.ProcessEnv = { ...process.env, HANDOFF_LEDGER_HOST: 'cli-host' };
    delete env.HANDOFF_LEDGER_POSTGRES;
    delete env.HANDOFF_LEDGER_ROOT;
    const r = spawnSync(process.execPath, [CLI, ...args, ...store], { input, encoding: 'utf8', env, timeout: 60_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const s2 = ['--principal', 'alice', '--session', 's2'];
  expect(cli(['init']).code).toBe(0);
  const first = cli(['publish', ...s2, '--run', 'r1', '--json'], JSON.stringify(sampleSummary(0)));
  expect(first.code, first.stderr).toBe(0);
  const oldKey = JSON.parse(first.stdout).envelope.signatures[0].keyid as string;
  expect(cli(['keys', 'rotate']).code).toBe(0);
  const at = '2000-01-01T00:00:00.000Z'; // compromised long before: seq 0 was signed after it
  expect(cli(['keys', 'revoke', oldKey, '--at', at]).code).toBe(0);
  const refused = `handoff-ledger: KEY_REVOKED: session s2: its head (seq 0) is signed by a revoked key (key ${JSON.stringify(oldKey)} of host "cli-host" was revoked at "${at}"): resume refuses that head, and would refuse a handoff published on it too, so nothing was published; continue in a new session (README, "Key rotation runbook", step 4)\n`;
  expect(cli(['publish', ...s2, '--run', 'r2'], JSON.stringify(sampleSummary(1)))).toEqual({
    code: 1,
    stdout: '',
    stderr: refused,
  });
  const resumed = cli(['resume', ...s2]);
  expect(resumed.code).toBe(1);
  expect(resumed.stderr).toMatch(/^handoff-ledger: KEY_REVOKED: /);
  const history = cli(['history', ...s2, '--json']);
  expect(history.code).toBe(1); // the chain still ends at seq 0: nothing was appended
  const s3 = ['--principal', 'alice', '--session', 's3'];
  expect(cli(['publish', ...s3, '--run', 'r2'], JSON.stringify(sampleSummary(1))).code).toBe(0);
  expect(JSON.parse(cli(['resume', ...s3]).stdout)).toEqual(sampleSummary(1));
}

describe('the CLI on a session whose head a key revocation covers', () => {
  it('publish refuses KEY_REVOKED (exit 1) as resume does; a new session publishes (embedded store)', () => {
    cliScenario(['--root', join(tempDir(), 'store')]);
  }, 180_000); // a dozen CLI processes
});

let schemas = 0;
const nextSchema = () => `rvhead${process.pid}_${schemas++}`;

describePostgres('a session whose head a key revocation covers, PostgreSQL', (pg) => {
  it.each(['revoke, rotate', 'rotate, revoke'] as const)(
    '%s: publish, checkPublish and compact refuse KEY_REVOKED as resume does, before the model is asked; also after reopening',
    async (order) => {
      const root = tempDir();
      const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
      await reviewersScenario(
        (extra = {}) => openLedger({ root, host: 'host-a', postgres, onNotice: () => {}, ...extra }),
        order,
      );
    },
  );

  it('a revocation covering only the entry before the head: publish goes on, and resume verifies again', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    await revokedBeforeTheHead((extra = {}) =>
      openLedger({ root, host: 'host-a', postgres, onNotice: () => {}, ...extra }),
    );
  });

  it('a head this ledger appended is not read again until the keys change', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    await rememberedHeads((extra = {}) => openLedger({ root, host: 'host-a', postgres, onNotice: () => {}, ...extra }));
  });

  it('the CLI: publish refuses KEY_REVOKED (exit 1) as resume does; a new session publishes', () => {
    cliScenario(['--root', join(tempDir(), 'store'), '--postgres', pg.connectionString]);
  }, 180_000);

  it('another process of the root revoked the key: publish and checkPublish read trust.json again, as resume does', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    const c = clock();
    await sharedRootRevocation((host) => openLedger({ root, host, postgres, clock: c.at, onNotice: () => {} }), c);
  });

  // A revocation from a time still ahead (`keys revoke K --at` a later time) closes the key's window in the log there:
  // the log alone lets the key append until then. This process learns of it from trust.json, which publish and
  // checkPublish read again only to judge a head: on a new session they signed with the revoked key and appended.
  it('another process recorded a revocation of the host key from a later time: publish and checkPublish on a new session refuse KEY_REVOKED', async () => {
    const root = tempDir();
    const postgres = { connectionString: pg.connectionString, schema: nextSchema() };
    const c = clock();
    const open = () => openLedger({ root, host: 'host-a', postgres, clock: c.at, onNotice: () => {} });
    const a = await open();
    const revoker = await open();
    try {
      c.now = T0 + 1000;
      await a.publish({ ...scope, session: 'old' }, sampleSummary(0));
      const key = a.keyId;
      const later = new Date(T0 + 3_600_000).toISOString();
      expect(await revoker.revokeKey(key, later)).toBe(later);
      c.now += 1000;
      const fresh = { ...scope, session: 'fresh' };
      expect(await refusal(a.checkPublish(fresh))).toMatch(/^ManifestError KEY_REVOKED: /);
      expect(await refusal(a.publish(fresh, sampleSummary('refused')))).toMatch(/^ManifestError KEY_REVOKED: /);
      expect(await a.log.head('fresh')).toBeUndefined();
      // As on a session with a head, which was refused before too.
      expect(await refusal(a.publish({ ...scope, session: 'old' }, sampleSummary(1)))).toMatch(
        /^ManifestError KEY_REVOKED: /,
      );
    } finally {
      await a.close();
      await revoker.close();
    }
  });
});
