/**
 * Authorization (docs/DESIGN.md, "Grants and lifecycle"). A session belongs to the principal that first
 * publishes in it; others need a grant. Revocations delete nothing and outrank the owner rule, so a
 * revoked owner is locked out of their own sessions until re-granted. A pluggable `Authorizer` is
 * consulted after the built-in table; both run at the start of an operation and again at the commit point.
 */
import type { ChainHead, ManifestLog } from '../../manifests/log/log.js';
import { LedgerError } from '../errors.js';

export type Action = 'publish' | 'resume' | 'history';

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
  const [everywhere, here, head] = await Promise.all([
    log.grants.get(principal, '*'),
    log.grants.get(principal, session),
    knownHead === undefined ? log.head(session) : Promise.resolve(knownHead).then((h) => h ?? undefined),
  ]);
  if (everywhere?.state === 'revoked') throw new LedgerError('REVOKED', `principal ${principal} is revoked`);
  if (here?.state === 'revoked')
    throw new LedgerError('REVOKED', `principal ${principal} is revoked for session ${session}`);
  const allowed = head === undefined || head.owner === principal || here?.state === 'granted';
  if (!allowed) throw new LedgerError('UNAUTHORIZED', `principal ${principal} may not ${action} session ${session}`);
  if (authorizer && !(await authorizer({ principal, session, action }))) {
    throw new LedgerError('UNAUTHORIZED', `the authorizer denied ${action} on session ${session} to ${principal}`);
  }
}
