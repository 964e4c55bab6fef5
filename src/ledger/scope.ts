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
 * A call that takes a scope, for the refusal of a scope that carries one of the call's options: its name in the
 * refusal, the names of its options, and how the call is written with them where they go.
 */
export interface ScopeCall {
  call: string;
  options: readonly string[];
  /** Where an option goes, in words and as a call: `publish's options (its third argument: publish(scope, summary, { expectedPrev }))`. */
  place: (option: string) => string;
}

/** The calls of the ledger that take a scope, each with its options. */
export const SCOPE_CALLS = {
  publish: {
    call: 'publish',
    options: ['expectedPrev', 'covers', 'signal'],
    place: (o) => `publish's options (its third argument: publish(scope, summary, { ${o} }))`,
  },
  checkPublish: {
    call: 'checkPublish',
    options: ['expectedPrev', 'covers', 'signal'],
    place: (o) => `checkPublish's options (its second argument: checkPublish(scope, { ${o} }))`,
  },
  resume: {
    call: 'resume',
    options: ['signal'],
    place: (o) => `resume's options (its second argument: resume(scope, { ${o} }))`,
  },
  history: {
    call: 'history',
    options: ['signal'],
    place: (o) => `history's options (its second argument: history(scope, { ${o} }))`,
  },
  // compact hands its own expectedPrev, covers and signal to publish, with the scope as it was given.
  compact: {
    call: 'compact',
    options: ['expectedPrev', 'covers', 'signal'],
    place: (o) => `compact's options, beside the scope (compact({ ledger, scope, ${o}, … }))`,
  },
} as const satisfies Record<string, ScopeCall>;

/**
 * The caller's scope with its ids read once, in the order `parseScope` / `parsePublishScope` read them, then the fields
 * named like the call's options (`call.options`) the scope has (`in`: own or inherited), for
 * `refuseOptionsInScope`: the operation and its telemetry span (which records the ids under `identifiers`) are given
 * this, so a getter is never asked twice and a span never names an id other than the one the call used. The first
 * field whose read throws keeps throwing that error when read (parseScope refuses it as `INVALID_ID`, with it as the
 * cause; refuseOptionsInScope as `INVALID_ARGUMENT`) and nothing after it is read, as parseScope reads nothing after
 * it. Anything but an object is passed on as it is (parseScope refuses it).
 */
export function readScopeOnce(scope: unknown, withRun: boolean, call?: ScopeCall): unknown {
  if (typeof scope !== 'object' || scope === null) return scope;
  const out: Record<string, unknown> = {};
  const ids = withRun ? (['principal', 'session', 'run'] as const) : (['principal', 'session'] as const);
  for (const name of [...ids, ...(call?.options ?? [])]) {
    try {
      // An option's name is looked for before it is read: a scope without it (a proxy that throws for any name it
      // does not have, too) is not asked for it.
      if ((ids as readonly string[]).includes(name) || name in scope)
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

/**
 * Refuses a scope that carries an option of the call (`{ ...scope, expectedPrev }` given as publish's scope): the call
 * reads only the ids from a scope, so the option would be left out without a word (a publish without the
 * compare-and-swap guard its caller meant, a resume its signal cannot stop). A field that is `undefined` loses nothing
 * and is not refused, nor one that is the very value `given` (the call's options as read) has for it: a Harness's
 * context object that carries its signal may be passed as the scope when the signal is passed in the options too.
 * Any other field a scope carries (a Harness's own context: `run` given to resume) is not looked at.
 * @throws LedgerError `INVALID_ARGUMENT`, naming the option and where it goes (also for a field that throws as it is
 *   read or looked for, with that failure as the cause)
 */
export function refuseOptionsInScope(scope: unknown, given: Record<string, unknown>, call: ScopeCall): void {
  if (typeof scope !== 'object' || scope === null) return;
  for (const name of call.options) {
    let value: unknown;
    try {
      if (!(name in scope)) continue;
      value = (scope as Record<string, unknown>)[name];
    } catch (err) {
      throw new LedgerError('INVALID_ARGUMENT', `scope: reading its ${name} failed`, { cause: err });
    }
    if (value === undefined || value === given[name]) continue;
    const which = given[name] === undefined ? name : `${name} other than the one in its options`;
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `${call.call}: the scope carries ${which}, and ${call.call} reads only the ids from a scope: give ${name} ` +
        `in ${call.place(name)}`,
    );
  }
}

/** @throws LedgerError `INVALID_ID` */
export function parsePublishScope(scope: unknown): PublishScope {
  const base = parseScope(scope);
  return { ...base, run: checkId('run', field(scope as object, 'run')) };
}
