/**
 * What anyone holding a FULL bundle can make of it without any key: drop whole chains, derive an inclusion proof for
 * every line kept and a session-head proof for every session kept from the bundle's own lines and heads, and declare
 * filters in the unsigned header. The result passes a filtered bundle's checks (steps 9 and 10) against the real
 * checkpoint; only the auditor's own expectation or scope can tell it from an honest filtered export.
 */
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import { leafOfEnvelope } from '../../manifests/tlog/leaf.js';
import { leafHash, nodeHash } from '../../manifests/tlog/merkle.js';
import { buildSessionHeads, nodeName, proveSessionHead, type SessionHead } from '../../manifests/tlog/session-heads.js';
import { inclusionRanges } from '../../manifests/tlog/tree.js';

export interface DerivedFiltered {
  header: string;
  lines: string[];
  proofs: string;
  heads: string;
}

const sessionOf = (line: string): string =>
  JSON.parse(Buffer.from(JSON.parse(line).payload as string, 'base64').toString('utf8')).session as string;

/**
 * `full`: the full bundle's header and lines (every line a leaf of its checkpoint, in order); `heads`: every chain's
 * head in it (a verify report's `chains`); `keep`: the sessions left in; `filters`: what the header is made to say.
 */
export async function deriveFiltered(
  full: { header: string; lines: string[] },
  heads: ReadonlyArray<{ session: string; head: string; headSeq: number }>,
  keep: (session: string) => boolean,
  filters: { session?: string; principal?: string },
): Promise<DerivedFiltered> {
  const leaves = full.lines.map((l) => leafHash(leafOfEnvelope(l)));
  const mth = (start: number, end: number): Uint8Array => {
    if (end - start === 1) return leaves[start]!;
    let k = 1;
    while (k * 2 < end - start) k *= 2;
    return nodeHash(mth(start, start + k), mth(start + k, end));
  };
  const lines: string[] = [];
  const proofs: string[] = [];
  full.lines.forEach((line, i) => {
    if (!keep(sessionOf(line))) return;
    lines.push(line);
    const proof = inclusionRanges(i, leaves.length).map(([s, e]) => encodeBase64(mth(s, e)));
    proofs.push(JSON.stringify({ leafIndex: i, proof }));
  });
  const all = heads.map((c) => ({ session: c.session, head: { seq: c.headSeq, id: c.head } as SessionHead }));
  const nodes = new Map(buildSessionHeads(all).nodes.map((n) => [nodeName(n.path), n.node]));
  const headLines: string[] = [];
  for (const c of [...all].filter((h) => keep(h.session)).sort((a, b) => (a.session < b.session ? -1 : 1))) {
    const { proof } = await proveSessionHead((paths) => paths.map((p) => nodes.get(nodeName(p))), c.session);
    headLines.push(JSON.stringify({ session: c.session, head: c.head, proof }));
  }
  const header = JSON.parse(full.header);
  header.filters = filters;
  header.counts.manifests = lines.length;
  header.counts.chains = new Set(lines.map(sessionOf)).size;
  const text = (l: string[]) => l.map((x) => `${x}\n`).join('');
  return { header: JSON.stringify(header), lines, proofs: text(proofs), heads: text(headLines) };
}
