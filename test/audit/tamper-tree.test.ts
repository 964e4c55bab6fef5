/**
 * The tamper matrix of step 9: bundles cut at a signed checkpoint by a real ledger, then changed the way
 * an attacker with the database (and the unsigned header) would. Each case asserts the exact step-9
 * findings; the chain findings of steps 1-8 show what the chains alone would have revealed.
 */
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { exportBundle } from '../../src/ops/export.js';
import { auditBundle } from '../../src/ops/audit.js';
import { CHECKPOINT_FINDING_CODES, type FindingCode } from '../../manifests/audit/findings.js';
import { verifyBundle, type VerifyBundleOptions } from '../../manifests/audit/verify-chain.js';
import { memoryBundleReader, type BundleTreeFile } from '../../manifests/audit/bundle.js';
import { describeCoverage } from '../../manifests/audit/report-text.js';
import { mergeTrust, type TrustStore } from '../../manifests/format/trust.js';
import { AuditError } from '../../manifests/audit/errors.js';
import { signNote, type NoteSigner } from '../../manifests/crypto/note.js';
import { EMPTY_HEADS_ROOT, sessionHeadsLine, sessionHeadsRoot } from '../../manifests/tlog/session-heads.js';
import { cosignCheckpoint, encodeCosignerKey, parseCosignerKey } from '../../manifests/crypto/cosignature.js';
import { nobleSign, noblePublicKey } from '../../manifests/crypto/ed25519.js';
import { sampleSummary, tempDir } from '../support/tmp.js';
import { deriveFiltered } from '../support/derive-filtered.js';

const provoked = new Set<FindingCode>();
const ORIGIN = 'example.com/audited';

interface Files {
  header: string;
  lines: string[];
  tree: Partial<Record<BundleTreeFile, string>>;
}

function readBundle(dir: string): Files {
  const opt = (name: string) => {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch {
      return undefined;
    }
  };
  const tree: Files['tree'] = {};
  for (const name of ['checkpoint.note', 'proofs.jsonl', 'consistency.json', 'heads.jsonl'] as const) {
    const t = opt(name);
    if (t !== undefined) tree[name] = t;
  }
  return { header: opt('bundle.json')!, lines: opt('manifests.jsonl')!.split('\n').slice(0, -1), tree };
}

/** The attacker rewrites the unsigned header to match the lines (their number, and the sessions they name). */
function withCount(header: string, lines: string[]): string {
  const h = JSON.parse(header);
  h.counts.manifests = lines.length;
  h.counts.chains = new Set(lines.map((l) => JSON.parse(atob(JSON.parse(l).payload)).session)).size;
  return JSON.stringify(h);
}

async function audit(f: Files, trust: TrustStore, o: Partial<VerifyBundleOptions> = {}) {
  const reader = memoryBundleReader({
    header: withCount(f.header, f.lines),
    manifests: f.lines.map((l) => `${l}\n`).join(''),
    treeFiles: f.tree,
  });
  // An auditor who asked for a filtered export says so (step 8: the header's filters alone are SCOPE_UNCONFIRMED);
  // the cases of "the unsigned header's filters" below leave it unsaid.
  const declared = Object.keys((JSON.parse(f.header) as { filters: object }).filters).length > 0;
  const report = await verifyBundle(reader, {
    trust,
    ...(declared && !('expect' in o) ? { expect: 'filtered' } : {}),
    ...o,
  });
  for (const x of report.findings) provoked.add(x.code);
  return report;
}

const found = (r: { findings: Array<{ code: string; line?: number }> }) =>
  r.findings.map((f) => `${f.code}@${f.line ?? '-'}`);

const publish = (l: Ledger, session: string, marker: string | number) =>
  l.publish({ principal: 'alice', session, run: 'r' }, sampleSummary(marker));

let full: Files;
let filtered: Files;
let absent: Files;
let s2Only: Files;
let byPrincipal: Files;
let trust: TrustStore;
let earlier: string;
let forkedEarlier: string;
let forkLines: string[];
let forkBundle: Files;
let ledger: Ledger;
let root: string;
let base: string;

beforeAll(async () => {
  // Not tempDir(): that is emptied after each test, and these stores live for the whole file.
  base = mkdtempSync(join(tmpdir(), 'hl-tree-'));
  chmodSync(base, 0o700);
  const dir = (name: string) => {
    const d = join(base, name);
    mkdirSync(d, { mode: 0o700 });
    return d;
  };
  root = dir('store');
  ledger = await openLedger({ root, host: 'h1', origin: ORIGIN });
  await publish(ledger, 's1', 0);
  await publish(ledger, 's2', 0);
  earlier = (await ledger.checkpoint()).note;
  await publish(ledger, 's1', 1);
  await publish(ledger, 's2', 1);
  await publish(ledger, 's1', 2);
  trust = ledger.trustStore();
  const out = dir('out');
  await exportBundle(ledger, { out: join(out, 'full') });
  await exportBundle(ledger, { out: join(out, 's1'), session: 's1' });
  await exportBundle(ledger, { out: join(out, 'ghost'), session: 'ghost' });
  await exportBundle(ledger, { out: join(out, 's2'), session: 's2' });
  await exportBundle(ledger, { out: join(out, 'alice'), principal: 'alice' });
  full = readBundle(join(out, 'full'));
  filtered = readBundle(join(out, 's1'));
  absent = readBundle(join(out, 'ghost'));
  s2Only = readBundle(join(out, 's2'));
  byPrincipal = readBundle(join(out, 'alice'));
  // A fork: the same keys and origin, another history (what a host showing two auditors two logs holds).
  const forkRoot = dir('fork');
  cpSync(join(root, 'keys'), join(forkRoot, 'keys'), { recursive: true });
  cpSync(join(root, 'trust.json'), join(forkRoot, 'trust.json'));
  const fork = await openLedger({ root: forkRoot, host: 'h1', origin: ORIGIN });
  await publish(fork, 'other', 0);
  await publish(fork, 'other', 1);
  forkedEarlier = (await fork.checkpoint()).note;
  await exportBundle(fork, { out: join(out, 'fork') });
  forkBundle = readBundle(join(out, 'fork'));
  forkLines = forkBundle.lines;
  await fork.close();
});

afterAll(async () => {
  await ledger.close();
  rmSync(base, { recursive: true, force: true });
});

describe('step 9: full bundles against their checkpoint', () => {
  it('passes a clean bundle and reports the checkpoint', async () => {
    const r = await audit(full, trust);
    expect(found(r)).toEqual([]);
    expect(r.checkpoint).toMatchObject({ origin: ORIGIN, size: 5 });
  });

  it('catches tail truncation that the chains alone cannot see (TREE_SIZE_MISMATCH)', async () => {
    const r = await audit({ ...full, lines: full.lines.slice(0, 4) }, trust);
    // Step 10 sees it too: s1's head is not the committed one.
    expect(found(r)).toEqual(['TREE_SIZE_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
  });

  it('catches a removed or an added manifest (TREE_SIZE_MISMATCH)', async () => {
    const removed = await audit({ ...full, lines: [...full.lines.slice(0, 1), ...full.lines.slice(2)] }, trust);
    expect(found(removed)).toContain('TREE_SIZE_MISMATCH@-');
    const added = await audit({ ...full, lines: [...full.lines, full.lines[4]!] }, trust);
    expect(found(added)).toContain('TREE_SIZE_MISMATCH@-');
  });

  it('catches a reordering that keeps every chain valid (TREE_ROOT_MISMATCH)', async () => {
    const [a, b, ...rest] = full.lines;
    const r = await audit({ ...full, lines: [b!, a!, ...rest] }, trust);
    expect(found(r)).toEqual(['TREE_ROOT_MISMATCH@-']);
  });

  it('catches a validly signed manifest from a forked history in place of the newest one (TREE_ROOT_MISMATCH)', async () => {
    // Every chain still verifies: s1 merely looks one manifest shorter, and the fork's chain is complete.
    const r = await audit({ ...full, lines: [...full.lines.slice(0, 4), forkLines[0]!] }, trust);
    expect(found(r)).toEqual(['TREE_ROOT_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
  });

  it('catches a whole chain replayed from another log of the host, which bare chains cannot see (docs/AUDIT.md, Limitations)', async () => {
    // The fork's chain "other" is complete and signed by the trusted host key: steps 1-8 find nothing.
    const legacy = { version: 1 as const, keys: trust.keys };
    const added = { ...full, lines: [...full.lines, ...forkLines] };
    expect(found(await audit({ ...added, tree: {} }, legacy))).toEqual([]);
    expect(found(await audit(added, trust))).toEqual(['TREE_SIZE_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
    // In place of s2's chain (two lines for two): the size holds, the root does not.
    const s2 = (l: string) => JSON.parse(atob(JSON.parse(l).payload)).session === 's2';
    const replaced = { ...full, lines: [...full.lines.filter((l) => !s2(l)), ...forkLines] };
    expect(replaced.lines).toHaveLength(full.lines.length);
    expect(found(await audit(replaced, trust))).toEqual(['TREE_ROOT_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
  });

  it('requires a checkpoint when checkpoint keys are pinned (CHECKPOINT_MISSING)', async () => {
    const r = await audit({ ...full, tree: {} }, trust);
    expect(found(r)).toEqual(['CHECKPOINT_MISSING@-']);
    // Why a bundle without one is a finding here, where a bundle from before checkpoints passes without one.
    expect(r.findings[0]!.message).toBe(
      'the bundle has no checkpoint.note, which the pinned checkpoint keys require: without it, no line is held to a ' +
        'signed tree (newest manifests left out or lines replaced go unseen)',
    );
    expect(r.checked.completeness).toEqual({ checked: false, reason: 'no verified checkpoint' });
    // A trust file without checkpoint keys (bundles from before checkpoints) asks for none.
    const legacy = { version: 1 as const, keys: trust.keys };
    expect(found(await audit({ ...full, tree: {} }, legacy))).toEqual([]);
  });

  it('refuses a malformed, an unknown-key and a changed checkpoint', async () => {
    const note = full.tree['checkpoint.note']!;
    const bad = (text: string, t = trust) => audit({ ...full, tree: { 'checkpoint.note': text } }, t);
    expect(found(await bad(note.replace('\n\n', '\n')))).toEqual(['CHECKPOINT_INVALID@-']);
    const seed = new Uint8Array(32).fill(7);
    const body = note.slice(0, note.indexOf('\n\n') + 1);
    const forged = await signNote(body, [
      { name: ORIGIN, publicKey: noblePublicKey(seed), sign: (m) => nobleSign(m, seed) },
    ]);
    const unknown = await bad(forged);
    expect(found(unknown)).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    // The message says which keys were tried, so an auditor holding an old trust file knows to ask for the new one.
    expect(trust.checkpointKeys).toHaveLength(1);
    expect(unknown.findings[0]!.message).toBe(
      "checkpoint.note: no signature by the checkpoint key the trust file pins (one exported before the host's last key rotation lacks the new key)",
    );
    const two = { ...trust, checkpointKeys: [...trust.checkpointKeys!, trust.checkpointKeys![0]!] };
    expect((await bad(forged, two)).findings[0]!.message).toContain('no signature by any of the 2 checkpoint keys the');
    // A trust file that pins none, beside a bundle that carries a checkpoint.
    const legacy = await audit(full, { version: 1 as const, keys: trust.keys });
    expect(found(legacy)).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    expect(legacy.findings[0]!.message).toBe(
      'checkpoint.note: the trust file pins no checkpoint key (checkpointKeys: `keys export` writes them)',
    );
    expect(found(await bad(note.replace(/\n5\n/, '\n4\n')))).toEqual(['CHECKPOINT_SIGNATURE_INVALID@-']);
  });
});

describe('step 9: a revoked checkpoint key listed again', () => {
  // The note's signature names its key by origin and key hash, never by the trust entry's key id: a second listing of
  // the same verifier key by the same host under another key id, not revoked, must not hide the revocation. One trust
  // file read alone used to trust it; the same file merged with any other (mergeTrust: one listing per host and
  // verifier key, the most restrictive) did not. Another host's listing of the key is revoked too, alone or merged.
  it('refuses a checkpoint signed by a verifier key its host revokes in any listing, whatever key id another gives it', async () => {
    const ck = trust.checkpointKeys![0]!;
    const revoked = { ...ck, revokedAt: ck.notBefore };
    const renamed = { ...ck, keyId: 'ed25519:00000000000000000000000000000000' };
    const empty = { version: 1 as const, keys: [] };
    for (const checkpointKeys of [
      [revoked, renamed],
      [renamed, revoked],
    ]) {
      const alone = { ...trust, checkpointKeys };
      expect(found(await audit(full, alone))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
      // The verdict of the same file merged with another.
      expect(found(await audit(full, mergeTrust(alone, empty)))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    }
    // Revoked in its only listing: refused too (as before); listed unrevoked by another host: revoked too, in one file
    // as merged (every listing of a public key is revoked from its earliest revocation: sameKeyRevoked, mergeTrust).
    expect(found(await audit(full, { ...trust, checkpointKeys: [revoked] }))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    const shared = { ...trust, checkpointKeys: [revoked, { ...ck, host: 'h2' }] };
    expect(found(await audit(full, shared))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    expect(found(await audit(full, mergeTrust(shared, empty)))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
  });

  it('names the revoked key that signed the checkpoint, not a trust file that lacks it', async () => {
    const ck = trust.checkpointKeys![0]!;
    const revokedAt = ck.notBefore;
    const revoked = await audit(full, { ...trust, checkpointKeys: [{ ...ck, revokedAt }] });
    expect(found(revoked)).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    expect(revoked.findings[0]!.message).toBe(
      `checkpoint.note: signed by checkpoint key ${JSON.stringify(ck.keyId)} of host "h1", which the trust file ` +
        `revokes (at ${JSON.stringify(revokedAt)}): a revoked checkpoint key's checkpoints are refused whenever they ` +
        "were signed (checkpoints carry no time); a bundle exported since the revocation is signed by the host's current key",
    );
    // A note no pinned key signed, beside a revoked key that did not sign it either: the trust file may lack the key.
    const note = full.tree['checkpoint.note']!;
    const seed = new Uint8Array(32).fill(9);
    const forged = await signNote(note.slice(0, note.indexOf('\n\n') + 1), [
      { name: ORIGIN, publicKey: noblePublicKey(seed), sign: (m) => nobleSign(m, seed) },
    ]);
    const other = await audit(
      { ...full, tree: { 'checkpoint.note': forged } },
      {
        ...trust,
        checkpointKeys: [{ ...ck, revokedAt }],
      },
    );
    expect(found(other)).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    expect(other.findings[0]!.message).toContain('no signature by the checkpoint key the trust file pins');
  });

  it('demands a checkpoint of a bundle whose only pinned checkpoint keys are revoked: leaving it out does no better (CHECKPOINT_MISSING)', async () => {
    const ck = trust.checkpointKeys![0]!;
    const revokedOnly = { ...trust, checkpointKeys: [{ ...ck, revokedAt: ck.notBefore }] };
    // The newest manifest left out: with the checkpoint it is refused, without it it must not pass.
    const cut = { ...full, lines: full.lines.slice(0, -1) };
    expect(found(await audit(cut, revokedOnly))).toEqual(['CHECKPOINT_UNTRUSTED@-']);
    const stripped = await audit({ ...cut, tree: {} }, revokedOnly);
    expect(found(stripped)).toEqual(['CHECKPOINT_MISSING@-']);
    expect(stripped.ok).toBe(false);
    expect(stripped.findings[0]!.message).toMatch(
      /^the bundle has no checkpoint\.note, which the pinned checkpoint keys require/,
    );
  });
});

describe('step 9: filtered bundles and inclusion proofs', () => {
  it('passes a clean session export', async () => {
    const r = await audit(filtered, trust);
    expect(found(r)).toEqual([]);
    expect(filtered.lines).toHaveLength(3);
  });

  it('requires a proof per line (INCLUSION_PROOF_MISSING) and refuses a wrong one (INCLUSION_PROOF_INVALID)', async () => {
    const { 'proofs.jsonl': proofs, ...rest } = filtered.tree;
    expect(found(await audit({ ...filtered, tree: rest }, trust))).toEqual([
      'INCLUSION_PROOF_MISSING@1',
      'INCLUSION_PROOF_MISSING@2',
      'INCLUSION_PROOF_MISSING@3',
    ]);
    const lines = proofs!.split('\n');
    const p = JSON.parse(lines[1]!);
    p.leafIndex += 1;
    lines[1] = JSON.stringify(p);
    expect(
      found(await audit({ ...filtered, tree: { ...filtered.tree, 'proofs.jsonl': lines.join('\n') } }, trust)),
    ).toEqual(['INCLUSION_PROOF_INVALID@2']);
    // A manifest of another session slipped in with a proof of its own position fails the scope, not the tree.
    const changed = filtered.lines.slice();
    changed[2] = full.lines[3]!;
    expect(found(await audit({ ...filtered, lines: changed }, trust))).toContain('INCLUSION_PROOF_INVALID@3');
  });
});

describe('steps 9 and 10: hostile tree files of a filtered bundle', () => {
  // More lines than V8 makes an array of (~134 million): splitting the text aborted the process (not catchable).
  const flood = '\n'.repeat(135 * 2 ** 20);

  it('walks a proofs.jsonl of 141 million empty lines beside the bundle’s lines (INCLUSION_PROOF_MISSING each)', async () => {
    const r = await audit({ ...filtered, tree: { ...filtered.tree, 'proofs.jsonl': flood } }, trust);
    expect(found(r)).toEqual(['INCLUSION_PROOF_MISSING@1', 'INCLUSION_PROOF_MISSING@2', 'INCLUSION_PROOF_MISSING@3']);
  });

  it('reads the proofs of a heads.jsonl followed by 141 million empty lines (the verdict of the file without them)', async () => {
    const heads = filtered.tree['heads.jsonl']!;
    const r = await audit({ ...filtered, tree: { ...filtered.tree, 'heads.jsonl': heads + flood } }, trust);
    expect(found(r)).toEqual([]);
    expect(r.checked.completeness).toMatchObject({ checked: true });
  }, 60_000);

  it('parses no line of proofs.jsonl or heads.jsonl over 64 KiB, however well formed (a finding instead)', async () => {
    const pad = ' '.repeat(64 * 1024);
    const proofs = filtered.tree['proofs.jsonl']!.split('\n');
    proofs[1] = proofs[1]! + pad; // valid JSON, its proof good: too long all the same
    const heads = filtered.tree['heads.jsonl']!.split('\n');
    heads[0] = heads[0]! + pad;
    const r = await audit(
      { ...filtered, tree: { ...filtered.tree, 'proofs.jsonl': proofs.join('\n'), 'heads.jsonl': heads.join('\n') } },
      trust,
    );
    expect(found(r)).toEqual(['INCLUSION_PROOF_MISSING@2', 'SESSION_HEAD_INVALID@-', 'SESSION_HEAD_MISSING@-']);
    // Under the bound, the same padding is JSON's whitespace and passes.
    const short = ' '.repeat(1000);
    proofs[1] = proofs[1]!.trimEnd() + short;
    expect(
      found(await audit({ ...filtered, tree: { ...filtered.tree, 'proofs.jsonl': proofs.join('\n') } }, trust)),
    ).toEqual([]);
  });

  it('keeps no more leaves than the checkpoint has: lines past them are INCLUSION_PROOF_INVALID', async () => {
    // The checkpoint holds 5 entries; 6 copies of a line with a payload (each with its own proof line).
    const lines = Array.from({ length: 6 }, () => filtered.lines[0]!);
    const proof = filtered.tree['proofs.jsonl']!.split('\n')[0]!;
    const r = await audit(
      { ...filtered, lines, tree: { ...filtered.tree, 'proofs.jsonl': `${Array(6).fill(proof).join('\n')}\n` } },
      trust,
    );
    const excess = r.findings.filter(
      (f) => f.code === 'INCLUSION_PROOF_INVALID' && /more lines with a payload/.test(f.message),
    );
    expect(excess.map((f) => f.line)).toEqual([6]);
    expect(r.ok).toBe(false);
  });
});

describe('step 9: --since, an auditor’s earlier checkpoint', () => {
  it('accepts a bundle whose checkpoint extends the earlier one', async () => {
    expect(found(await audit(full, trust, { since: earlier }))).toEqual([]);
  });

  it('catches a history rewritten between two audits (CONSISTENCY_INVALID)', async () => {
    // The earlier audit saw the forked history; today's bundle is not an extension of it.
    expect(found(await audit(full, trust, { since: forkedEarlier }))).toEqual(['CONSISTENCY_INVALID@-']);
  });

  it('catches a rollback below the earlier checkpoint (CONSISTENCY_INVALID)', async () => {
    const later = (await ledger.checkpoint()).note;
    await publish(ledger, 's3', 0);
    const newer = (await ledger.checkpoint()).note;
    expect(later).not.toBe(newer);
    expect(found(await audit(full, trust, { since: newer }))).toEqual(['CONSISTENCY_INVALID@-']);
  });

  it('needs a consistency proof in a filtered bundle (CONSISTENCY_MISSING), and checks the exported one', async () => {
    expect(found(await audit(filtered, trust, { since: earlier }))).toEqual(['CONSISTENCY_MISSING@-']);
    const out = join(tempDir(), 'since');
    await exportBundle(ledger, { out, session: 's1', since: earlier });
    const withProof = readBundle(out);
    expect(found(await audit(withProof, trust, { since: earlier }))).toEqual([]);
    expect(found(await audit(withProof, trust, { since: forkedEarlier }))).toEqual(['CONSISTENCY_INVALID@-']);
  });

  it('says why a consistency.json is no proof from the earlier size: absent, malformed, or from another size', async () => {
    const out = join(tempDir(), 'since');
    await exportBundle(ledger, { out, session: 's1', since: earlier });
    const withProof = readBundle(out);
    const size = /\n(\d+)\n/.exec(earlier)![1]!;
    const said = async (consistency: string | undefined) => {
      const { 'consistency.json': _, ...tree } = withProof.tree;
      const r = await audit(
        { ...withProof, tree: consistency === undefined ? tree : { ...tree, 'consistency.json': consistency } },
        trust,
        { since: earlier },
      );
      expect(found(r)).toEqual(['CONSISTENCY_MISSING@-']);
      return r.findings[0]!.message;
    };
    expect(await said(undefined)).toBe(`no consistency proof from size ${size} (export it with --since)`);
    // The bundle was exported with --since: "export it with --since" alone sends the auditor to do what was done.
    expect(await said('{"oldSize":')).toBe(
      `no consistency proof from size ${size}: consistency.json is not a well-formed proof (export it again with --since)`,
    );
    expect(await said(JSON.stringify({ oldSize: 1, proof: [] }))).toBe(
      `no consistency proof from size ${size}: consistency.json proves the log from size 1 ` +
        `(export it with --since your earlier checkpoint)`,
    );
    // A size that is no count is malformed, never quoted.
    expect(await said('{"oldSize":"\\u001b[2J","proof":[]}')).toBe(
      `no consistency proof from size ${size}: consistency.json is not a well-formed proof (export it again with --since)`,
    );
  });

  it('judges the signed checkpoint, not the lines: a signed fork of the earlier one beside honest lines is CONSISTENCY_INVALID', async () => {
    // The host hands over today's lines with a checkpoint that forks the one the auditor kept (same size, another
    // root). The lines' first entries do match the earlier root; the tree the host signed does not.
    const r = await audit({ ...full, tree: { 'checkpoint.note': forkedEarlier } }, trust, { since: earlier });
    expect(found(r)).toContain('CONSISTENCY_INVALID@-');
    expect(r.findings.find((f) => f.code === 'CONSISTENCY_INVALID')?.message).toMatch(/another root at the same size/);
  });

  it('judges a checkpoint whose lines do not match it by its consistency proof, not by the lines', async () => {
    const out = join(tempDir(), 'since-full');
    await exportBundle(ledger, { out, since: earlier });
    const exported = readBundle(out);
    expect(exported.tree['consistency.json']).toBeDefined();
    // The first two lines swapped (two chains, each still valid): the lines no longer hash to the checkpoint, which
    // does extend the earlier one, as the exported proof shows.
    const swapped = { ...exported, lines: [exported.lines[1]!, exported.lines[0]!, ...exported.lines.slice(2)] };
    const codes = found(await audit(swapped, trust, { since: earlier }));
    expect(codes).toContain('TREE_ROOT_MISMATCH@-');
    expect(codes.filter((c) => c.startsWith('CONSISTENCY_'))).toEqual([]);
    // Without the proof, that it extends the earlier one is not shown.
    const { 'consistency.json': _, ...noProof } = swapped.tree;
    expect(found(await audit({ ...swapped, tree: noProof }, trust, { since: earlier }))).toContain(
      'CONSISTENCY_MISSING@-',
    );
  });

  it('refuses an earlier checkpoint that does not verify as a usage error (AuditError USAGE)', async () => {
    const err = await audit(full, trust, { since: 'not a note' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuditError);
    expect((err as AuditError).code).toBe('USAGE');
  });

  it('refuses it before reading any of the bundle, naming `since` as the library caller wrote it (verifyBundle, auditBundle)', async () => {
    // Another log's checkpoint (its key not pinned), and text that is no note.
    const seed = new Uint8Array(32).fill(9);
    const foreign = await signNote(`example.com/other\n1\n${'A'.repeat(43)}=\n`, [
      { name: 'example.com/other', publicKey: noblePublicKey(seed), sign: (m) => nobleSign(m, seed) },
    ]);
    for (const since of [foreign, 'not a note'])
      for (const call of [verifyBundle, auditBundle]) {
        const read: string[] = [];
        const reader = memoryBundleReader({
          manifests: full.lines.map((l) => `${l}\n`).join(''),
          treeFiles: full.tree,
        });
        const watched = new Proxy(reader, {
          get(target, name, receiver) {
            const member = Reflect.get(target, name, receiver) as unknown;
            if (typeof member !== 'function') return member;
            return (...args: unknown[]) => {
              read.push(String(name));
              return (member as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
        const err = await call(watched, { trust, since }).catch((e: unknown) => e);
        expect(err, call.name).toMatchObject({
          name: 'AuditError',
          code: 'USAGE',
          message: expect.stringMatching(/^since: the earlier checkpoint does not verify: /),
        });
        expect(read, call.name).toEqual([]);
      }
  });

  it('export refuses an earlier checkpoint it cannot prove from (AuditError USAGE, naming `since` as the library caller wrote it), writing no bundle', async () => {
    // Another log's (its own keys and origin, trusted or not); one of this log's keys and origin with more entries
    // than the log has (a host that showed the auditor a longer history), or with another root (a forked one); and
    // any, from a source that signs no checkpoints.
    const other = await openLedger({ root: tempDir(), host: 'h9', origin: 'example.com/other' });
    await publish(other, 'o', 0);
    const foreign = (await other.checkpoint()).note;
    const otherTrust = other.trustStore();
    await other.close();
    const longerRoot = tempDir();
    cpSync(join(root, 'keys'), join(longerRoot, 'keys'), { recursive: true });
    cpSync(join(root, 'trust.json'), join(longerRoot, 'trust.json'));
    const longer = await openLedger({ root: longerRoot, host: 'h1', origin: ORIGIN });
    const size = (await ledger.checkpoint()).checkpoint.size;
    for (let i = 0; i <= size; i++) await publish(longer, 'l', i);
    const larger = (await longer.checkpoint()).note;
    await longer.close();
    const plain = { host: ledger.host, log: ledger.log, blobs: ledger.blobs };
    // The other log's keys trusted beside this log's (openLedger's `trust`): its note is still not of this log.
    const own = ledger.trustStore();
    const merged = { ...own, checkpointKeys: [...(own.checkpointKeys ?? []), ...(otherTrust.checkpointKeys ?? [])] };
    const trusting = { ...plain, checkpoint: () => ledger.checkpoint(), trustStore: () => merged };
    for (const [source, since, message] of [
      [ledger, foreign, /^since: not a checkpoint of this log: /],
      [trusting, foreign, /^since: not a checkpoint of this log: /],
      // This log's origin and keys, no larger than the log, another root: a fork, from which no proof holds.
      [ledger, forkedEarlier, /^since: the earlier checkpoint has another root at size 2 than this log's tree/],
      // The refusal names the likely causes (a store restored from an older backup, another tree) and the remedies.
      [
        ledger,
        larger,
        new RegExp(
          `^since: the earlier checkpoint has ${size + 1} entries, the log ${size}: this store was restored from a backup taken before that checkpoint, or the checkpoint is of another, longer tree of this origin; export without since \\(a full bundle\\), or give a checkpoint of this log's tree$`,
        ),
      ],
      [plain, earlier, /^since needs a store with checkpoints$/],
    ] as const) {
      const out = join(tempDir(), 'bundle');
      const err = await exportBundle(source, { out, since }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuditError);
      expect(err).toMatchObject({ code: 'USAGE', message: expect.stringMatching(message) });
      expect(existsSync(out)).toBe(false);
    }
  });
});

describe("export since a note of this log's key whose checkpoint names another origin", () => {
  // Signed by this log's checkpoint key (its name is the log's origin), the body's origin line another: the refusal
  // quotes that line, the auditor's file's text, with what a terminal acts on escaped.
  it('refuses it (AuditError USAGE, no bundle), the origin quoted and escaped', async () => {
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const note = earlier.slice(0, earlier.indexOf('\n\n') + 1);
    const moved = await signNote(note.replace(/^[^\n]*\n/, 'evil\u202e\u009bx\n'), [signer]);
    const out = join(tempDir(), 'bundle');
    const err = await exportBundle(ledger, { out, since: moved }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuditError);
    expect((err as AuditError).message).toBe(
      'since: not a checkpoint of this log: its origin is another ("evil\\u202e\\u009bx")',
    );
    expect(existsSync(out)).toBe(false);
  });

  it('verify refuses it (USAGE, before the bundle is read), the origin escaped as export escapes it', async () => {
    // The same note given to verifyBundle / auditBundle: its key is pinned, its origin line names no pinned key. The
    // refusal quoted the auditor's file's origin raw (U+202E and U+009B as they are).
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const note = earlier.slice(0, earlier.indexOf('\n\n') + 1);
    const moved = await signNote(note.replace(/^[^\n]*\n/, 'evil\u202e\u009bx\n'), [signer]);
    for (const call of [verifyBundle, auditBundle]) {
      const reader = memoryBundleReader({ manifests: full.lines.map((l) => `${l}\n`).join(''), treeFiles: full.tree });
      const err = await call(reader, { trust, since: moved }).catch((e: unknown) => e);
      expect(err, call.name).toBeInstanceOf(AuditError);
      expect((err as AuditError).message, call.name).toBe(
        'since: the earlier checkpoint does not verify: no pinned key named "evil\\u202e\\u009bx" signed it',
      );
    }
  });
});

describe('export --since a checkpoint signed by a checkpoint key the store has since revoked', () => {
  // The auditor's note is this log's, signed by its checkpoint key of the time; the host key was revoked since (a
  // compromise), and the checkpoint key with it. export refused it as "not a checkpoint of this log: the note carries
  // no signature by a known key", which sent the operator looking for another log or a fork; verify --since names
  // the revoked key, and so does export now.
  it('refuses it (AuditError USAGE, no bundle) naming the revoked key, not as a note of another log', async () => {
    const ledger = await openLedger({ root: tempDir(), host: 'h1', origin: ORIGIN, onNotice: () => {} });
    try {
      await publish(ledger, 's', 0);
      const old = ledger.keyId;
      const revokedCheckpointKey = ledger.trustStore().checkpointKeys!.find((k) => k.revokedAt === undefined)!;
      const earlier = (await ledger.checkpoint()).note;
      await ledger.rotateKey();
      await ledger.revokeKey(old, '2000-01-01T00:00:00.000Z');
      await publish(ledger, 't', 1); // a new session: s's head is signed by the revoked key
      const out = join(tempDir(), 'bundle');
      const err = await exportBundle(ledger, { out, since: earlier }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuditError);
      expect(err).toMatchObject({ code: 'USAGE' });
      expect((err as Error).message).toBe(
        `since: the earlier checkpoint is signed by checkpoint key "${revokedCheckpointKey.keyId}" of host "h1", revoked (at "2000-01-01T00:00:00.000Z") in the keys this store trusts: a revoked checkpoint key's checkpoints are refused whenever they were signed (checkpoints carry no time); export without since, and give the auditor the new bundle's checkpoint to keep`,
      );
      expect(existsSync(out)).toBe(false);
    } finally {
      await ledger.close();
    }
  });
});

describe('step 9d: witnesses, against a host that shows two auditors two trees', () => {
  const witness = (name: string, byte: number) => {
    const seed = new Uint8Array(32).fill(byte);
    const signer = { name, publicKey: noblePublicKey(seed), sign: (m: Uint8Array) => nobleSign(m, seed) };
    return { signer, key: parseCosignerKey(encodeCosignerKey(name, signer.publicKey)) };
  };
  const w1 = witness('witness.example/w1', 41);
  const w2 = witness('witness.example/w2', 42);
  const stranger = witness('witness.example/unpinned', 43);
  const policy = (quorum: number) => ({ witnesses: { keys: [w1.key, w2.key], quorum } });
  const textOf = (note: string) => note.slice(0, note.indexOf('\n\n') + 1);
  const cosigned = async (f: Files, ...by: Array<typeof w1>) => {
    const note = f.tree['checkpoint.note']!;
    const lines = await Promise.all(by.map((w) => cosignCheckpoint(textOf(note), w.signer, 1_764_547_200)));
    return { ...f, tree: { ...f.tree, 'checkpoint.note': note + lines.join('') } };
  };

  it('passes a checkpoint with a quorum of pinned cosignatures and names who signed and when', async () => {
    const r = await audit(await cosigned(full, w1, w2), trust, policy(2));
    expect(found(r)).toEqual([]);
    expect(r.checkpoint?.witnesses).toEqual({
      quorum: 2,
      pinned: 2,
      signedBy: [
        {
          witness: expect.stringMatching(/^witness\.example\/w1\+[0-9a-f]{8}$/),
          timestamp: 1_764_547_200,
          time: '2025-12-01T00:00:00.000Z',
        },
        {
          witness: expect.stringMatching(/^witness\.example\/w2\+/),
          timestamp: 1_764_547_200,
          time: '2025-12-01T00:00:00.000Z',
        },
      ],
    });
  });

  it('reports a witness whose clock is past any date (the spec allows 2^63 - 1 seconds) instead of failing on it', async () => {
    const note = full.tree['checkpoint.note']!;
    const far = await cosignCheckpoint(textOf(note), w1.signer, Number.MAX_SAFE_INTEGER);
    const r = await audit({ ...full, tree: { ...full.tree, 'checkpoint.note': note + far } }, trust, policy(1));
    expect(found(r)).toEqual([]);
    expect(r.checkpoint?.witnesses?.signedBy).toEqual([
      expect.objectContaining({
        timestamp: Number.MAX_SAFE_INTEGER,
        time: '9007199254740991 s after 1970-01-01T00:00:00Z',
      }),
    ]);
  });

  it('refuses the other tree, which an honest witness already holding the first would not cosign (WITNESS_QUORUM_MISSING)', async () => {
    // The fork carries the host's valid signature: without witnesses it passes.
    expect(found(await audit(forkBundle, trust))).toEqual([]);
    expect(found(await audit(await cosigned(forkBundle, w2), trust, policy(2)))).toEqual(['WITNESS_QUORUM_MISSING@-']);
  });

  it('does not count a cosignature of the other tree pasted onto this one (WITNESS_COSIGNATURE_INVALID)', async () => {
    const forkLine = (await cosigned(forkBundle, w2)).tree['checkpoint.note']!.split('\n\n')[1]!
      .split('\n')
      .find((l) => l.includes('/w2 '))!;
    const f = await cosigned(full, w1);
    const pasted = { ...f, tree: { ...f.tree, 'checkpoint.note': `${f.tree['checkpoint.note']!}${forkLine}\n` } };
    expect(found(await audit(pasted, trust, policy(2)))).toEqual([
      'WITNESS_COSIGNATURE_INVALID@-',
      'WITNESS_QUORUM_MISSING@-',
    ]);
  });

  it('ignores cosignatures by unpinned witnesses, and counts one witness once', async () => {
    expect(found(await audit(await cosigned(full, w1, stranger), trust, policy(1)))).toEqual([]);
    expect(found(await audit(await cosigned(full, w1, w1, stranger), trust, policy(2)))).toEqual([
      'WITNESS_QUORUM_MISSING@-',
    ]);
  });

  it('demands a checkpoint when witnesses are pinned (CHECKPOINT_MISSING), and refuses a quorum above the pinned keys (USAGE)', async () => {
    const r = await audit({ ...full, tree: {} }, { ...trust, checkpointKeys: [] }, policy(1));
    expect(found(r)).toEqual(['CHECKPOINT_MISSING@-']);
    expect(r.findings[0]!.message).toBe(
      'the bundle has no checkpoint.note, which the pinned witness keys require: without it, no line is held to a ' +
        'signed tree (newest manifests left out or lines replaced go unseen)',
    );
    await expect(audit(full, trust, policy(3))).rejects.toMatchObject({ code: 'USAGE' });
  });
});

describe('step 10: completeness against the session-heads index', () => {
  /** Drops the lines (and their inclusion proofs) a host would leave out; heads.jsonl stays as exported. */
  const withoutLines = (f: Files, drop: number[]): Files => {
    const keep = (_: unknown, i: number) => !drop.includes(i);
    const proofs = f.tree['proofs.jsonl']!.split('\n').slice(0, -1).filter(keep);
    return {
      ...f,
      lines: f.lines.filter(keep),
      tree: { ...f.tree, 'proofs.jsonl': proofs.map((l) => `${l}\n`).join('') },
    };
  };
  const headsOf = (f: Files) =>
    f.tree['heads.jsonl']!.split('\n')
      .slice(0, -1)
      .map((l) => JSON.parse(l));
  const withHeads = (f: Files, lines: unknown[]): Files => ({
    ...f,
    tree: { ...f.tree, 'heads.jsonl': lines.map((l) => `${JSON.stringify(l)}\n`).join('') },
  });

  it('checks full and filtered bundles and says so in the report', async () => {
    const r = await audit(full, trust);
    expect(r.checked.completeness).toEqual({ checked: true, sessions: 2 });
    expect(r.checkpoint?.extensions).toEqual([
      expect.stringMatching(/^handoff-ledger\/session-heads [A-Za-z0-9+/]{43}=$/),
    ]);
    const f = await audit(filtered, trust);
    expect(found(f)).toEqual([]);
    expect(f.checked.completeness).toEqual({ checked: true, sessions: 1 });
    expect(headsOf(filtered)).toEqual([
      { session: 's1', head: { seq: 2, id: f.chains[0]!.head }, proof: expect.any(Object) },
    ]);
    const p = await audit(byPrincipal, trust);
    expect(found(p)).toEqual([]);
    expect(p.checked.completeness).toEqual({ checked: true, sessions: 2 });
  });

  it("exports a principal's session it never published in as an empty bundle that verifies", async () => {
    const out = join(base, 'out', 'carol-s1');
    await exportBundle(ledger, { out, principal: 'carol', session: 's1' });
    const f = readBundle(out);
    expect(f.lines).toEqual([]);
    expect(f.tree['heads.jsonl']).toBe('');
    const r = await audit(f, trust);
    expect(found(r)).toEqual([]);
    expect(r.checked.completeness).toEqual({ checked: true, sessions: 0 });
  });

  it('exports a session that does not exist as an empty bundle proving it absent', async () => {
    expect(absent.lines).toEqual([]);
    expect(headsOf(absent)).toEqual([{ session: 'ghost', head: null, proof: expect.any(Object) }]);
    const r = await audit(absent, trust);
    expect(found(r)).toEqual([]);
    expect(r.checked.completeness).toEqual({ checked: true, sessions: 1 });
  });

  it('catches a filtered export whose newest manifests were left out (SESSION_TAIL_MISSING), which step 9 cannot', async () => {
    const cut = withoutLines(filtered, [2]);
    const r = await audit(cut, trust);
    expect(found(r)).toEqual(['SESSION_TAIL_MISSING@-']);
    expect(r.findings[0]).toMatchObject({ chain: 's1', evidence: { expected: 2, actual: 1 } });
    // Every chain and every inclusion proof passes: only the completeness proof shows the missing tail.
    expect(r.chains).toEqual([expect.objectContaining({ session: 's1', headSeq: 1 })]);
    // The report's "checked" line does not call the head proven that the finding says is not.
    expect(describeCoverage(r)).toMatch(
      /; completeness \(checked against the checkpoint: not proven, see the findings\)$/,
    );
    expect(describeCoverage(await audit(filtered, trust))).toMatch(
      /; completeness \(1 session head proven at the checkpoint\)$/,
    );
    // A whole session of a principal's export left out, its proof kept: the chain is empty.
    const s2Lines = byPrincipal.lines.flatMap((l, i) =>
      JSON.parse(atob(JSON.parse(l).payload)).session === 's2' ? [i] : [],
    );
    expect(found(await audit(withoutLines(byPrincipal, s2Lines), trust))).toEqual(['SESSION_TAIL_MISSING@-']);
  });

  it("says a proven session's chain is outside the auditor's scope, not that the bundle's chain is empty", async () => {
    // alice's export audited for s1 alone: s2's chain is in the bundle, its head proven, but outside the scope.
    const r = await audit(byPrincipal, trust, { scope: { session: 's1' } });
    expect(found(r)).toEqual(['OUT_OF_SCOPE@2', 'SESSION_TAIL_MISSING@-']);
    expect(r.findings[1]!.message).toBe(
      "session s2 has manifests up to seq 1 at the checkpoint; the bundle's chain (to seq 1) is outside the scope (OUT_OF_SCOPE)",
    );
    // Left out of the bundle whole, it is none of the bundle's.
    const s2Lines = byPrincipal.lines.flatMap((l, i) =>
      JSON.parse(atob(JSON.parse(l).payload)).session === 's2' ? [i] : [],
    );
    const cut = await audit(withoutLines(byPrincipal, s2Lines), trust);
    expect(cut.findings.map((f) => f.message)).toEqual([
      'session s2 has manifests up to seq 1 at the checkpoint; the bundle holds none of them',
    ]);
  });

  it('catches the shortened chain with its proof removed (SESSION_HEAD_MISSING) or replaced by an old one (SESSION_HEAD_INVALID)', async () => {
    const cut = withoutLines(filtered, [2]);
    expect(found(await audit(withHeads(cut, []), trust))).toEqual(['SESSION_HEAD_MISSING@-']);
    const { 'heads.jsonl': _, ...tree } = cut.tree;
    expect(found(await audit({ ...cut, tree }, trust))).toEqual(['SESSION_HEAD_MISSING@-']);
    // The attacker claims the shorter head with the real proof: it does not lead to the checkpoint's root.
    const [line] = headsOf(cut);
    const r = await audit(
      withHeads(cut, [{ ...line, head: { seq: 1, id: (await audit(cut, trust)).chains[0]!.head } }]),
      trust,
    );
    expect(found(r)).toEqual(['SESSION_HEAD_INVALID@-']);
    expect(found(await audit(withHeads(cut, ['not an object']), trust))).toEqual([
      'SESSION_HEAD_INVALID@-',
      'SESSION_HEAD_MISSING@-',
    ]);
  });

  it("holds a full bundle's every chain to the root also when the auditor asks for one session (no false mismatch)", async () => {
    const r = await audit(full, trust, { scope: { session: 's1' } });
    // The other session is outside the auditor's scope, and nothing else: the bundle is untampered.
    expect([...new Set(found(r).map((f) => f.split('@')[0]))]).toEqual(['OUT_OF_SCOPE']);
    expect(r.checked.completeness).toEqual({ checked: true, sessions: 2 });
  });

  it("lets only the auditor's own principal waive the auditor's session: a principal the header adds does not", async () => {
    // s1's export with everything taken out, and the unsigned header rewritten to name a principal.
    const emptied = withHeads({ ...filtered, lines: [], tree: { ...filtered.tree, 'proofs.jsonl': '' } }, []);
    const header = (filters: object) => JSON.stringify({ ...JSON.parse(filtered.header), filters });
    const asked = { scope: { session: 's1' } };
    expect(found(await audit(emptied, trust, asked))).toEqual(['SESSION_HEAD_MISSING@-']);
    const disguised = { ...emptied, header: header({ principal: 'nobody' }) };
    const r = await audit(disguised, trust, asked);
    expect(r.checked.scopeFrom).toBe('auditor and header');
    expect(found(r)).toEqual(['SESSION_HEAD_MISSING@-']);
    // The auditor's own --principal still narrows what must be there: the bundle may rightly hold nothing.
    expect(found(await audit(disguised, trust, { scope: { session: 's1', principal: 'nobody' } }))).toEqual([]);
  });

  it('catches a session that exists claimed absent (SESSION_HEAD_INVALID)', async () => {
    // The host hands over s2's export as "nothing": no lines, and the absence proof of another session.
    const [ghost] = headsOf(absent);
    const claimed = withHeads({ ...s2Only, lines: [], tree: { ...s2Only.tree, 'proofs.jsonl': '' } }, [
      { ...ghost, session: 's2' },
    ]);
    expect(found(await audit(claimed, trust))).toEqual(['SESSION_HEAD_INVALID@-']);
    // s2's own proof with its head dropped: no longer an absence proof either.
    const [own] = headsOf(s2Only);
    expect(found(await audit(withHeads(claimed, [{ ...own, head: null }]), trust))).toEqual(['SESSION_HEAD_INVALID@-']);
  });

  it("catches heads that are not the log's: a host signing another index (SESSION_HEAD_MISMATCH)", async () => {
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const note = full.tree['checkpoint.note']!;
    const body = note.slice(0, note.indexOf('\n\n') + 1);
    const other = sessionHeadsLine(
      sessionHeadsRoot([{ session: 's1', head: { seq: 1, id: 'blake3:' + '0'.repeat(64) } }]),
    );
    const forged = await signNote(body.replace(/handoff-ledger\/session-heads .*\n/, `${other}\n`), [signer]);
    const r = await audit({ ...full, tree: { 'checkpoint.note': forged } }, trust);
    expect(found(r)).toEqual(['SESSION_HEAD_MISMATCH@-']);
    expect(describeCoverage(r)).toContain(
      'completeness (checked against the checkpoint: not proven, see the findings)',
    );
    // The filtered bundle against that checkpoint: the lines are still in the tree (same root), but the honest
    // head proof does not lead to the signed index root.
    expect(found(await audit({ ...filtered, tree: { ...filtered.tree, 'checkpoint.note': forged } }, trust))).toEqual([
      'SESSION_HEAD_INVALID@-',
    ]);
  });

  it('checks nothing of completeness against a checkpoint without the line (older bundles), and says so', async () => {
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const note = filtered.tree['checkpoint.note']!;
    const body = note.slice(0, note.indexOf('\n\n') + 1).replace(/handoff-ledger\/session-heads .*\n/, '');
    const older = await signNote(body, [signer]);
    const cut = withoutLines(filtered, [2]);
    const r = await audit({ ...cut, tree: { ...cut.tree, 'checkpoint.note': older } }, trust);
    expect(found(r)).toEqual([]);
    expect(r.checked.completeness).toEqual({ checked: false, reason: 'no session-heads line in the checkpoint' });
    const twice = await signNote(
      `${body}${sessionHeadsLine(EMPTY_HEADS_ROOT)}\n${sessionHeadsLine(EMPTY_HEADS_ROOT)}\n`,
      [signer],
    );
    const r2 = await audit({ ...full, tree: { 'checkpoint.note': twice } }, trust);
    expect(found(r2)).toEqual(['SESSION_HEAD_INVALID@-']);
    expect(r2.checked.completeness).toEqual({ checked: false, reason: 'malformed session-heads line' });
  });
});

describe("the unsigned header's filters: a full bundle passed off as a filtered one", () => {
  /** The full bundle with the sessions `keep` does not name dropped and proofs derived from the bundle itself. */
  const passedOff = async (keep: (s: string) => boolean, filters: { session?: string; principal?: string }) => {
    const chains = (await audit(full, trust)).chains;
    const d = await deriveFiltered(full, chains, keep, filters);
    return {
      header: d.header,
      lines: d.lines,
      tree: { ...full.tree, 'proofs.jsonl': d.proofs, 'heads.jsonl': d.heads },
    };
  };
  const unstated = { expect: undefined };

  it('does not let the header alone choose the filtered checks: s2 dropped, session s1 declared (SCOPE_UNCONFIRMED)', async () => {
    const s1Only = await passedOff((s) => s === 's1', { session: 's1' });
    const r = await audit(s1Only, trust, unstated);
    expect(found(r)).toEqual(['SCOPE_UNCONFIRMED@-']);
    expect(r.findings[0]!.message).toMatch(
      /^bundle\.json declares session s1, which the auditor did not ask for: .* name it \(--session s1\) or expect a filtered bundle \(--expect filtered\)$/,
    );
    expect(r.checked).toMatchObject({ expect: 'none', bundle: 'filtered', scopeFrom: 'header' });
    // Expecting the whole log, the auditor gets the full bundle's checks: the dropped chain shows.
    const asFull = await audit(s1Only, trust, { expect: 'full' });
    expect(found(asFull)).toEqual(['SCOPE_UNEXPECTED@-', 'TREE_SIZE_MISMATCH@-', 'SESSION_HEAD_MISMATCH@-']);
    expect(asFull.checked).toMatchObject({ expect: 'full', bundle: 'full', scopeFrom: 'none' });
    expect(asFull.checked.scope).toBeUndefined();
    // Asking for s1 (by name, or by expecting a filtered bundle): s1's chain, whole, is what the auditor gets.
    expect(found(await audit(s1Only, trust, { ...unstated, scope: { session: 's1' } }))).toEqual([]);
    expect(found(await audit(s1Only, trust, { expect: 'filtered' }))).toEqual([]);
  });

  it('does not let it drop every chain either: a principal no chain has (SCOPE_UNCONFIRMED)', async () => {
    const nothing = await passedOff(() => false, { principal: 'nobody' });
    expect(nothing.lines).toEqual([]);
    const r = await audit(nothing, trust, unstated);
    expect(found(r)).toEqual(['SCOPE_UNCONFIRMED@-']);
    expect(found(await audit(nothing, trust, { expect: 'full' }))).toEqual([
      'SCOPE_UNEXPECTED@-',
      'TREE_SIZE_MISMATCH@-',
      'SESSION_HEAD_MISMATCH@-',
    ]);
  });

  it("holds a filter only the header adds to the auditor's scope for confirmation too", async () => {
    const s1Only = await passedOff((s) => s === 's1', { session: 's1', principal: 'alice' });
    const r = await audit(s1Only, trust, { ...unstated, scope: { session: 's1' } });
    expect(found(r)).toEqual(['SCOPE_UNCONFIRMED@-']);
    expect(r.findings[0]!.message).toMatch(
      /^bundle\.json declares principal alice, which the auditor did not ask for: /,
    );
    expect(r.checked.scopeFrom).toBe('auditor and header');
    expect(found(await audit(s1Only, trust, { ...unstated, scope: { session: 's1', principal: 'alice' } }))).toEqual(
      [],
    );
    expect(found(await audit(s1Only, trust, { expect: 'filtered', scope: { session: 's1' } }))).toEqual([]);
  });

  it('finds a full bundle where the auditor expects a filtered one (SCOPE_UNEXPECTED), checked as the full bundle it is', async () => {
    const r = await audit(full, trust, { expect: 'filtered' });
    expect(found(r)).toEqual(['SCOPE_UNEXPECTED@-']);
    expect(r.findings[0]!.message).toBe(
      'expected a filtered bundle (--expect filtered), but bundle.json declares no filters: checked as a full bundle',
    );
    expect(r.checked).toMatchObject({ expect: 'filtered', bundle: 'full' });
    const ok = await audit(full, trust, { expect: 'full' });
    expect(found(ok)).toEqual([]);
    expect(ok.checked).toMatchObject({ expect: 'full', bundle: 'full' });
  });

  it("refuses an expectation that is neither 'full' nor 'filtered' (AuditError USAGE)", async () => {
    await expect(audit(full, trust, { expect: 'whole' as 'full' })).rejects.toMatchObject({
      name: 'AuditError',
      code: 'USAGE',
      message: `verifyBundle's expect must be 'full' or 'filtered', not "whole"`,
    });
  });
});

describe('the step-9 tamper matrix', () => {
  it('provokes every step-9 finding code', () => {
    expect([...provoked].filter((c) => CHECKPOINT_FINDING_CODES.includes(c)).sort()).toEqual(
      [...CHECKPOINT_FINDING_CODES].sort(),
    );
  });
});
