/**
 * Tampered bundles as files: each case starts from the same valid two-chain bundle, applies one
 * mutation from the tamper matrix (test/audit/tamper.test.ts) and says which findings (code@line) the
 * auditor must report. Used where the whole bundle must exist on disk: the CLI and the auditor's page
 * are both run on each case and must agree with the expected findings and with each other.
 */
import { storedSummaryProblem } from '../../manifests/format/summary.js';
import type { Envelope } from '../../manifests/crypto/envelope.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import {
  at,
  buildBundle,
  ChainBuilder,
  jsonl,
  makeKey,
  signPayload,
  trustOf,
  writeBundleDir,
  writeTrustFile,
  type LayoutOptions,
  type TestBundle,
} from './bundle-builder.js';

export function editEnvelope(line: string, edit: (e: Envelope) => void): string {
  const e = JSON.parse(line) as Envelope;
  edit(e);
  return JSON.stringify(e);
}

/** Flips the lowest bit of the first byte of `marker`'s value inside the signed payload. */
export function flipPayloadBit(line: string, marker: string): string {
  return editEnvelope(line, (e) => {
    const bytes = Buffer.from(e.payload, 'base64');
    const i = bytes.indexOf(marker);
    if (i < 0) throw new Error(`marker ${marker} not in the payload`);
    bytes[i + marker.length]! ^= 1;
    e.payload = bytes.toString('base64');
  });
}

export function flipSignatureBit(line: string): string {
  return editEnvelope(line, (e) => {
    const sig = Buffer.from(e.signatures[0]!.sig, 'base64');
    sig[10]! ^= 1;
    e.signatures[0]!.sig = sig.toString('base64');
  });
}

export interface TamperedBundle {
  lines: string[];
  layout?: LayoutOptions;
  trust?: TrustStore;
}

export interface TamperCase {
  name: string;
  /** code@line of every finding, in report order (`-` for bundle-level findings). */
  expected: string[];
  make: (b: TestBundle) => Promise<TamperedBundle>;
}

/** s1 (alice) seq 0-4 and s2 (bob) seq 0-3, interleaved: line 2k+1 = s1#k, line 2k+2 = s2#k, line 9 = s1#4. */
export const TAMPER_SPEC = {
  chains: [
    { session: 's1', principal: 'alice', count: 5 },
    { session: 's2', principal: 'bob', count: 4 },
  ],
};

const withLines = (b: TestBundle, edit: (lines: string[]) => void | Promise<void>) => async () => {
  const lines = [...b.lines];
  await edit(lines);
  return lines;
};

export const TAMPER_CASES: TamperCase[] = [
  { name: 'clean', expected: [], make: async (b) => ({ lines: [...b.lines], layout: { blobs: b.blobs } }) },
  {
    name: 'signature-bit',
    expected: ['SIGNATURE_INVALID@9'],
    make: async (b) => ({ lines: await withLines(b, (l) => void (l[8] = flipSignatureBit(l[8]!)))() }),
  },
  {
    name: 'payload-bit-mid-chain',
    expected: ['SIGNATURE_INVALID@5', 'SEQ_GAP@7'],
    make: async (b) => ({ lines: await withLines(b, (l) => void (l[4] = flipPayloadBit(l[4]!, '"run":"')))() }),
  },
  {
    name: 'payload-key-id-bit',
    expected: ['KEY_UNTRUSTED@9'],
    make: async (b) => ({
      lines: await withLines(b, (l) => void (l[8] = flipPayloadBit(l[8]!, '"keyId":"ed25519:')))(),
    }),
  },
  {
    name: 'line-removed',
    expected: ['SEQ_GAP@6'],
    make: async (b) => ({ lines: await withLines(b, (l) => void l.splice(4, 1))() }),
  },
  {
    name: 'first-removed',
    expected: ['SEQ_NOT_ZERO@3'],
    make: async (b) => ({ lines: await withLines(b, (l) => void l.splice(1, 1))() }),
  },
  {
    name: 'count-mismatch',
    expected: ['COUNT_MISMATCH@-'],
    make: async (b) => ({ lines: await withLines(b, (l) => void l.pop())(), layout: { count: 9 } }),
  },
  {
    name: 'duplicate',
    expected: ['DUPLICATE@6'],
    make: async (b) => ({ lines: await withLines(b, (l) => void l.splice(5, 0, l[2]!))() }),
  },
  {
    name: 'reordered',
    expected: ['OUT_OF_ORDER@5'],
    make: async (b) => ({ lines: await withLines(b, (l) => void ([l[2], l[4]] = [l[4]!, l[2]!]))() }),
  },
  {
    name: 'not-json-line',
    expected: ['LINE_NOT_JSON@4'],
    make: async (b) => ({ lines: await withLines(b, (l) => void l.splice(3, 0, 'this is not json'))() }),
  },
  {
    name: 'replayed-out-of-scope',
    // Verified with no scope or expectation of the auditor's: the header's filter alone is SCOPE_UNCONFIRMED too.
    expected: ['OUT_OF_SCOPE@3', 'SCOPE_UNCONFIRMED@-'],
    make: async (b) => {
      const lines = b.chains.get('s1')!.built.map((m) => m.line);
      lines.splice(2, 0, b.chains.get('s2')!.built[0]!.line);
      return { lines, layout: { filters: { session: 's1' } } };
    },
  },
  {
    name: 'key-expired',
    expected: ['KEY_EXPIRED@7', 'KEY_EXPIRED@8', 'KEY_EXPIRED@9'],
    make: async (b) => ({ lines: [...b.lines], trust: trustOf({ ...b.key.trusted, notAfter: at(3) }) }),
  },
  {
    name: 'key-revoked',
    expected: ['KEY_REVOKED@9'],
    make: async (b) => ({ lines: [...b.lines], trust: trustOf({ ...b.key.trusted, revokedAt: at(4) }) }),
  },
  {
    name: 'fork',
    expected: ['FORK@10'],
    make: async (b) => {
      const s1 = b.chains.get('s1')!;
      const twin = await new ChainBuilder(b.key, { principal: 'alice', session: 's1', run: 'run-2' }).next({
        seq: 4,
        prev: s1.built[3]!.id,
        createdAt: at(4),
      });
      return { lines: [...b.lines, twin.line] };
    },
  },
  {
    name: 'prev-mismatch',
    expected: ['PREV_MISMATCH@10'],
    make: async (b) => {
      const s1 = b.chains.get('s1')!;
      return { lines: [...b.lines, (await s1.next({ prev: s1.built[3]!.id })).line] };
    },
  },
  {
    name: 'session-mismatch',
    expected: ['SESSION_MISMATCH@10'],
    make: async (b) => ({
      lines: [...b.lines, (await b.chains.get('s1')!.next({ prev: b.chains.get('s2')!.built[3]!.id })).line],
    }),
  },
  {
    name: 'time-reversed',
    expected: ['TIME_REVERSED@10'],
    make: async (b) => ({ lines: [...b.lines, (await b.chains.get('s1')!.next({ createdAt: at(2) })).line] }),
  },
  {
    name: 'truncated',
    expected: ['LINE_TRUNCATED@9'],
    make: async (b) => ({ lines: [...b.lines], layout: { text: jsonl(b.lines).slice(0, -40) } }),
  },
  {
    name: 'envelope-invalid',
    expected: ['ENVELOPE_INVALID@10', 'ENVELOPE_INVALID@11'],
    make: async (b) => ({
      lines: [
        ...b.lines,
        // Unknown fields are ignored (DSSE); a keyid that is not a string is not a DSSE envelope.
        editEnvelope(b.lines[0]!, (e) => void ((e.signatures[0] as unknown as Record<string, unknown>).keyid = 1)),
        editEnvelope(b.lines[0]!, (e) => void (e.payload = `${e.payload.slice(0, -4)}====`)),
      ],
    }),
  },
  {
    name: 'payload-type',
    expected: ['PAYLOAD_TYPE@10'],
    make: async (b) => ({
      lines: [
        ...b.lines,
        (await signPayload({ _type: 'https://in-toto.io/Statement/v1' }, b.key, 'application/vnd.in-toto+json')).line,
      ],
    }),
  },
  {
    name: 'other-host-key',
    expected: ['KEY_UNTRUSTED@10'],
    make: async (b) => {
      const other = makeKey('host-b', 2);
      const line = (await b.chains.get('s1')!.next({}, { signWith: other })).line;
      return { lines: [...b.lines, line], trust: trustOf(b.key.trusted, other.trusted) };
    },
  },
  {
    name: 'blob-missing',
    expected: ['BLOB_MISSING@1'],
    make: async (b) => {
      const blobs = new Map(b.blobs);
      blobs.delete(b.manifests[0]!.manifest.summary.digest);
      return { lines: [...b.lines], layout: { blobs } };
    },
  },
  {
    name: 'blob-bit',
    expected: ['BLOB_DIGEST@4'],
    make: async (b) => {
      const blobs = new Map(b.blobs);
      const digest = b.chains.get('s2')!.built[1]!.manifest.summary.digest;
      const bytes = Uint8Array.from(blobs.get(digest)!);
      bytes[3]! ^= 1;
      return { lines: [...b.lines], layout: { blobs: blobs.set(digest, bytes) } };
    },
  },
  {
    name: 'blob-truncated',
    expected: ['BLOB_SIZE@3'],
    make: async (b) => {
      const blobs = new Map(b.blobs);
      const digest = b.manifests[2]!.manifest.summary.digest;
      return { lines: [...b.lines], layout: { blobs: blobs.set(digest, blobs.get(digest)!.subarray(0, 10)) } };
    },
  },
  {
    name: 'summary-invalid',
    expected: ['SUMMARY_INVALID@10'],
    make: async (b) => {
      const bad = new TextEncoder().encode('{"task":"x"}');
      if (storedSummaryProblem(bad) === undefined) throw new Error('the bad summary must be refused');
      const m = await b.chains.get('s1')!.next({}, { blob: bad });
      return { lines: [...b.lines, m.line], layout: { blobs: new Map(b.blobs).set(m.manifest.summary.digest, bad) } };
    },
  },
];

/**
 * A bundle written to attack the page itself: markup and script in every string the verifier may
 * quote, terminal escapes, and an over-long line. Its findings are ordinary; what matters is that no
 * bundle text is ever interpreted.
 */
export const HOSTILE_MARKUP = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>';
/** The hostile manifest's unknown field: markup, an OSC terminal escape (sets the window title) and U+202E. */
export const HOSTILE_FIELD = `${HOSTILE_MARKUP}\u001b]0;title\u0007\u202e`;
export const HOSTILE_CASE: TamperCase = {
  name: 'hostile',
  expected: ['MANIFEST_INVALID@10', 'LINE_NOT_JSON@11', 'ENVELOPE_INVALID@12', 'LINE_TOO_LONG@13'],
  make: async (b) => {
    const s1 = b.chains.get('s1')!.built;
    // One unknown field, the one MANIFEST_INVALID names (quoted: `"` as `\"`, what a terminal acts on as \uXXXX).
    const extra = { [HOSTILE_FIELD]: '\u001b[31mred\u001b[0m' };
    const signed = await signPayload(
      { ...s1[4]!.manifest, seq: 5, prev: s1[4]!.id, createdAt: at(5), ...extra },
      b.key,
    );
    const envelope = editEnvelope(
      b.lines[0]!,
      // Unknown envelope fields are ignored (DSSE): the markup sits in a keyid that is not a string.
      (e) => void ((e.signatures[0] as unknown as Record<string, unknown>).keyid = { [HOSTILE_MARKUP]: 1 }),
    );
    return {
      lines: [
        ...b.lines,
        signed.line,
        `\u001b[2J\u001b[31m${HOSTILE_MARKUP}`,
        envelope,
        `"${HOSTILE_MARKUP.repeat(1 + (128 * 1024) / HOSTILE_MARKUP.length)}"`,
      ],
    };
  },
};

/** Writes a case as a bundle directory plus its trust file; returns the paths. */
export async function writeCase(
  c: TamperCase,
  dir: string,
  trustPath: string,
): Promise<{ dir: string; trustPath: string }> {
  const b = await buildBundle(TAMPER_SPEC);
  const t = await c.make(b);
  await writeBundleDir(dir, t.lines, t.layout);
  await writeTrustFile(trustPath, t.trust ?? b.trust);
  return { dir, trustPath };
}
