import { describe, expect, it } from 'vitest';
import { parseVerifierKey } from '../../manifests/crypto/note.js';
import { EMPTY_ROOT } from '../../manifests/tlog/merkle.js';
import {
  decideAddCheckpoint,
  formatAddCheckpoint,
  MAX_PROOF_LINES,
  parseAddCheckpoint,
} from '../../manifests/witness/add-checkpoint.js';
import { HandLog } from './support.js';

const log = new HandLog('example.com/decide', 3);
const keys = [parseVerifierKey(log.vkey)];
const a3 = HandLog.leaves('a', 3);
const a6 = [...a3, ...HandLog.leaves('a-next', 3)];

describe('add-checkpoint request body', () => {
  it('round-trips the spec layout: old line, proof lines, blank line, note', async () => {
    const body = await log.request(3, a6);
    expect(body).toMatch(/^old 3\n([A-Za-z0-9+/]{43}=\n)+\n[^\n]+\n6\n/);
    const r = parseAddCheckpoint(body);
    expect(r.oldSize).toBe(3);
    expect(r.proof).toEqual(log.proof(3, a6));
    expect(r.note).toBe(await log.note(a6));
  });

  it.each([
    ['no old line', 'older 3\n\nx\n'],
    ['a leading zero', 'old 03\n\nx\n'],
    ['a proof line that is not 32 bytes', 'old 3\nAAAA\n\nx\n'],
    ['no blank line', 'old 3\n'],
  ])('is refused with INVALID_ARGUMENT for %s', (_, body) => {
    expect(() => parseAddCheckpoint(body)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it(`allows at most ${MAX_PROOF_LINES} proof lines`, () => {
    const line = `${'A'.repeat(43)}=\n`;
    expect(parseAddCheckpoint(`old 1\n${line.repeat(63)}\nx\n`).proof).toHaveLength(63);
    expect(() => parseAddCheckpoint(`old 1\n${line.repeat(64)}\nx\n`)).toThrow(/more than 63/);
  });
});

describe('the witness decision', () => {
  const held = { size: 3, root: log.root(a3) };

  it('cosigns a consistent extension of the stored tree', async () => {
    const d = decideAddCheckpoint(parseAddCheckpoint(await log.request(3, a6)), keys, held);
    expect(d.status).toBe(200);
  });

  it('cosigns the stored tree again (a log retrying after the witness crashed before answering)', async () => {
    const d = decideAddCheckpoint(parseAddCheckpoint(await log.request(3, a3)), keys, held);
    expect(d.status).toBe(200);
  });

  it('answers 422 to a proof from size 0 and to a size-0 tree with another root; 409 to another root at the stored size', async () => {
    const fromZero = formatAddCheckpoint({ oldSize: 0, proof: log.proof(3, a6).slice(0, 1), note: await log.note(a6) });
    expect(decideAddCheckpoint(parseAddCheckpoint(fromZero), keys, undefined).status).toBe(422);
    const emptyLie = formatAddCheckpoint({ oldSize: 0, proof: [], note: await log.note([]) }).replace(
      /\n0\n[^\n]+\n/,
      `\n0\n${Buffer.from(new Uint8Array(32).fill(5)).toString('base64')}\n`,
    );
    // Re-signed so that only the root is wrong.
    const lie = parseAddCheckpoint(emptyLie);
    const text = lie.note.slice(0, lie.note.indexOf('\n\n') + 1);
    const { signNote } = await import('../../manifests/crypto/note.js');
    lie.note = await signNote(text, [log.signer]);
    expect(decideAddCheckpoint(lie, keys, undefined)).toMatchObject({ status: 422 });
    const honestEmpty = formatAddCheckpoint({ oldSize: 0, proof: [], note: await log.note([]) });
    expect(decideAddCheckpoint(parseAddCheckpoint(honestEmpty), keys, undefined).status).toBe(200);
    const b3 = HandLog.leaves('b', 3);
    expect(decideAddCheckpoint(parseAddCheckpoint(await log.request(3, b3)), keys, held)).toMatchObject({
      status: 409,
      size: 3,
    });
    expect(log.root([])).toEqual(EMPTY_ROOT);
  });

  it('answers 404 for an origin it does not follow, before looking at signatures', async () => {
    expect(decideAddCheckpoint(parseAddCheckpoint(await log.request(0, a3)), undefined, undefined).status).toBe(404);
  });
});
