/** Scope ids of publish and resume, validated before anything else happens (publish step 1). */
import { invalidIdMessage, isValidId } from '../../manifests/format/id-pattern.js';
import { LedgerError } from '../errors.js';

export interface Scope {
  principal: string;
  session: string;
}

export interface PublishScope extends Scope {
  run: string;
}

function checkId(name: string, value: unknown): string {
  if (!isValidId(value)) throw new LedgerError('INVALID_ID', invalidIdMessage(name, value));
  return value;
}

/** The host id of `openLedger`, named as such in the error. @throws LedgerError `INVALID_ID` */
export function parseHost(host: unknown): string {
  return checkId('host', host);
}

/** A field of the caller's scope object: a getter or a proxy that throws is an id that cannot be read, not a crash. */
function field(scope: object, name: 'principal' | 'session' | 'run'): unknown {
  try {
    return (scope as Record<string, unknown>)[name];
  } catch (err) {
    throw new LedgerError('INVALID_ID', `scope: reading its ${name} failed`, { cause: err });
  }
}

/** @throws LedgerError `INVALID_ID` */
export function parseScope(scope: unknown): Scope {
  if (typeof scope !== 'object' || scope === null) throw new LedgerError('INVALID_ID', 'scope must be an object');
  return {
    principal: checkId('principal', field(scope, 'principal')),
    session: checkId('session', field(scope, 'session')),
  };
}

/**
 * The caller's scope with its ids read once, in the order `parseScope` / `parsePublishScope` read them: the operation
 * and its telemetry span (which records the ids under `identifiers`) are given this, so a getter is never asked twice
 * and a span never names an id other than the one the call used. The first field whose read throws keeps throwing
 * that error when read (parseScope refuses it as `INVALID_ID`, with it as the cause) and nothing after it is read, as
 * parseScope reads nothing after it. Anything but an object is passed on as it is (parseScope refuses it).
 */
export function readScopeOnce(scope: unknown, withRun: boolean): unknown {
  if (typeof scope !== 'object' || scope === null) return scope;
  const out: Record<string, unknown> = {};
  for (const name of withRun ? (['principal', 'session', 'run'] as const) : (['principal', 'session'] as const)) {
    try {
      out[name] = (scope as Record<string, unknown>)[name];
    } catch (err) {
      Object.defineProperty(out, name, {
        enumerable: true,
        get() {
          throw err;
        },
      });
      break;
    }
  }
  return out;
}

/** @throws LedgerError `INVALID_ID` */
export function parsePublishScope(scope: unknown): PublishScope {
  const base = parseScope(scope);
  return { ...base, run: checkId('run', field(scope as object, 'run')) };
}
