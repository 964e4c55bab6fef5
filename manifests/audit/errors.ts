/**
 * Errors of the audit layer itself: the verifier could not run (bad arguments, unreadable or
 * unrecognizable bundle, unusable trust file, worker failure). A tampered manifest is never an
 * `AuditError`: it is a finding in the report. The `code` is the contract; messages are for people.
 * Isomorphic.
 */
import { HandoffLedgerError, readOptionFieldsAs } from '../../store/errors.js';

export type AuditErrorCode =
  /** Bad command-line arguments or options. CLI exit 2. */
  | 'USAGE'
  /** A bundle file or directory could not be read or written (ENOENT, EACCES, EIO, …). CLI exit 2. */
  | 'BUNDLE_IO'
  /** The directory is not a bundle this verifier understands: missing or malformed `bundle.json`. CLI exit 2. */
  | 'BUNDLE_INVALID'
  /** The export target already exists; exports never overwrite. CLI exit 2. */
  | 'BUNDLE_EXISTS'
  /** The `--trust` file is unreadable or does not match the trust store schema. CLI exit 2. */
  | 'TRUST_INVALID'
  /** A verification worker thread could not start or died. CLI exit 2. */
  | 'WORKER_FAILED';

export class AuditError extends HandoffLedgerError<AuditErrorCode> {
  override readonly name = 'AuditError';
}

/** The auditor's refusal of its caller's options: `USAGE`. */
export const auditUsage = (message: string, options?: { cause?: unknown }): AuditError =>
  new AuditError('USAGE', message, options);

/**
 * Options read once into a plain object (a getter or proxy that throws, or a field of another name: `USAGE` naming it,
 * before any work), naming a trust store as the types say; what is checked is what the audit then uses.
 */
export function readAuditOptions<O>(options: unknown, names: readonly string[], what: string): O {
  const needsTrust = () => auditUsage(`${what} needs options naming the pinned trust store: { trust }`);
  if (typeof options !== 'object' || options === null) throw needsTrust();
  const read = readOptionFieldsAs(options, names, `${what} options`, auditUsage) as { trust?: unknown };
  if (typeof read.trust !== 'object' || read.trust === null) throw needsTrust();
  return read as O;
}
