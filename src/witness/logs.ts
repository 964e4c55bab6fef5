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
import { LedgerError } from '../errors.js';

/**
 * The largest logs file `witness serve` reads (16 MiB, as a trust file or a witness-keys file): room for tens of
 * thousands of logs (an entry with one key is some 150 bytes), where a witness follows a few.
 */
export const MAX_WITNESS_LOGS_BYTES = 16 * 1024 * 1024;

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
        keys: z
          .array(z.string().max(1024).refine(isVerifierKey, 'must be a C2SP Ed25519 note verifier key'))
          .min(1)
          .max(16),
      }),
    )
    .max(100_000),
});

/**
 * Parses a logs file into origin → verifier keys. An origin listed twice is refused: which entry won
 * would decide which keys the witness trusts.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function parseWitnessLogs(text: string): Map<string, NoteVerifierKey[]> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new LedgerError('INVALID_ARGUMENT', 'the logs file is not JSON', { cause: err });
  }
  const parsed = logsSchema.safeParse(value);
  if (!parsed.success) throw new LedgerError('INVALID_ARGUMENT', `the logs file: ${describeZodError(parsed.error)}`);
  const logs = new Map<string, NoteVerifierKey[]>();
  for (const log of parsed.data.logs) {
    if (logs.has(log.origin))
      throw new LedgerError('INVALID_ARGUMENT', `the logs file lists origin ${JSON.stringify(log.origin)} twice`);
    logs.set(log.origin, log.keys.map(parseVerifierKey));
  }
  return logs;
}
