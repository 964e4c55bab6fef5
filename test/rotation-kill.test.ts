/**
 * A key rotation SIGKILLed at each of its durable steps while another process of the same root publishes
 * (PostgreSQL, one shared root): docs/DESIGN.md, "Keys and trust". Killed once the log closed the old key's window
 * and before trust.json: publishes of the old key are refused (`KEY_EXPIRED`), the next open says to run the command
 * again, and once it is, the other process publishes on with the new key without reopening. Killed once trust.json
 * lists the new keys and before their staged files moved into place: the other process takes the dead rotation's
 * lock over, moves them in and publishes with the new key; the next open signs with it. Everything verifies.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { openLedger } from '../src/ledger/open.js';
import { fsck } from '../src/ops/maintenance.js';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const CHILD = fileURLToPath(new URL('./support/rotation-stopper.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/src/index.js', import.meta.url));

interface Msg {
  type: 'ready' | 'closed' | 'trust-written' | 'rotated' | 'ack' | 'fail';
  keyId?: string;
  closedAt?: string;
  seq?: number;
  code?: string;
  error?: string;
}

const children: Array<{ kill(): Promise<void> }> = [];

/** A process of the shared root: `next(type, from)` waits for its first message of that type from index `from`. */
function start(config: object) {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const messages: Msg[] = [];
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    messages.push(JSON.parse(line) as Msg);
    for (const w of waiters) w();
  });
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const handle = {
    messages,
    send(cmd: object): number {
      const from = messages.length;
      child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return from;
    },
    async next(types: Msg['type'][], from = 0): Promise<Msg> {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const found = messages.slice(from).find((m) => types.includes(m.type));
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`no ${types.join('/')} from the child: ${JSON.stringify(messages)} ${stderr}`);
        await new Promise<void>((resolve) => {
          const w = () => {
            waiters.delete(w);
            resolve();
          };
          waiters.add(w);
          setTimeout(w, 200);
        });
      }
    },
    async publish(session: string, marker: string): Promise<Msg> {
      return handle.next(['ack', 'fail'], handle.send({ op: 'publish', session, marker }));
    },
    async kill(): Promise<void> {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  children.push(handle);
  return handle;
}

afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

describePostgres('a key rotation killed at its durable steps while another process publishes (PostgreSQL)', (pg) => {
  let schemas = 0;
  async function store() {
    expect(existsSync(BUILT), 'dist/ is built by `npm test` (pretest)').toBe(true);
    const root = tempDir();
    const config = { root, host: 'host-a', connectionString: pg.connectionString, schema: `rot_kill_${schemas++}` };
    const postgres = { connectionString: config.connectionString, schema: config.schema };
    const notices: string[] = [];
    const open = () => openLedger({ root, host: 'host-a', postgres, onNotice: (m) => notices.push(m) });
    const first = await open();
    await first.publish({ principal: 'alice', session: 'before', run: 'r' }, sampleSummary(0));
    const oldKey = first.keyId;
    await first.close();
    const rotator = start(config);
    const publisher = start(config);
    await Promise.all([rotator.next(['ready']), publisher.next(['ready'])]);
    expect(await publisher.publish('b', 'b0')).toMatchObject({ type: 'ack', seq: 0, keyId: oldKey });
    return { root, rotator, publisher, open, notices, oldKey };
  }

  it('killed once the log closed the window: KEY_EXPIRED until it is run again, then the other process publishes on', async () => {
    const { root, rotator, publisher, open, notices, oldKey } = await store();
    const { closedAt } = await rotator.next(['closed'], rotator.send({ op: 'rotate', stop: 'closed' }));
    await rotator.kill();
    // The old key's window is closed in the log and not in trust.json: every process of the root is refused.
    expect(await publisher.publish('b', 'b1')).toMatchObject({ type: 'fail', code: 'KEY_EXPIRED' });

    const ledger = await open();
    try {
      expect(notices.join('\n')).toContain(`the log closed the window of key "${oldKey}" at ${closedAt}`);
      await expect(
        ledger.publish({ principal: 'alice', session: 'p', run: 'r' }, sampleSummary(1)),
      ).rejects.toMatchObject({ code: 'KEY_EXPIRED' });
      const rotated = await ledger.rotateKey();
      expect(ledger.trustStore().keys.find((k) => k.keyId === oldKey)?.notAfter).toBe(closedAt);
      // The other process takes the new key without reopening.
      expect(await publisher.publish('b', 'b2')).toMatchObject({ type: 'ack', seq: 1, keyId: rotated });
      expect((await ledger.publish({ principal: 'alice', session: 'p', run: 'r' }, sampleSummary(2))).seq).toBe(0);
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
      expect((await ledger.history({ principal: 'alice', session: 'b' })).length).toBe(2);
      expect(readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'))).toEqual([]);
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it('killed once trust.json lists the new keys: the other process moves them into place and publishes with the new key', async () => {
    const { root, rotator, publisher, open, notices, oldKey } = await store();
    await rotator.next(['trust-written'], rotator.send({ op: 'rotate', stop: 'trust-written' }));
    await rotator.kill();
    expect(readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'))).toHaveLength(2);
    const b1 = await publisher.publish('b', 'b1');
    expect(b1).toMatchObject({ type: 'ack', seq: 1 });
    expect(b1.keyId).not.toBe(oldKey);
    expect(readdirSync(join(root, 'keys')).filter((f) => f.endsWith('.next'))).toEqual([]);

    const ledger = await open();
    try {
      expect(notices).toEqual([]);
      expect(ledger.keyId).toBe(b1.keyId);
      expect(ledger.trustStore().keys.find((k) => k.keyId === oldKey)?.notAfter).toBeDefined();
      expect((await ledger.publish({ principal: 'alice', session: 'p', run: 'r' }, sampleSummary(1))).seq).toBe(0);
      expect(await publisher.publish('b', 'b2')).toMatchObject({ type: 'ack', seq: 2, keyId: b1.keyId });
      expect(await fsck(ledger)).toMatchObject({ ok: true, findings: [] });
    } finally {
      await ledger.close();
    }
  }, 60_000);
});
