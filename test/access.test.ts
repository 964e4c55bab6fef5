import { describe, expect, it } from 'vitest';
import { type Ledger } from '../src/ledger/ledger.js';
import { openLedger } from '../src/ledger/open.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { join } from 'node:path';
import { sampleSummary, tempDir } from './support/tmp.js';

async function open(root = tempDir(), extra: Partial<Parameters<typeof openLedger>[0]> = {}): Promise<Ledger> {
  return openLedger({ root, host: 'host-a', ...extra });
}

describe('sessions belong to their first publisher', () => {
  it('keeps two accounts publishing and resuming concurrently out of each other’s sessions', async () => {
    const ledger = await open();
    const sessions = (who: string) => Array.from({ length: 8 }, (_, i) => `${who}-s${i}`);
    await Promise.all(
      ['alice', 'bob'].flatMap((who) =>
        sessions(who).map(async (session) => {
          for (let i = 0; i < 3; i++)
            await ledger.publish({ principal: who, session, run: 'r1' }, sampleSummary(`${who}/${session}/${i}`));
          const resumed = await ledger.resume({ principal: who, session });
          expect(resumed?.summary.task).toContain(`${who}/${session}/2`);
        }),
      ),
    );
    for (const [me, other] of [
      ['alice', 'bob'],
      ['bob', 'alice'],
    ] as const) {
      for (const session of sessions(other)) {
        await expect(ledger.resume({ principal: me, session })).rejects.toMatchObject({
          name: 'LedgerError',
          code: 'UNAUTHORIZED',
        });
        await expect(ledger.history({ principal: me, session })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
        await expect(
          ledger.publish({ principal: me, session, run: 'r9' }, sampleSummary('intruder')),
        ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
        const history = await ledger.history({ principal: other, session });
        expect(history.length).toBe(3);
        expect(history.every((h) => h.manifest.principal === other)).toBe(true);
      }
    }
    await ledger.close();
  });

  it('says in words what a refused principal may not do to the session', async () => {
    const ledger = await open();
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
    const bob = { principal: 'bob', session: 's1' };
    await expect(ledger.history(bob)).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
      message: 'principal bob may not read the history of session s1',
    });
    await expect(ledger.resume(bob)).rejects.toMatchObject({ message: 'principal bob may not resume session s1' });
    await expect(ledger.publish({ ...bob, run: 'r2' }, sampleSummary())).rejects.toMatchObject({
      message: 'principal bob may not publish in session s1',
    });
    await ledger.close();
  });

  it('does not let ids that differ by case or separator alias one another', async () => {
    const ledger = await open();
    const variants = ['proj.a', 'proj-a', 'proj:a', 'proj_a', 'Proj.a', 'PROJ.A', 'proj@a'];
    for (const [i, session] of variants.entries())
      await ledger.publish({ principal: `user${i}`, session, run: 'r' }, sampleSummary(session));
    for (const [i, session] of variants.entries()) {
      const resumed = await ledger.resume({ principal: `user${i}`, session });
      expect(resumed?.summary.task).toContain(`(${session})`);
      expect(resumed?.seq).toBe(0);
    }
    for (const p of ['Alice', 'ALICE'])
      await expect(
        ledger.publish({ principal: p, session: 'proj.a', run: 'r' }, sampleSummary()),
      ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await ledger.close();
  });

  it('lets a granted principal publish into and resume another’s session, recorded as itself', async () => {
    const ledger = await open();
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary('alice'));
    await ledger.grant('bob', 's', { by: 'ops' });
    const r = await ledger.publish({ principal: 'bob', session: 's', run: 'r2' }, sampleSummary('bob'));
    expect(r.seq).toBe(1);
    const resumed = await ledger.resume({ principal: 'alice', session: 's' });
    expect(resumed?.manifest.principal).toBe('bob');
    expect((await ledger.grants({ principal: 'bob' }))[0]).toMatchObject({ session: 's', state: 'granted', by: 'ops' });
    await ledger.close();
  });

  it('refuses a grants filter with a malformed id or a field that throws as the ledger refuses a bad id: LedgerError', async () => {
    const ledger = await open();
    try {
      for (const filter of [{ principal: 'bad id' }, { session: '../s' }])
        await expect(ledger.grants(filter)).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ID' });
      await expect(ledger.grant('bad id', 's')).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ID' });
      const throwing = Object.defineProperty({}, 'principal', {
        enumerable: true,
        get() {
          throw new Error('no');
        },
      });
      await expect(ledger.grants(throwing)).rejects.toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
      await expect(ledger.grants('bob' as never)).rejects.toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
      });
    } finally {
      await ledger.close();
    }
  });

  it('refuses a grant or revocation whose `by` is longer than 1,024 characters: INVALID_ARGUMENT, nothing written', async () => {
    const ledger = await open();
    try {
      const by = 'o'.repeat(1025);
      await expect(ledger.grant('bob', 's', { by })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(ledger.revoke('bob', 's', { by })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(ledger.revoke('bob', '*', { by })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(await ledger.grants()).toEqual([]);
      expect((await ledger.grant('bob', 's', { by: by.slice(1) })).by).toBe(by.slice(1));
    } finally {
      await ledger.close();
    }
  });

  it('consults a pluggable authorizer at the start and again at the commit point', async () => {
    const calls: string[] = [];
    let allowCommit = true;
    const ledger = await open(tempDir(), {
      authorizer: ({ action, principal }) => {
        calls.push(`${action}:${principal}`);
        return action !== 'publish' || calls.filter((c) => c.startsWith('publish')).length % 2 === 1 || allowCommit;
      },
    });
    await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary());
    expect(calls).toEqual(['publish:alice', 'publish:alice']);
    allowCommit = false;
    await expect(
      ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary(2)),
    ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect((await ledger.history({ principal: 'alice', session: 's' })).length).toBe(1);
    await ledger.close();
  });
});

describe('a pluggable authorizer', () => {
  it('allows only on true: a truthy answer that is not true ({ result: false }, "deny", 1) denies', async () => {
    for (const answer of [{ result: false }, 'deny', 1, Promise.resolve({ allow: true }), undefined]) {
      const root = tempDir();
      const ledger = await open(root, { authorizer: (() => answer) as never });
      await expect(
        ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary()),
        JSON.stringify(answer),
      ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      await expect(ledger.resume({ principal: 'alice', session: 's' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      await ledger.close();
      const reopened = await open(root);
      expect(await reopened.history({ principal: 'alice', session: 's' })).toEqual([]);
      await reopened.close();
    }
  });

  it('denies, coded UNAUTHORIZED with the failure as cause, when it throws or rejects anything', async () => {
    const failures: Array<() => unknown> = [
      () => {
        throw 'policy service down';
      },
      () => Promise.reject(new Error('policy service down')),
      () => {
        throw null;
      },
    ];
    for (const fail of failures) {
      const ledger = await open(tempDir(), { authorizer: fail as never });
      for (const call of [
        () => ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary()),
        () => ledger.resume({ principal: 'alice', session: 's' }),
        () => ledger.history({ principal: 'alice', session: 's' }),
      ]) {
        const err = await call().catch((e: unknown) => e);
        expect(err).toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining('the authorizer failed') });
        expect(['policy service down', null]).toContainEqual(
          (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).cause,
        );
      }
      await ledger.close();
    }
  });

  it('passes a coded error of this library it throws as it is', async () => {
    const { LedgerError } = await import('../src/errors.js');
    const ledger = await open(tempDir(), {
      authorizer: () => {
        throw new LedgerError('CANCELLED', 'the request was withdrawn');
      },
    });
    await expect(ledger.resume({ principal: 'alice', session: 's' })).rejects.toMatchObject({ code: 'CANCELLED' });
    await ledger.close();
  });

  it('that never answers: resume and history end CANCELLED at their abort, and close() does not wait for them', async () => {
    let hang = false;
    const ledger = await open(tempDir(), { authorizer: () => (hang ? new Promise<boolean>(() => {}) : true) });
    const scope = { principal: 'alice', session: 's' };
    await ledger.publish({ ...scope, run: 'r' }, sampleSummary());
    hang = true;
    for (const op of ['resume', 'history'] as const) {
      const controller = new AbortController();
      const call = ledger[op](scope, { signal: controller.signal });
      setTimeout(() => controller.abort(), 20);
      await expect(call, op).rejects.toMatchObject({ code: 'CANCELLED' });
    }
    await ledger.close(); // returns: nothing tracked is left pending
  });

  it('is refused at open when it is not a function, before anything is written', async () => {
    const root = join(tempDir(), 'store');
    await expect(open(root, { authorizer: true as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { existsSync } = await import('node:fs');
    expect(existsSync(root)).toBe(false);
  });
});

describe('history of a session created while it runs', () => {
  it('judges the caller on the head it reads the chain to: a first publish landing between the two reaches no one else', async () => {
    const log = await LevelManifestLog.open(join(tempDir(), 'manifests-v1'));
    let owner: (() => Promise<unknown>) | undefined;
    // The first head read of history returns "no session yet", and the owner's first publish commits before it is used.
    const once =
      <T>(read: () => Promise<T>) =>
      async (): Promise<T> => {
        const value = await read();
        const publish = owner;
        owner = undefined;
        await publish?.();
        return value;
      };
    for (const name of ['head', 'headWindow'] as const) {
      const real = log[name].bind(log) as (session: string) => Promise<never>;
      (log as unknown as Record<string, unknown>)[name] = (session: string) => once(() => real(session))();
    }
    const ledger = await open(tempDir(), { log });
    owner = () => ledger.publish({ principal: 'alice', session: 'secret', run: 'r1' }, sampleSummary('private'));
    expect(await ledger.history({ principal: 'eve', session: 'secret' })).toEqual([]);
    expect(owner).toBeUndefined(); // the publish did run inside history's read
    await expect(ledger.history({ principal: 'eve', session: 'secret' })).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
    });
    await ledger.close();
    await log.close();
  });
});

describe('revocation', () => {
  it('takes effect for every later operation, deletes nothing, survives restart, and a re-grant restores the same history', async () => {
    const root = tempDir();
    let ledger = await open(root);
    const scope = { principal: 'alice', session: 's', run: 'r' };
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await ledger.publish(scope, sampleSummary(i))).id);
    await ledger.revoke('alice', 's');
    await expect(ledger.resume(scope)).rejects.toMatchObject({ name: 'LedgerError', code: 'REVOKED' });
    await expect(ledger.publish(scope, sampleSummary(9))).rejects.toMatchObject({ code: 'REVOKED' });
    await expect(ledger.history(scope)).rejects.toMatchObject({ code: 'REVOKED' });
    await ledger.close();
    ledger = await open(root);
    await expect(ledger.resume(scope)).rejects.toMatchObject({ code: 'REVOKED' });
    await ledger.grant('alice', 's');
    const history = await ledger.history(scope);
    expect(history.map((h) => h.id)).toEqual(ids);
    expect((await ledger.resume(scope))?.id).toBe(ids[2]);
    await ledger.close();
  });

  it('revoking a principal everywhere (--all) suspends it on its own sessions until lifted', async () => {
    const ledger = await open();
    await ledger.publish({ principal: 'alice', session: 'a1', run: 'r' }, sampleSummary());
    await ledger.revoke('alice', '*');
    await expect(ledger.resume({ principal: 'alice', session: 'a1' })).rejects.toMatchObject({ code: 'REVOKED' });
    await expect(
      ledger.publish({ principal: 'alice', session: 'new', run: 'r' }, sampleSummary()),
    ).rejects.toMatchObject({ code: 'REVOKED' });
    await ledger.grant('alice', '*');
    expect((await ledger.resume({ principal: 'alice', session: 'a1' }))?.seq).toBe(0);
    await ledger.close();
  });

  it('never lets a manifest land after REVOKED was returned, with publishes in flight', async () => {
    for (let round = 0; round < 5; round++) {
      const ledger = await open();
      await ledger.publish({ principal: 'alice', session: 's', run: 'r' }, sampleSummary('owner'));
      await ledger.grant('bob', 's');
      const outcomes: Array<{ ok: boolean; code?: string; at: number }> = [];
      let tick = 0;
      const publishes = Array.from({ length: 20 }, (_, i) =>
        ledger.publish({ principal: 'bob', session: 's', run: `r${i}` }, sampleSummary(`bob${i}`)).then(
          () => outcomes.push({ ok: true, at: tick++ }),
          (e) => outcomes.push({ ok: false, code: e.code, at: tick++ }),
        ),
      );
      await new Promise((r) => setTimeout(r, round * 3));
      await ledger.revoke('bob', 's');
      const revokedAt = tick++;
      await Promise.all(publishes);
      const firstDenied = Math.min(...outcomes.filter((o) => !o.ok).map((o) => o.at), Infinity);
      expect(outcomes.every((o) => o.ok || o.code === 'REVOKED')).toBe(true);
      // Successes all precede the revocation's completion, and none follows a denial.
      expect(outcomes.filter((o) => o.ok).every((o) => o.at < revokedAt && o.at < firstDenied)).toBe(true);
      const history = await ledger.history({ principal: 'alice', session: 's' });
      expect(history.length).toBe(1 + outcomes.filter((o) => o.ok).length);
      await ledger.close();
    }
  });
});

describe('checkPublish', () => {
  it('refuses what publish would refuse before it looks at the summary, and publishes nothing', async () => {
    const authorizerCalls: string[] = [];
    const ledger = await open(tempDir(), {
      authorizer: ({ action, principal }) => {
        authorizerCalls.push(`${action}:${principal}`);
        return principal !== 'mallory';
      },
    });
    const alice = { principal: 'alice', session: 's', run: 'r' };
    const codeOf = (scope: typeof alice, options?: Parameters<Ledger['checkPublish']>[1]) =>
      ledger.checkPublish(scope, options).then(
        () => 'ok',
        (e: { code?: string }) => e.code,
      );
    // A fresh session: anyone may start it, with expectedPrev null (an empty chain) or none.
    expect(await codeOf(alice)).toBe('ok');
    expect(await codeOf({ ...alice, principal: 'bob' }, { expectedPrev: null })).toBe('ok');
    expect(await codeOf({ ...alice, principal: 'mallory' })).toBe('UNAUTHORIZED'); // the authorizer is asked
    expect(authorizerCalls).toContain('publish:mallory');
    expect(await ledger.resume({ principal: 'alice', session: 's' })).toBeUndefined();

    const first = await ledger.publish(alice, sampleSummary());
    expect(await codeOf(alice, { expectedPrev: first.id })).toBe('ok');
    expect(await codeOf(alice, { expectedPrev: null })).toBe('CHAIN_CONFLICT');
    // Authorization first: a caller without the right learns nothing of the head.
    expect(await codeOf({ ...alice, principal: 'bob' }, { expectedPrev: null })).toBe('UNAUTHORIZED');
    await ledger.revoke('alice', 's');
    expect(await codeOf(alice, { expectedPrev: first.id })).toBe('REVOKED');
    // Its arguments as publish judges them.
    expect(await codeOf({ ...alice, run: '' })).toBe('INVALID_ID');
    expect(await codeOf(alice, { expectedPrev: 'head' as never })).toBe('INVALID_ARGUMENT');
    expect(await codeOf(alice, { covers: null as never })).toBe('INVALID_ARGUMENT');
    expect(await codeOf(alice, { signal: AbortSignal.abort() })).toBe('CANCELLED');
    expect((await ledger.history({ principal: 'alice', session: 's' }).catch(() => [])).length).toBe(0); // revoked
    await ledger.grant('alice', 's');
    expect((await ledger.history({ principal: 'alice', session: 's' })).length).toBe(1);
    await ledger.close();
    expect(await codeOf(alice)).toBe('CLOSED');
  });
});
