/**
 * The auditor's own settings, read one way by `verify` / `audit-ui` (command-line options) and by the auditor's page
 * (its fields and address): the scope chains are held to and the bound on manifests.jsonl. Isomorphic. Each caller
 * names the settings in its own words and throws its own usage error.
 */
import { invalidIdMessage, isValidId } from '../format/id-pattern.js';
import { readWholeNumber } from '../encoding/whole-number.js';
import type { AuditScope } from './chain-rules.js';
import type { BundleExpectation } from './verify-chain.js';

/** Default bound on manifests.jsonl: ~5 million honest manifests; an auditor raises it (`--max-bundle-bytes`). */
export const DEFAULT_MAX_MANIFESTS_BYTES = 4 * 1024 ** 3;

/** How a caller names a setting in its messages, and the error it throws for one it refuses. */
export interface SettingWords {
  name: (setting: 'principal' | 'session' | 'max-bundle-bytes' | 'expect') => string;
  refuse: (message: string) => Error;
}

/** The auditor's scope: each of principal and session given must be an id; neither given, no scope. */
export function readAuditorScope(
  principal: string | undefined,
  session: string | undefined,
  words: SettingWords,
): AuditScope | undefined {
  for (const [setting, id] of [
    ['principal', principal],
    ['session', session],
  ] as const)
    if (id !== undefined && !isValidId(id)) throw words.refuse(invalidIdMessage(words.name(setting), id));
  if (principal === undefined && session === undefined) return undefined;
  return { ...(principal !== undefined ? { principal } : {}), ...(session !== undefined ? { session } : {}) };
}

/** A bound in bytes as given: a whole number from 1 to 2^53 − 1, read as the CLI reads every number (whole-number.ts). */
export function readByteBound(text: string, words: SettingWords): number {
  const range = { name: words.name('max-bundle-bytes'), min: 1, max: Number.MAX_SAFE_INTEGER, unit: 'bytes' };
  return readWholeNumber(text, range, words.refuse);
}

/** What the auditor expects the bundle to be, as given: `full`, `filtered`, or not stated. */
export function readExpectation(text: string | undefined, words: SettingWords): BundleExpectation | undefined {
  if (text === undefined) return undefined;
  if (text !== 'full' && text !== 'filtered') throw words.refuse(`${words.name('expect')} must be full or filtered`);
  return text;
}
