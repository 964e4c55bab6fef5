/** The options of `openPostgresBackends` (and `openLedger`'s `postgres`), read as given. */
import { readOptionFields, type NamesEveryField } from '../../store/errors.js';
import { LedgerError } from '../errors.js';
import type { PostgresBackendOptions } from './postgres.js';

const POSTGRES_FIELDS = [
  'connectionString',
  'hash',
  'maxBlobBytes',
  'schema',
  'maxConnections',
  'lockTimeoutMs',
  'idleInTransactionTimeoutMs',
  'preparedStatements',
] as const satisfies ReadonlyArray<keyof PostgresBackendOptions>;
const everyPostgresField: NamesEveryField<PostgresBackendOptions, typeof POSTGRES_FIELDS> = true;
void everyPostgresField;

/**
 * PostgreSQL options read once into a plain object: a getter or a proxy that throws as a field is read is
 * `INVALID_ARGUMENT` naming it (the failure as the cause), before anything connects, not an uncoded error.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function readPostgresOptions(given: unknown): PostgresBackendOptions {
  if (typeof given !== 'object' || given === null)
    throw new LedgerError('INVALID_ARGUMENT', 'postgres options must be an object with a connectionString');
  return readOptionFields(given, POSTGRES_FIELDS, 'postgres options', LedgerError) as PostgresBackendOptions;
}
