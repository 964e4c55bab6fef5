/** Scope ids of publish and resume, validated before anything else happens (publish step 1). */
import { isValidId } from '../../manifests/format/id-pattern.js';
import { LedgerError } from '../errors.js';

export interface Scope {
  principal: string;
  session: string;
}

export interface PublishScope extends Scope {
  run: string;
}

function checkId(name: string, value: unknown): string {
  if (!isValidId(value)) {
    const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value;
    throw new LedgerError(
      'INVALID_ID',
      `${name} ${shown} is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)`,
    );
  }
  return value;
}

/** The host id of `openLedger`, named as such in the error. @throws LedgerError `INVALID_ID` */
export function parseHost(host: unknown): string {
  return checkId('host', host);
}

export function parseScope(scope: unknown): Scope {
  if (typeof scope !== 'object' || scope === null) throw new LedgerError('INVALID_ID', 'scope must be an object');
  const s = scope as Record<string, unknown>;
  return { principal: checkId('principal', s.principal), session: checkId('session', s.session) };
}

export function parsePublishScope(scope: unknown): PublishScope {
  const base = parseScope(scope);
  return { ...base, run: checkId('run', (scope as Record<string, unknown>).run) };
}
