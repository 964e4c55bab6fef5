/**
 * A bundle whose names a report line must quote: its checkpoint origin (a store named so before new logs were held to
 * `isNewOrigin`, which still opens and exports) and a pinned witness's name carry markup, a quote, a backslash, a C1
 * control (U+009B, CSI on many terminals) and a bidi override (U+202E), all a C2SP key name may hold. The checkpoint
 * verifies under the log's trust file and is cosigned by the witness; a copy carries that witness's cosignature of
 * another tree (WITNESS_COSIGNATURE_INVALID, whose message quotes the name). For the CLI's report and the page's.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cosignCheckpoint, encodeCosignerKey } from '../../manifests/crypto/cosignature.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { writeTrustFile } from './bundle-builder.js';
import { sampleSummary } from './tmp.js';
import { embeddedNamedAsBefore } from '../tlog/ledger-support.js';
import { noteSigner } from '../witness/support.js';

export const HOSTILE_ORIGIN = 'example.com/<b>"q\\b\u009b\u202e';
export const HOSTILE_WITNESS_NAME = 'witness.example/"w\\\u009b\u202e';
/** The time the witness says it cosigned at (POSIX seconds). */
export const COSIGNED_AT = 1_764_547_200;

export interface HostileNameFiles {
  /** The bundle, its checkpoint cosigned by the witness. */
  cosigned: string;
  /** The bundle with the witness's cosignature of another tree. */
  pasted: string;
  trust: string;
  /** The witness, pinned (quorum 1). */
  witnessKeys: string;
}

export async function writeHostileNameFiles(base: string): Promise<HostileNameFiles> {
  const at = (name: string) => join(base, name);
  await embeddedNamedAsBefore(at('store'), HOSTILE_ORIGIN);
  const ledger = await openLedger({ root: at('store'), host: 'host-a', origin: HOSTILE_ORIGIN });
  try {
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, sampleSummary(1));
    await exportBundle(ledger, { out: at('bundle') });
    await writeTrustFile(at('trust.json'), ledger.trustStore());
  } finally {
    await ledger.close();
  }
  const witness = noteSigner(HOSTILE_WITNESS_NAME, new Uint8Array(32).fill(44));
  writeFileSync(at('witnesses.txt'), `${encodeCosignerKey(witness.name, witness.publicKey)}\n`);
  const note = readFileSync(join(at('bundle'), 'checkpoint.note'), 'utf8');
  const text = note.slice(0, note.indexOf('\n\n') + 1);
  // The same origin and root at another size: a checkpoint of another tree.
  const [origin, size, ...rest] = text.split('\n');
  const other = [origin, String(Number(size) + 1), ...rest].join('\n');
  const copy = async (name: string, cosigned: string) => {
    cpSync(at('bundle'), at(name), { recursive: true });
    writeFileSync(join(at(name), 'checkpoint.note'), note + (await cosignCheckpoint(cosigned, witness, COSIGNED_AT)));
    return at(name);
  };
  return {
    cosigned: await copy('cosigned', text),
    pasted: await copy('pasted', other),
    trust: at('trust.json'),
    witnessKeys: at('witnesses.txt'),
  };
}
