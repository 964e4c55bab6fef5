/**
 * The logs a witness serves (`--logs LOGS.json`): `{ "logs": [{ "origin": …, "keys": [<note verifier key>…] }] }`.
 * A checkpoint counts only when one of its origin's keys signed it; the ledger prints its key with
 * `handoff-ledger keys vkey` (its checkpoint key's, which `keys rotate` replaces: the new one must be added here, and
 * the witness restarted, for it reads this file once).
 */
import { z } from 'zod';
import { parseVerifierKey, type NoteVerifierKey } from '../../manifests/crypto/note.js';
import { isCheckpointOrigin } from '../../manifests/format/checkpoint.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';
import { shownValue } from '../../store/errors.js';
import { LedgerError } from '../errors.js';

/**
 * The largest logs file `witness serve` reads (16 MiB, as a trust file or a witness-keys file): room for tens of
 * thousands of logs (an entry with one key is some 150 bytes), where a witness follows a few.
 */
export const MAX_WITNESS_LOGS_BYTES = 16 * 1024 * 1024;

/**
 * The most note verifier keys one log may list (it was 16). A ledger's list grows by one at every checkpoint-key
 * rotation of every host that signs its checkpoints (the runbook adds the new key beside the old one): 16 were
 * exceeded at a single host's 16th rotation (its first key and 16 more), or at once by a shared store of 17 hosts,
 * and the witness then refused to start with a bare schema message. 256 holds a shared store of 128 hosts in the
 * middle of a rotation; the operator's pruning keeps the list short (README, key rotation runbook: a key rotated out
 * goes once the witness has cosigned a checkpoint since, a revoked one at once). A long list costs a linear match per
 * signature line of a request (at most 100 lines: 25,600 comparisons of a name and a 32-bit hash), and the file's
 * 16 MiB bounds the keys of all logs together.
 */
export const MAX_WITNESS_LOG_KEYS = 256;

const isVerifierKey = (s: string) => {
  try {
    parseVerifierKey(s);
    return true;
  } catch {
    return false;
  }
};

const logsSchema = z.strictObject({
  logs: z
    .array(
      z.strictObject({
        origin: z.string().refine(isCheckpointOrigin, 'must be a checkpoint origin (a non-empty line)'),
        keys: z.array(z.string().max(1024).refine(isVerifierKey, 'must be a C2SP Ed25519 note verifier key')).min(1),
      }),
    )
    .max(100_000),
});

/**
 * Parses a logs file into origin → verifier keys. An origin listed twice is refused: which entry won
 * would decide which keys the witness trusts. So is a log listing more than `MAX_WITNESS_LOG_KEYS` keys, with a
 * message that names it and says which keys may go.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function parseWitnessLogs(text: string): Map<string, NoteVerifierKey[]> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new LedgerError('INVALID_ARGUMENT', 'the logs file is not JSON', { cause: err });
  }
  // Judged before the keys are, and naming the log: the operator who meets it has just added a rotated key.
  const crowded = (value as { logs?: unknown })?.logs;
  if (Array.isArray(crowded))
    for (const log of crowded as unknown[]) {
      const { origin, keys } = (log ?? {}) as { origin?: unknown; keys?: unknown };
      if (!Array.isArray(keys) || keys.length <= MAX_WITNESS_LOG_KEYS) continue;
      // The origin is named as it is written when it is a string, else by its type: `String(origin)` of an object whose
      // toString is no function threw a TypeError, and of an array nested deep enough a RangeError (the schema refuses
      // such an origin, but this check of the keys comes first).
      const named =
        typeof origin === 'string' ? shownValue(origin, 300) : `with origin ${shownValue(origin)} (not a string)`;
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `the logs file lists ${keys.length} keys for the log ${named}, more ` +
          `than the ${MAX_WITNESS_LOG_KEYS} a log may list: keep the key each host of the log signs checkpoints with ` +
          'now (`handoff-ledger keys vkey` on each host) and the one a rotation replaced until this witness has ' +
          'cosigned a checkpoint since; remove the older ones and every revoked one, then start the witness again',
      );
    }
  const parsed = logsSchema.safeParse(value);
  if (!parsed.success)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `the logs file: ${describeZodError(parsed.error, { escaped: true, schema: logsSchema })}`,
    );
  const logs = new Map<string, NoteVerifierKey[]>();
  for (const log of parsed.data.logs) {
    if (logs.has(log.origin))
      throw new LedgerError('INVALID_ARGUMENT', `the logs file lists origin ${shownValue(log.origin, 300)} twice`);
    logs.set(log.origin, log.keys.map(parseVerifierKey));
  }
  return logs;
}
