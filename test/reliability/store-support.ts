/**
 * Shared helpers of the reliability suites: store layout, summaries of a chosen size, and the tally
 * of losses and wrong answers that every check goes through (so the figures a suite records are the
 * checks it really made, and a failed check is both counted and thrown).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { digestHex, type Digest } from '../../store/hash/digest.js';
import { StoreError } from '../../store/errors.js';
import { ManifestError } from '../../manifests/errors.js';
import { AuditError } from '../../manifests/audit/errors.js';
import { LedgerError } from '../../src/errors.js';

export function blobPath(root: string, digest: string): string {
  const hex = digestHex(digest);
  return join(root, 'blobs-v1', 'blake3', hex.slice(0, 2), hex.slice(2, 4), hex);
}

export function stagingFiles(root: string): string[] {
  return readdirSync(join(root, 'tmp'));
}

/**
 * A valid summary whose canonical form is about `bytes` long, recognizable by `marker`. The filler is
 * derived from the marker, so two summaries with different markers never share a blob.
 */
export function sizedSummary(marker: string, bytes = 200) {
  const pad = Math.max(0, bytes - 120 - marker.length);
  const unit = `${marker}|`;
  return {
    task: `reliability ${marker}`,
    state: 'in progress',
    nextSteps: ['continue'],
    notes: unit.repeat(Math.ceil(pad / unit.length)).slice(0, pad),
  };
}

/** True for an error of one of the library's typed classes, carrying a code. */
export function isTypedError(
  err: unknown,
): err is (LedgerError | StoreError | ManifestError | AuditError) & { code: string } {
  return (
    (err instanceof LedgerError ||
      err instanceof StoreError ||
      err instanceof ManifestError ||
      err instanceof AuditError) &&
    typeof err.code === 'string' &&
    err.code.length > 0
  );
}

export class InvariantViolation extends Error {
  override readonly name = 'InvariantViolation';
}

/** Counts losses and wrong answers; a failed check is counted, then thrown. */
export class Tally {
  losses = 0;
  wrongAnswers = 0;
  checks = 0;

  /** An acknowledged publish must still be there. */
  present(ok: boolean, what: string): void {
    this.checks++;
    if (!ok) {
      this.losses++;
      throw new InvariantViolation(`loss: ${what}`);
    }
  }

  /** Whatever the store returned must be right. */
  right(ok: boolean, what: string): void {
    this.checks++;
    if (!ok) {
      this.wrongAnswers++;
      throw new InvariantViolation(`wrong answer: ${what}`);
    }
  }
}

export type { Digest };
