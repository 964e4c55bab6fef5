/**
 * A model of a ledger's observable state for test/model-based.test.ts: random sequences of the public operations
 * (publish, checkPublish, resume, history, grants, key rotation and revocation, export and offline verify, gc, fsck,
 * checkpoints and proofs, close and reopen) run against a real ledger and this model, each command checking what the real one
 * answered against what the model predicts from README's rules alone.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Ledger } from '../../src/ledger/ledger.js';
import { fsck, gc } from '../../src/ops/maintenance.js';
import { exportBundle } from '../../src/ops/export.js';
import { openBundleDir } from '../../src/ops/bundle-dir.js';
import { verifyBundle } from '../../manifests/audit/verify-chain.js';
import { leafHash, verifyConsistency, verifyInclusion } from '../../manifests/audit/index.js';
import { digestOf, type Digest } from '../../store/hash/digest.js';
import type { Manifest } from '../../manifests/format/manifest.js';

export const PRINCIPALS = ['alice', 'bob', 'carol'] as const;
export const SESSIONS = ['s1', 's2', 's3'] as const;
/** Summaries up to this many canonical bytes are inline in the log (the option the ledger is opened with). */
export const INLINE_BYTES = 4096;
/** The largest summary the ledger is opened to take. */
export const MAX_BYTES = 32 * 1024;

/**
 * How large a summary is: far from both bounds (inline in the log, a blob of its own, refused as too large), or
 * exactly at one, in canonical bytes: the largest inline (`inlineMax`), the smallest blob file (`fileMin`), the largest
 * taken (`max`), the smallest refused (`overMin`).
 */
export type SizeKind = 'small' | 'inline' | 'blob' | 'over' | 'inlineMax' | 'fileMin' | 'max' | 'overMin';
const PAD = { small: 0, inline: 2_000, blob: 9_000, over: 40_000 };
const EXACT = { inlineMax: INLINE_BYTES, fileMin: INLINE_BYTES + 1, max: MAX_BYTES, overMin: MAX_BYTES + 1 };

export interface ModelSummary {
  task: string;
  state: string;
  nextSteps: string[];
  files?: Array<{ path: string; note?: string }>;
}

/** Canonical bytes (RFC 8785) of an ASCII-only summary without escapes: its keys sorted, no whitespace. */
function canonicalSize(s: ModelSummary): number {
  const sorted = Object.fromEntries(Object.entries(s).sort(([a], [b]) => (a < b ? -1 : 1)));
  return Buffer.byteLength(JSON.stringify(sorted));
}

/** A summary's canonical size when `size` names one exactly (undefined: only its range is known). */
export const exactSize = (size: SizeKind): number | undefined =>
  size in EXACT ? EXACT[size as keyof typeof EXACT] : undefined;

/** Whether publish refuses a summary of this size (SUMMARY_TOO_LARGE). */
const tooLarge = (size: SizeKind) => size === 'over' || size === 'overMin';

/** A summary of `variant` (0-3: equal variants of one size are equal summaries, so blobs are shared) and `size`. */
export function makeSummary(variant: number, size: SizeKind): ModelSummary {
  const exact = exactSize(size);
  if (exact !== undefined) {
    // ASCII only, so its canonical bytes are its sorted JSON's: padded to the size named.
    const base = { nextSteps: [], state: `state ${variant}/${size} `, task: `task ${variant}` };
    return { ...base, state: base.state + 'x'.repeat(exact - canonicalSize(base)) };
  }
  const unit = `v${variant} prose "q" \\ é 😀 `;
  const state = `state ${variant}/${size} ${unit.repeat(Math.ceil(PAD[size as keyof typeof PAD] / unit.length))}`;
  return {
    task: `task ${variant}`,
    state,
    nextSteps: variant % 2 === 0 ? [] : [`step ${variant}`],
    ...(variant === 3 ? { files: [{ path: 'src/a.ts', note: `note ${size}` }] } : {}),
  };
}

/** A summary's name: its task, the start of its state, and its length. */
const label = (s: ModelSummary) => `${s.task}: ${s.state.slice(0, 16)}… (${JSON.stringify(s).length} chars)`;

interface Entry {
  id: Digest;
  seq: number;
  principal: string;
  summary: ModelSummary;
  digest: Digest;
  keyId: string;
  createdAt: string;
  /** Its leaf index in the log's tree: the order of successful publishes. */
  position: number;
}

export interface Model {
  sessions: Map<string, { owner: string; entries: Entry[] }>;
  /** `${principal}/${session}` (session `*` too) → the grant table's state. */
  grants: Map<string, 'granted' | 'revoked'>;
  /** Every host key this root listed, in order; the last is the current one. */
  keys: string[];
  /** keyId → the revocation time that holds. */
  revokedAt: Map<string, string>;
  /** Every manifest, in log order. */
  log: Entry[];
  /** Blobs put that no manifest names (gc takes them). */
  orphans: Set<Digest>;
  /** The last checkpoint seen: later ones must extend it. */
  checkpoint?: { size: number; root: Uint8Array; note: string };
  exports: number;
}

export interface Real {
  ledger: Ledger;
  /** Closes the ledger and opens it again on the same storage. */
  reopen(): Promise<void>;
  /** A directory outside the store's root for bundles. */
  bundles: string;
}

export function emptyModel(keyId: string): Model {
  return {
    sessions: new Map(),
    grants: new Map(),
    keys: [keyId],
    revokedAt: new Map(),
    log: [],
    orphans: new Set(),
    exports: 0,
  };
}

/** How often each command ended each way (HL_MODEL_STATS=1 prints it): what the runs reached. */
export const outcomes = new Map<string, number>();
const tally = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);

/** The code a call fails with, or `undefined` with its value. */
async function settle<T>(p: Promise<T>): Promise<{ code?: string; value?: T; error?: unknown }> {
  try {
    return { value: await p };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string') throw error;
    return { code, error };
  }
}

/** What `expected` (a code, or undefined: success) says of `got`; the error itself on an unexpected failure. */
function expectOutcome(got: { code?: string; error?: unknown }, expected: string | undefined, what: string): void {
  tally(`${what.slice(0, what.indexOf('('))} ${got.code ?? 'ok'}`);
  if (got.code !== expected) {
    const message = got.error instanceof Error ? got.error.message : '(no error)';
    throw new Error(`${what}: expected ${expected ?? 'success'}, got ${got.code ?? 'success'}: ${message}`);
  }
}

// ---- README's rules, as the model states them ----

/** Ids and authorization: revocations first (`*` everywhere, then the session's), then owner or grant. */
function authCode(m: Model, principal: string, session: string): string | undefined {
  if (m.grants.get(`${principal}/*`) === 'revoked') return 'REVOKED';
  if (m.grants.get(`${principal}/${session}`) === 'revoked') return 'REVOKED';
  const s = m.sessions.get(session);
  if (s && s.owner !== principal && m.grants.get(`${principal}/${session}`) !== 'granted') return 'UNAUTHORIZED';
  return undefined;
}

/** A manifest a key revocation covers: signed by the revoked key at or after the revocation time. */
function covered(m: Model, e: Entry): boolean {
  const at = m.revokedAt.get(e.keyId);
  return at !== undefined && e.createdAt >= at;
}

/** Resume verifies the head and the entry before it (key rotation runbook, step 4). */
function resumeKeyCode(m: Model, session: string): string | undefined {
  const entries = m.sessions.get(session)?.entries ?? [];
  return entries.slice(-2).some((e) => covered(m, e)) ? 'KEY_REVOKED' : undefined;
}

const head = (m: Model, session: string): Entry | undefined => m.sessions.get(session)?.entries.at(-1);
const currentKey = (m: Model): string => m.keys.at(-1)!;
const referenced = (m: Model): Set<Digest> => new Set(m.log.map((e) => e.digest));
const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));

/** An expectedPrev that is not the head: the entry before it, none (an empty chain), or an id the log lacks. */
function staleOf(m: Model, session: string): Digest | null {
  const entries = m.sessions.get(session)?.entries ?? [];
  return entries.length > 0 ? (entries.at(-2)?.id ?? null) : digestOf(new TextEncoder().encode('no such manifest'));
}

/**
 * What publish refuses, in its order: authorization, the expectedPrev guard, the head's key (resume would refuse the
 * handoff appended to it), the host key (a revoked one refuses before the summary is stored), the summary (`size`;
 * undefined for checkPublish, which does not look at one).
 */
function publishCode(
  m: Model,
  principal: string,
  session: string,
  guard: 'none' | 'head' | 'stale',
  size: SizeKind | undefined,
): string | undefined {
  const h = head(m, session);
  return (
    authCode(m, principal, session) ??
    (guard === 'stale' ? 'CHAIN_CONFLICT' : undefined) ??
    (h && covered(m, h) ? 'KEY_REVOKED' : undefined) ??
    (m.revokedAt.has(currentKey(m)) ? 'KEY_REVOKED' : undefined) ??
    (size !== undefined && tooLarge(size) ? 'SUMMARY_TOO_LARGE' : undefined)
  );
}

type Cmd = fc.AsyncCommand<Model, Real>;

/** The `expectedPrev` a guarded command passes: none, the session's head as the model has it, or a stale one. */
function expectedPrevFor(m: Model, session: string, guard: 'none' | 'head' | 'stale') {
  return guard === 'none' ? undefined : guard === 'head' ? (head(m, session)?.id ?? null) : staleOf(m, session);
}

class Publish implements Cmd {
  constructor(
    readonly principal: string,
    readonly session: string,
    readonly variant: number,
    readonly size: SizeKind,
    readonly guard: 'none' | 'head' | 'stale',
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const h = head(m, this.session);
    const summary = makeSummary(this.variant, this.size);
    const expectedPrev = expectedPrevFor(m, this.session, this.guard);
    const got = await settle(
      r.ledger.publish({ principal: this.principal, session: this.session, run: 'run-m' }, summary, {
        ...(expectedPrev !== undefined ? { expectedPrev } : {}),
      }),
    );
    expectOutcome(got, publishCode(m, this.principal, this.session, this.guard, this.size), this.toString());
    if (got.code !== undefined) {
      // Nothing was published: the head is the model's.
      expect((await r.ledger.log.head(this.session))?.id).toBe(h?.id);
      return;
    }
    const receipt = got.value!;
    const manifest = JSON.parse(Buffer.from(receipt.envelope.payload, 'base64').toString('utf8')) as {
      seq: number;
      prev: Digest | null;
      principal: string;
      session: string;
      keyId: string;
      createdAt: string;
      summary: { digest: Digest; size: number };
    };
    expect(receipt.seq).toBe(h ? h.seq + 1 : 0);
    expect(manifest).toMatchObject({
      seq: receipt.seq,
      prev: h?.id ?? null,
      principal: this.principal,
      session: this.session,
      keyId: currentKey(m),
      summary: { digest: receipt.digest, size: receipt.size },
    });
    expect(receipt.size).toBeLessThanOrEqual(MAX_BYTES);
    if (exactSize(this.size) !== undefined) expect(receipt.size).toBe(exactSize(this.size));
    // Up to inlineSummaryBytes in the log itself (README, openLedger's options), else a blob of its own.
    const inline = (await r.ledger.log.inlineBlobs?.get(receipt.digest)) !== undefined;
    expect({ size: receipt.size, inline }).toEqual({ size: receipt.size, inline: receipt.size <= INLINE_BYTES });
    expect(inline).toBe(['small', 'inline', 'inlineMax'].includes(this.size));
    // One summary, one blob: equal summaries share a digest wherever they were published.
    const same = m.log.find((e) => JSON.stringify(e.summary) === JSON.stringify(summary));
    if (same) expect(receipt.digest).toBe(same.digest);
    else expect(m.log.some((e) => e.digest === receipt.digest)).toBe(false);
    recordPublished(m, this.principal, this.session, summary, receipt, manifest);
    // What a Harness does next: its resume gets this summary back.
    await checkResume(m, r, this.principal, this.session, `resume(${this.principal}, ${this.session}) after ${this}`);
  }
  toString = () =>
    `publish(${this.principal}, ${this.session}, v${this.variant}/${this.size}${this.guard === 'none' ? '' : `, ${this.guard}`})`;
}

/** A publish that landed, as the model keeps it: the session's chain and the log grow by its entry. */
function recordPublished(
  m: Model,
  principal: string,
  session: string,
  summary: Entry['summary'],
  receipt: { id: Entry['id']; seq: number; digest: Entry['digest'] },
  manifest: { keyId: string; createdAt: string },
): void {
  const entry: Entry = {
    id: receipt.id,
    seq: receipt.seq,
    principal,
    summary,
    digest: receipt.digest,
    keyId: manifest.keyId,
    createdAt: manifest.createdAt,
    position: m.log.length,
  };
  if (!m.sessions.has(session)) m.sessions.set(session, { owner: principal, entries: [] });
  m.sessions.get(session)!.entries.push(entry);
  m.log.push(entry);
  m.orphans.delete(receipt.digest);
}

/**
 * Two publishes of one principal into one session at once (a retried job beside the first, say): without
 * expectedPrev both land, one after the other in one linear chain; both built on the same head, exactly one lands
 * and the other is CHAIN_CONFLICT (README, In a Harness).
 */
class PublishTwice implements Cmd {
  constructor(
    readonly principal: string,
    readonly session: string,
    readonly variants: [number, number],
    readonly guarded: boolean,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const h = head(m, this.session);
    const summaries = this.variants.map((v) => makeSummary(v, 'small'));
    const options = this.guarded ? { expectedPrev: h?.id ?? null } : {};
    const scope = { principal: this.principal, session: this.session, run: 'run-m' };
    const got = await Promise.all(summaries.map((summary) => settle(r.ledger.publish(scope, summary, options))));
    const refused = publishCode(m, this.principal, this.session, 'none', 'small');
    const landed = got.flatMap((g, i) => (g.code === undefined ? [{ receipt: g.value!, summary: summaries[i]! }] : []));
    if (refused !== undefined) got.forEach((g) => expectOutcome(g, refused, this.toString()));
    else if (!this.guarded) got.forEach((g) => expectOutcome(g, undefined, this.toString()));
    else {
      expect(landed.length, this.toString()).toBe(1);
      got.forEach((g) => g.code !== undefined && expectOutcome(g, 'CHAIN_CONFLICT', this.toString()));
    }
    const base = h ? h.seq + 1 : 0;
    expect(landed.map((l) => l.receipt.seq).sort((x, y) => x - y)).toEqual(landed.map((_, i) => base + i));
    for (const { receipt, summary } of landed.sort((x, y) => x.receipt.seq - y.receipt.seq)) {
      const manifest = JSON.parse(Buffer.from(receipt.envelope.payload, 'base64').toString('utf8')) as Manifest;
      expect(manifest.prev).toBe(head(m, this.session)?.id ?? null);
      recordPublished(m, this.principal, this.session, summary, receipt, manifest);
    }
    await checkResume(m, r, this.principal, this.session, `resume(${this.principal}, ${this.session}) after ${this}`);
  }
  toString = () =>
    `publishTwice(${this.principal}, ${this.session}, v${this.variants.join('+v')}${this.guarded ? ', head' : ''})`;
}

/** `resume` as README says it answers: exactly the session's last summary published, none, or the refusal. */
async function checkResume(m: Model, r: Real, principal: string, session: string, what: string): Promise<void> {
  const got = await settle(r.ledger.resume({ principal, session }));
  expectOutcome(got, authCode(m, principal, session) ?? resumeKeyCode(m, session), what);
  if (got.code !== undefined) return;
  const h = head(m, session);
  if (!h) return expect(got.value).toBeUndefined();
  expect(got.value).toMatchObject({ id: h.id, seq: h.seq });
  // Named first (a failure says which summary came back, not two pages of its text), then whole.
  expect(label(got.value!.summary as ModelSummary)).toBe(label(h.summary));
  expect(got.value!.summary).toEqual(h.summary);
  expect(got.value!.manifest.summary.digest).toBe(h.digest);
}

/** `checkPublish` refuses what `publish` would refuse before it looks at the summary, and publishes nothing. */
class CheckPublish implements Cmd {
  constructor(
    readonly principal: string,
    readonly session: string,
    readonly guard: 'none' | 'head' | 'stale',
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const expectedPrev = expectedPrevFor(m, this.session, this.guard);
    const got = await settle(
      r.ledger.checkPublish(
        { principal: this.principal, session: this.session, run: 'run-m' },
        expectedPrev !== undefined ? { expectedPrev } : {},
      ),
    );
    expectOutcome(got, publishCode(m, this.principal, this.session, this.guard, undefined), this.toString());
    expect((await r.ledger.log.treeHead()).size).toBe(m.log.length);
  }
  toString = () => `checkPublish(${this.principal}, ${this.session}${this.guard === 'none' ? '' : `, ${this.guard}`})`;
}

class Resume implements Cmd {
  constructor(
    readonly principal: string,
    readonly session: string,
  ) {}
  check = () => true;
  run = (m: Model, r: Real) => checkResume(m, r, this.principal, this.session, this.toString());
  toString = () => `resume(${this.principal}, ${this.session})`;
}

class History implements Cmd {
  constructor(
    readonly principal: string,
    readonly session: string,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const got = await settle(r.ledger.history({ principal: this.principal, session: this.session }));
    const entries = m.sessions.get(this.session)?.entries ?? [];
    const expected =
      authCode(m, this.principal, this.session) ?? (entries.some((e) => covered(m, e)) ? 'KEY_REVOKED' : undefined);
    expectOutcome(got, expected, this.toString());
    if (got.code !== undefined) return;
    expect(got.value!.map((h) => h.id)).toEqual(entries.map((e) => e.id));
    got.value!.forEach((h, i) => {
      const e = entries[i]!;
      expect(h.manifest).toMatchObject({
        seq: i,
        prev: i === 0 ? null : entries[i - 1]!.id,
        principal: e.principal,
        session: this.session,
        keyId: e.keyId,
        createdAt: e.createdAt,
      });
      expect(h.manifest.summary.digest).toBe(e.digest);
    });
  }
  toString = () => `history(${this.principal}, ${this.session})`;
}

class SetGrant implements Cmd {
  constructor(
    readonly state: 'granted' | 'revoked',
    readonly principal: string,
    readonly session: string,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const record =
      this.state === 'granted'
        ? await r.ledger.grant(this.principal, this.session)
        : await r.ledger.revoke(this.principal, this.session);
    expect(record).toMatchObject({ principal: this.principal, session: this.session, state: this.state });
    m.grants.set(`${this.principal}/${this.session}`, this.state);
    // The grant table as the model holds it.
    const listed = (await r.ledger.grants()).map((g) => `${g.principal}/${g.session}=${g.state}`).sort();
    expect(listed).toEqual([...m.grants].map(([k, v]) => `${k}=${v}`).sort());
  }
  toString = () => `${this.state === 'granted' ? 'grant' : 'revoke'}(${this.principal}, ${this.session})`;
}

/** The grant table's records, filtered by principal and/or session as the model filters its own. */
class Grants implements Cmd {
  constructor(readonly filter: { principal?: string; session?: string }) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const listed = (await r.ledger.grants(this.filter)).map((g) => `${g.principal}/${g.session}=${g.state}`).sort();
    const expected = [...m.grants]
      .filter(([k]) => {
        const [p, s] = k.split('/');
        return (this.filter.principal ?? p) === p && (this.filter.session ?? s) === s;
      })
      .map(([k, v]) => `${k}=${v}`)
      .sort();
    expect(listed).toEqual(expected);
  }
  toString = () => `grants(${JSON.stringify(this.filter)})`;
}

/**
 * `closeKeyWindow` on a store that was never restored: the log already closes every window trust.json ends (a
 * rotation or revocation closed it there first), so nothing changes; a key trust.json holds current is refused.
 */
class CloseKeyWindow implements Cmd {
  constructor(readonly which: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const keyId = m.keys[this.which % m.keys.length]!;
    const got = await settle(r.ledger.closeKeyWindow(keyId));
    const current = keyId === currentKey(m) && !m.revokedAt.has(keyId);
    expectOutcome(got, current ? 'INVALID_ARGUMENT' : undefined, this.toString());
    if (got.code !== undefined) return;
    expect(got.value!.changed).toBe(false);
    const revokedAt = m.revokedAt.get(keyId);
    if (revokedAt !== undefined) expect(got.value!.at <= revokedAt).toBe(true);
  }
  toString = () => `closeKeyWindow(#${this.which})`;
}

class RotateKey implements Cmd {
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const keyId = await r.ledger.rotateKey();
    expect(m.keys).not.toContain(keyId);
    expect(r.ledger.keyId).toBe(keyId);
    m.keys.push(keyId);
  }
  toString = () => 'rotateKey()';
}

/**
 * Revokes one of the host keys listed: the current one from now (it signs nothing more until a rotation), or one
 * rotated out from the time it signed its `nth` manifest (a compromise found later: that manifest and what the key
 * signed after it no longer verify), or from now when it signed none.
 */
class RevokeKey implements Cmd {
  constructor(
    readonly which: number,
    readonly nth: number,
  ) {}
  /** Only while a key was rotated out, unless it revokes the current one. */
  check = (m: Readonly<Model>) => this.which % 4 === 0 || m.keys.length > 1;
  async run(m: Model, r: Real): Promise<void> {
    // One rotated out three times in four: a compromise found later, the case with most to check.
    const old = m.keys.slice(0, -1);
    const keyId = this.which % 4 === 0 ? currentKey(m) : old[this.which % old.length]!;
    const signed = m.log.filter((e) => e.keyId === keyId);
    const at = keyId !== currentKey(m) && signed.length > 0 ? signed[this.nth % signed.length]!.createdAt : undefined;
    const holds = await r.ledger.revokeKey(keyId, at);
    const before = m.revokedAt.get(keyId);
    const expected = before !== undefined && (at === undefined || before <= at) ? before : at;
    if (expected !== undefined) expect(holds).toBe(expected);
    m.revokedAt.set(keyId, holds);
  }
  toString = () => `revokeKey(${this.which % 4 === 0 ? 'current' : `old #${this.which}`}, ${this.nth})`;
}

class PutOrphan implements Cmd {
  constructor(readonly n: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const bytes = new TextEncoder().encode(
      `an orphan blob no manifest names ${this.n}`.repeat(this.n % 3 === 0 ? 500 : 1),
    );
    const { digest } = await r.ledger.blobs.put(bytes);
    if (!referenced(m).has(digest)) m.orphans.add(digest);
  }
  toString = () => `putOrphan(${this.n})`;
}

class Gc implements Cmd {
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const now = Date.now() + 5000;
    // A dry run lists what the run then removes, and removes nothing.
    const dry = await gc(r.ledger, { graceMs: 0, now, dryRun: true });
    for (const d of dry.removed) expect(await r.ledger.blobs.has(d), d).toBe(true);
    const report = await gc(r.ledger, { graceMs: 0, now });
    expect([...report.removed].sort()).toEqual([...dry.removed].sort());
    const refs = referenced(m);
    // Never a blob a manifest names; every orphan put before.
    expect(report.removed.filter((d) => refs.has(d))).toEqual([]);
    for (const d of m.orphans) expect(report.removed).toContain(d);
    m.orphans.clear();
    for (const d of refs) expect(await r.ledger.blobs.has(d), d).toBe(true);
  }
  toString = () => 'gc()';
}

class Fsck implements Cmd {
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const report = await fsck(r.ledger);
    const revoked = m.log.filter((e) => covered(m, e));
    const sessionOf = new Map(m.log.map((e) => [e.id, [...m.sessions].find(([, s]) => s.entries.includes(e))![0]]));
    expect(
      report.findings.map((f) => `${f.code} ${f.session ?? ''} ${f.seq ?? ''}`).sort(),
      JSON.stringify(report.findings),
    ).toEqual(revoked.map((e) => `KEY_REVOKED ${sessionOf.get(e.id)} ${e.seq}`).sort());
    expect(report).toMatchObject({ ok: revoked.length === 0, manifests: m.log.length, chains: m.sessions.size });
    tally(`fsck ${revoked.length === 0 ? 'ok' : 'KEY_REVOKED'}`);
  }
  toString = () => 'fsck()';
}

class Export implements Cmd {
  constructor(
    readonly filter: { session?: string; principal?: string },
    /** Cut since the last checkpoint seen (an auditor's earlier note), when there is one of a tree not empty. */
    readonly sinceLast: boolean,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const out = `${r.bundles}/bundle-${m.exports++}`;
    // Not after a key revocation: it may revoke the checkpoint key that signed the note, which then verifies no more
    // (README, key rotation runbook), as an auditor's `--since` would find.
    const usable = m.checkpoint && m.checkpoint.size > 0 && m.revokedAt.size === 0;
    const since = this.sinceLast && usable ? m.checkpoint!.note : undefined;
    const result = await exportBundle(r.ledger, { out, withBlobs: true, ...this.filter, ...(since ? { since } : {}) });
    expect(result.unavailableBlobs).toEqual([]);
    const filtered = this.filter.session !== undefined || this.filter.principal !== undefined;
    const report = await verifyBundle(await openBundleDir(out), {
      trust: r.ledger.trustStore(),
      requireBlobs: true,
      expect: filtered ? 'filtered' : 'full',
      ...(filtered ? { scope: this.filter } : {}),
      ...(since ? { since } : {}),
    });
    // The chains exported: the session's, or those the principal published in (whole chains).
    const sessions = [...m.sessions].filter(
      ([name, c]) =>
        (this.filter.session === undefined || name === this.filter.session) &&
        (this.filter.principal === undefined || c.entries.some((e) => e.principal === this.filter.principal)),
    );
    const entries = sessions.flatMap(([, c]) => c.entries);
    const revoked = entries.filter((e) => covered(m, e));
    // Every manifest in scope verifies but those a key revocation covers (KEY_REVOKED, one each), which belong to no
    // chain (docs/AUDIT.md, steps 1-5): the chain of those that verify then lacks its start (SEQ_NOT_ZERO) or entries
    // between two (SEQ_GAP), and a chain head among them leaves the chains' heads short of the checkpoint's
    // (SESSION_HEAD_MISMATCH in a full bundle, SESSION_TAIL_MISSING against the proven head in a filtered one).
    const codes = new Set<string>();
    if (revoked.length > 0) codes.add('KEY_REVOKED');
    for (const [, { entries: chain }] of sessions) {
      const kept = chain.filter((e) => !covered(m, e)).map((e) => e.seq);
      if (kept.length > 0 && kept[0] !== 0) codes.add('SEQ_NOT_ZERO');
      if (kept.some((seq, i) => i > 0 && seq !== kept[i - 1]! + 1)) codes.add('SEQ_GAP');
      if (covered(m, chain.at(-1)!)) codes.add(filtered ? 'SESSION_TAIL_MISSING' : 'SESSION_HEAD_MISMATCH');
    }
    expect([...new Set(report.findings.map((f) => f.code))].sort(), JSON.stringify(report.findings)).toEqual(
      [...codes].sort(),
    );
    expect(report.findings.filter((f) => f.code === 'KEY_REVOKED').length).toBe(revoked.length);
    expect(report.ok).toBe(revoked.length === 0);
    expect(report.counts.lines).toBe(entries.length);
    expect(report.counts.manifests).toBe(entries.length - revoked.length);
    // The blobs of the manifests that verify (a line that fails names no blob to check).
    expect(report.counts.blobsChecked).toBe(new Set(entries.filter((e) => !covered(m, e)).map((e) => e.digest)).size);
    if (revoked.length === 0) {
      const heads = Object.fromEntries(report.chains.map((c) => [c.session, c.head]));
      expect(heads).toEqual(Object.fromEntries(sessions.map(([name, c]) => [name, c.entries.at(-1)!.id])));
    }
    expect(report.checkpoint?.size).toBe(m.log.length);
    tally(
      `export ${Object.keys(this.filter).join('') || 'full'}${since ? '+since' : ''} ${[...codes].sort().join(',') || 'ok'}`,
    );
  }
  toString = () => `export(${JSON.stringify(this.filter)}${this.sinceLast ? ', since the last checkpoint' : ''})`;
}

class Checkpoint implements Cmd {
  constructor(readonly pick: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const { checkpoint, note } = await r.ledger.checkpoint();
    expect(checkpoint.size).toBe(m.log.length);
    // A consistency proof is from a tree of one entry or more (prove consistency: a size from 1).
    if (m.checkpoint && m.checkpoint.size > 0) {
      const c = await r.ledger.consistencyProof(m.checkpoint.size, { size: checkpoint.size });
      expect(b64(c.oldRoot)).toEqual(m.checkpoint.root);
      expect(b64(c.root)).toEqual(checkpoint.root);
      expect(verifyConsistency(c.oldSize, c.treeSize, c.proof.map(b64), m.checkpoint.root, checkpoint.root)).toEqual({
        ok: true,
      });
    }
    if (m.log.length > 0) {
      const e = m.log[this.pick % m.log.length]!;
      const p = await r.ledger.inclusionProof(e.id, { size: checkpoint.size });
      expect(p).toMatchObject({ leafIndex: e.position, treeSize: checkpoint.size });
      expect(b64(p.root)).toEqual(checkpoint.root);
      expect(verifyInclusion(p.leafIndex, p.treeSize, leafHash(b64(p.leaf)), p.proof.map(b64), b64(p.root))).toEqual({
        ok: true,
      });
    }
    m.checkpoint = { size: checkpoint.size, root: checkpoint.root, note };
  }
  toString = () => `checkpoint(${this.pick})`;
}

class Reopen implements Cmd {
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    await r.reopen();
    // The same key signs, and every chain ends where it did.
    expect(r.ledger.keyId).toBe(currentKey(m));
    for (const s of SESSIONS) {
      expect((await r.ledger.log.head(s))?.id).toBe(head(m, s)?.id);
      await checkResume(m, r, m.sessions.get(s)?.owner ?? 'alice', s, `resume(${s}) after reopen`);
    }
    expect((await r.ledger.log.treeHead()).size).toBe(m.log.length);
  }
  toString = () => 'reopen()';
}

const principal = fc.constantFrom(...PRINCIPALS);
const session = fc.constantFrom(...SESSIONS);

const publish = fc
  .tuple(
    principal,
    session,
    fc.nat({ max: 3 }),
    fc.constantFrom<SizeKind>('small', 'small', 'inline', 'blob', 'over', 'inlineMax', 'fileMin', 'max', 'overMin'),
    fc.constantFrom('none', 'none', 'head', 'stale' as const),
  )
  .map(([p, s, v, size, guard]) => new Publish(p, s, v, size, guard));
/** The owner publishing again, as a Harness does (its chains grow past one or two entries). */
const publishOwn = fc
  .tuple(session, fc.nat({ max: 3 }), fc.constantFrom<SizeKind>('small', 'inline', 'blob'))
  .map(([s, v, size]) => new Publish('alice', s, v, size, 'none'));
const resume = fc.tuple(principal, session).map(([p, s]) => new Resume(p, s));
const publishTwice = fc
  .tuple(principal, session, fc.tuple(fc.nat({ max: 3 }), fc.nat({ max: 3 })), fc.boolean())
  .map(([p, s, v, guarded]) => new PublishTwice(p, s, v, guarded));

/** Every command, weighted towards publishing and resuming (an entry twice is drawn twice as often). */
export const commandArbs: Array<fc.Arbitrary<Cmd>> = [
  publish,
  publish,
  publishOwn,
  publishOwn,
  publishTwice,
  resume,
  resume,
  fc.tuple(principal, session).map(([p, s]) => new History(p, s)),
  fc
    .tuple(principal, session, fc.constantFrom('none', 'head', 'stale' as const))
    .map(([p, s, guard]) => new CheckPublish(p, s, guard)),
  fc
    .tuple(fc.constantFrom('granted', 'revoked' as const), principal, fc.constantFrom(...SESSIONS, '*'))
    .map(([state, p, s]) => new SetGrant(state, p, s)),
  fc
    .oneof(
      fc.constant({}),
      principal.map((p) => ({ principal: p })),
      fc.constantFrom(...SESSIONS, '*').map((s) => ({ session: s })),
      fc.tuple(principal, session).map(([p, s]) => ({ principal: p, session: s })),
    )
    .map((filter) => new Grants(filter)),
  fc.constant(new RotateKey()),
  fc.nat({ max: 7 }).map((n) => new CloseKeyWindow(n)),
  fc.tuple(fc.nat({ max: 11 }), fc.nat({ max: 7 })).map(([w, n]) => new RevokeKey(w, n)),
  fc.nat({ max: 20 }).map((n) => new PutOrphan(n)),
  fc.constant(new Gc()),
  fc.constant(new Fsck()),
  fc
    .oneof(
      fc.constant({}),
      session.map((s) => ({ session: s })),
      principal.map((p) => ({ principal: p })),
    )
    .chain((filter) => fc.boolean().map((sinceLast) => new Export(filter, sinceLast))),
  fc.nat().map((n) => new Checkpoint(n)),
  fc.constant(new Reopen()),
];
