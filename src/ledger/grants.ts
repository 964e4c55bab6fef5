/**
 * Authorization (docs/DESIGN.md, "Grants and lifecycle"). A session belongs to the principal that first
 * publishes in it; others need a grant. Revocations delete nothing and outrank the owner rule, so a
 * revoked owner is locked out of their own sessions until re-granted. A pluggable `Authorizer` is
 * consulted after the built-in table; both run at the start of an operation and again at the commit point (and for
 * `checkPublish`, which publishes nothing). Only an answer of `true` allows.
 */
import type { ChainHead, ManifestLog } from '../../manifests/log/log.js';
import { isHandoffLedgerError, LedgerError } from '../errors.js';

export type Action = 'publish' | 'resume' | 'history';

/** What an action does to a session, for messages: "may not read the history of session s", not "may not history". */
const DOING: Record<Action, string> = {
  publish: 'publish in',
  resume: 'resume',
  history: 'read the history of',
};

export type Authorizer = (request: {
  principal: string;
  session: string;
  action: Action;
}) => boolean | Promise<boolean>;

export async function authorize(
  log: ManifestLog,
  authorizer: Authorizer | undefined,
  principal: string,
  session: string,
  action: Action,
  /** The session's head when the caller has read it, or is reading it (null: none), so it is not read twice. */
  knownHead?: ChainHead | null | Promise<ChainHead | null>,
): Promise<void> {
  // Both grants in one read where the table has one (PostgreSQL: one statement), beside the head.
  const grants = log.grants.forSession
    ? log.grants.forSession(principal, session)
    : Promise.all([log.grants.get(principal, session), log.grants.get(principal, '*')]).then(([here, everywhere]) => ({
        here,
        everywhere,
      }));
  const [{ everywhere, here }, head] = await Promise.all([
    grants,
    knownHead === undefined ? log.head(session) : Promise.resolve(knownHead).then((h) => h ?? undefined),
  ]);
  if (everywhere?.state === 'revoked') throw new LedgerError('REVOKED', `principal ${principal} is revoked`);
  if (here?.state === 'revoked')
    throw new LedgerError('REVOKED', `principal ${principal} is revoked for session ${session}`);
  const allowed = head === undefined || head.owner === principal || here?.state === 'granted';
  if (!allowed)
    throw new LedgerError('UNAUTHORIZED', `principal ${principal} may not ${DOING[action]} session ${session}`);
  if (authorizer && (await askAuthorizer(authorizer, { principal, session, action })) !== true) {
    throw new LedgerError('UNAUTHORIZED', `the authorizer denied ${action} on session ${session} to ${principal}`);
  }
}

/**
 * The authorizer's answer. Only `true` allows: a policy client's `{ result: false }`, `'deny'` or `1` denies (a truthy
 * answer that is not `true` is not a decision to allow). An authorizer that throws or rejects denies too, as
 * `UNAUTHORIZED` with its failure as the cause; a coded error of this library it throws (`CANCELLED`, say) passes.
 */
async function askAuthorizer(authorizer: Authorizer, request: Parameters<Authorizer>[0]): Promise<unknown> {
  try {
    return await authorizer(request);
  } catch (err) {
    if (isHandoffLedgerError(err)) throw err;
    throw new LedgerError(
      'UNAUTHORIZED',
      `the authorizer failed on ${request.action} of session ${request.session} by ${request.principal}: denied`,
      { cause: err },
    );
  }
}
