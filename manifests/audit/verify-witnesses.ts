/**
 * Step 9d of the offline audit: the bundle's checkpoint against the auditor's pinned witnesses (C2SP
 * tlog-cosignature). A checkpoint signed only by the log's host proves nothing against that host: it could
 * show each auditor another tree. It counts only with `quorum` valid `cosignature/v1` lines from distinct
 * pinned witnesses, each of which refuses to cosign a tree that does not extend the one it cosigned before.
 *
 *   WITNESS_QUORUM_MISSING        fewer than `quorum` valid cosignatures by pinned witnesses
 *   WITNESS_COSIGNATURE_INVALID   a line by a pinned witness (name and key hash) that does not verify
 *
 * Cosignatures by keys the auditor did not pin are ignored, never fatal (the spec's rule). Isomorphic.
 */
import { checkCosignatures, parseCosignerKey, type CosignerKey } from '../crypto/cosignature.js';
import type { SignatureVerifier } from '../crypto/ed25519.js';
import { ManifestError } from '../errors.js';
import { errorText, isUint8Array, typeName } from '../../store/errors.js';
import { bytesToHex, digestOf, type Digest } from '../../store/hash/digest.js';
import { encodeBase64 } from '../encoding/base64.js';
import { canonicalBytes } from '../encoding/canonical.js';
import { fileBytes, fileText } from '../encoding/file-bytes.js';
import { byText } from '../format/trust.js';
import { auditUsage } from './errors.js';
import { readWholeNumber } from '../encoding/whole-number.js';
import { counted, quoted } from '../encoding/printable.js';
import type { FindingSink } from './findings.js';

/** The auditor's witness policy: pinned witness keys and how many of them must have cosigned. */
export interface WitnessPolicy {
  keys: CosignerKey[];
  quorum: number;
}

/** What the report says about the cosignatures: who signed, and when (as the witness says). */
export interface WitnessSummary {
  quorum: number;
  /** Distinct pinned witness keys (one public key pinned under two names is one witness). */
  pinned: number;
  /** One entry per distinct public key that cosigned; `timestamp` is exact up to 2^53 − 1, `time` always. */
  signedBy: Array<{ witness: string; time: string; timestamp: number }>;
}

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

/**
 * Parses a witness keys file: one C2SP `cosignature/v1` verifier key per line; blank lines and lines starting with
 * `#` are skipped. Takes the file's text or its bytes (UTF-8: an ArrayBuffer, as `fetch(url).then((r) =>
 * r.arrayBuffer())` gives it, a Uint8Array or Node Buffer, as `readFileSync(file)` does, any other typed array or a
 * DataView). @throws ManifestError `KEY_INVALID` naming the line, or saying the input is neither text nor bytes (a
 * TypeError once: `text.split is not a function`); bytes are read as the CLI reads the file (`readFileSync(file,
 * 'utf8')`: one that is not UTF-8 becomes U+FFFD)
 */
export function parseWitnessKeys(file: string | ArrayBufferLike | ArrayBufferView): CosignerKey[] {
  const given: unknown = file;
  const bytes = fileBytes(given);
  const text = bytes === undefined ? given : fileText(bytes);
  if (typeof text !== 'string')
    throw new ManifestError(
      'KEY_INVALID',
      `witness keys: not text (${typeName(text)}); pass the file's text or bytes, e.g. readFileSync(file)`,
    );
  const keys: CosignerKey[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    try {
      const key = parseCosignerKey(line);
      const id = `${key.name}+${hex8(key.keyHash)}`;
      if (!seen.has(id)) keys.push(key);
      seen.add(id);
    } catch (err) {
      throw new ManifestError('KEY_INVALID', `witness keys line ${i + 1}: ${errorText(err)}`, { cause: err });
    }
  });
  return keys;
}

/**
 * The witnesses a policy pins: distinct public keys. The signed `cosignature/v1` message does not name the witness
 * (only the key hash depends on the name), so anyone can move a cosignature to another name pinned with the same
 * key: one key is one vote, however many names pin it.
 */
function distinctKeys(keys: CosignerKey[]): number {
  return new Set(keys.map((k) => publicKeyId(k))).size;
}

const publicKeyId = (k: CosignerKey) => bytesToHex(k.publicKey);

/**
 * Checks a validated policy's shape: its keys (as `witnessDigest` judges them: a list of keys `parseWitnessKeys` gave,
 * where `keys.map is not a function` and the like were the refusal's words) and its quorum.
 * @throws ManifestError `KEY_INVALID` (keys that are none), `INVALID_ARGUMENT` (the quorum)
 */
export function assertWitnessPolicy(policy: WitnessPolicy): void {
  distinctTexts(policy.keys);
  if (!Number.isSafeInteger(policy.quorum) || policy.quorum < 1)
    throw new ManifestError('INVALID_ARGUMENT', 'the witness quorum is a whole number from 1');
  const pinned = distinctKeys(policy.keys);
  if (policy.quorum > pinned)
    throw new ManifestError(
      'INVALID_ARGUMENT',
      `a quorum of ${policy.quorum} cannot be met by ${counted(pinned, 'distinct pinned witness key')}`,
    );
}

/**
 * The witnesses a report was checked against (`checked.witnesses`), bounded whatever their number: the keys' digest
 * (`witnessDigest`), how many distinct keys, and the quorum asked for.
 */
export interface WitnessCoverage {
  digest: Digest;
  /** Distinct pinned verifier keys (name and key; the file's key lines without repeats). */
  keys: number;
  quorum: number;
}

/** A pinned key as its verifier key text, from what it pins (its key hash as given). @throws ManifestError */
function verifierKeyText(k: CosignerKey): string {
  if (
    typeof k !== 'object' ||
    k === null ||
    typeof k.name !== 'string' ||
    !Number.isSafeInteger(k.keyHash) ||
    k.keyHash < 0 ||
    k.keyHash > 0xffff_ffff ||
    !isUint8Array(k.publicKey) ||
    k.publicKey.length !== 32
  )
    throw new ManifestError('KEY_INVALID', 'a pinned witness key is not one (read them with parseWitnessKeys)');
  const key = new Uint8Array(33);
  key[0] = 0x04;
  key.set(k.publicKey, 1);
  return `${k.name}+${hex8(k.keyHash)}+${encodeBase64(key)}`;
}

/**
 * What a witness policy pins, as one digest: `blake3:` of the RFC 8785 canonical JSON `{ version: 1, keys }`, `keys`
 * the distinct verifier keys `<name>+<key hash>+<base64(0x04 ‖ key)>` (the hash in lowercase hex, as
 * `parseWitnessKeys` reads and `encodeCosignerKey` writes them) in code-unit order. The order of the lines of a
 * witness keys file, a key repeated, comments, blank lines and the case of a hash as written do not change it; any
 * key added, dropped or changed does. A verification report names the witnesses it was checked against by this
 * digest (`checked.witnesses`).
 * @throws ManifestError `KEY_INVALID` for keys built by hand that are none (not a list, an entry without a name, a
 *   key hash or a 32-byte public key); keys `parseWitnessKeys` gave never are.
 */
export function witnessDigest(keys: CosignerKey[]): Digest {
  return digestOf(canonicalBytes({ version: 1, keys: distinctTexts(keys) }));
}

function distinctTexts(keys: CosignerKey[]): string[] {
  if (!Array.isArray(keys)) throw new ManifestError('KEY_INVALID', 'the pinned witness keys are not a list');
  return [...new Set(keys.map(verifierKeyText))].sort(byText);
}

/** The report's `checked.witnesses` for a policy. @throws ManifestError `KEY_INVALID` (see `witnessDigest`) */
export function witnessCoverage(policy: WitnessPolicy): WitnessCoverage {
  const keys = distinctTexts(policy.keys);
  return { digest: digestOf(canonicalBytes({ version: 1, keys })), keys: keys.length, quorum: policy.quorum };
}

/** The bound on a witness keys file, as on a trust file. */
export const MAX_WITNESS_KEYS_BYTES = 16 * 1024 * 1024;

/**
 * The auditor's `--witness-keys FILE --quorum K` as both `handoff-ledger verify` and the auditor's page take
 * them, with the same words: both or neither (undefined when neither), K a whole number from 1 up to the number
 * of pinned keys, every non-comment line of the file a `cosignature/v1` verifier key. `keys.read` gives the
 * file's text (bounded by the caller); it is called only once the arguments make sense.
 * @throws AuditError `USAGE`
 */
export async function readWitnessPolicy(
  keys: { name: string; read(): Promise<string> } | undefined,
  quorum: string | undefined,
): Promise<WitnessPolicy | undefined> {
  if (keys === undefined && quorum === undefined) return undefined;
  if (keys === undefined || quorum === undefined)
    throw auditUsage('--witness-keys FILE and --quorum K go together (K valid cosignatures by the pinned witnesses)');
  // Read as the CLI reads every number (whole-number.ts), from 1; its upper bound, the number of distinct pinned keys,
  // is known once the file is read (assertWitnessPolicy below, `--quorum: a quorum of K cannot be met by …`).
  const k = readWholeNumber(quorum, { name: '--quorum', min: 1, max: Number.MAX_SAFE_INTEGER }, auditUsage);
  let policy: WitnessPolicy;
  try {
    policy = { keys: parseWitnessKeys(await keys.read()), quorum: k };
  } catch (err) {
    // The file named quoted, as `--since` and `--trust` name theirs (`--witness-keys "w.txt": …`).
    throw auditUsage(`--witness-keys ${quoted(keys.name)}: ${errorText(err)}`, { cause: err });
  }
  try {
    assertWitnessPolicy(policy);
  } catch (err) {
    throw auditUsage(`--quorum: ${errorText(err)}`, { cause: err });
  }
  return policy;
}

/** Runs step 9d on an opened checkpoint note (its log signature already verified by step 9a). */
export function verifyWitnesses(
  note: string,
  policy: WitnessPolicy,
  sink: FindingSink,
  verifier?: SignatureVerifier,
): WitnessSummary {
  const r = checkCosignatures(note, policy.keys, verifier);
  for (const bad of r.invalid)
    sink.add({
      code: 'WITNESS_COSIGNATURE_INVALID',
      message: `the cosignature by pinned witness ${quoted(bad.name)} does not verify: ${bad.reason}`,
    });
  // One witness is one vote, however many lines it has and however many names pin its key: distinct public keys.
  const voted = new Set<string>();
  const signedBy = r.valid.flatMap((c) => {
    const id = publicKeyId(policy.keys.find((k) => k.name === c.name && k.keyHash === c.keyHash)!);
    if (voted.has(id)) return [];
    voted.add(id);
    return [{ witness: `${c.name}+${hex8(c.keyHash)}`, timestamp: c.timestamp, time: cosignedTime(c) }];
  });
  if (signedBy.length < policy.quorum)
    sink.add({
      code: 'WITNESS_QUORUM_MISSING',
      message: `the checkpoint has ${counted(signedBy.length, 'valid cosignature')} by pinned witnesses; the quorum is ${policy.quorum}`,
      evidence: { expected: policy.quorum, actual: signedBy.length },
    });
  return { quorum: policy.quorum, pinned: distinctKeys(policy.keys), signedBy };
}

/**
 * A cosignature's time as ISO text. The spec allows timestamps up to 2^63 − 1 seconds; past what a `Date` holds
 * (year 275760) the seconds are given exactly as they are, rather than the report failing on a witness's odd clock.
 */
function cosignedTime(c: { timestamp: number; timestampText: string }): string {
  const ms = c.timestamp * 1000;
  return ms <= 8.64e15 ? new Date(ms).toISOString() : `${c.timestampText} s after 1970-01-01T00:00:00Z`;
}
