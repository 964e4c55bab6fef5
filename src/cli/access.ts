/** grant, revoke, grants, keys: the operator's access and key lifecycle commands. */
import type { Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';
import { isErrnoError } from '../../store/errors.js';
import { readBoundedFile } from '../../store/fs/bounded-read.js';
import { isInsideRoot } from '../ops/export.js';
import { MAX_TRUST_FILE_BYTES } from '../../manifests/format/trust.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import type { GrantRecord } from '../../manifests/log/log.js';
import { overlaps } from '../keys/keyring.js';
import {
  postgresUrl,
  withLedger,
  EXIT_OK,
  parse,
  reportError,
  storeOptions,
  UsageError,
  CommandLineError,
  wantsJson,
  writeJson,
  type CliIo,
} from './io.js';
import {
  counted,
  escapedOnce,
  printable,
  printableLines,
  printableOnceLines,
  printableRow,
  quoted,
} from '../../manifests/encoding/printable.js';

const grantOptions = {
  ...storeOptions,
  principal: { type: 'string' },
  session: { type: 'string' },
  all: { type: 'boolean', default: false },
  by: { type: 'string' },
} as const;

function grantTarget(values: { principal?: string; session?: string; all?: boolean }): {
  principal: string;
  session: string;
} {
  if (!values.principal) throw new CommandLineError('--principal is required');
  if (values.all === (values.session !== undefined))
    throw new CommandLineError('give exactly one of --session S or --all');
  // The library's '*' is every session; on the command line it is most likely a glob the shell left unexpanded.
  if (values.session === '*') throw new UsageError('--session "*" is no session id; give --all for every session');
  return { principal: values.principal, session: values.all ? '*' : values.session! };
}

function changeGrant(kind: 'grant' | 'revoke') {
  return async (argv: string[], io: CliIo): Promise<number> => {
    const { values } = parse(argv, grantOptions);
    try {
      const { principal, session } = grantTarget(values);
      return await withLedger(values, io, kind, async (ledger) => {
        // `grant --all` lifts a revocation of every session (`revoke --all`); it gives no session to anyone.
        const lifting = kind === 'grant' && session === '*';
        const wasRevoked = lifting && (await ledger.grants({ principal, session })).some((g) => g.state === 'revoked');
        const rec = await ledger[kind](principal, session, { by: values.by });
        // A record of every session says so, as grants --json lists it (a bare session "*" granted reads as a grant).
        if (values.json) writeJson(io.stdout, listedGrant(rec));
        else
          io.stdout.write(
            printableLines([
              lifting
                ? `${wasRevoked ? 'lifted the revocation of' : 'no revocation on all sessions to lift for'} ${principal} at ${rec.at}`
                : `${rec.state} ${principal} on ${session === '*' ? 'all sessions' : `session ${session}`} at ${rec.at}`,
            ]),
          );
        if (lifting) {
          const still = (await ledger.grants({ principal }))
            .filter((g) => g.state === 'revoked' && g.session !== '*')
            .map((g) => g.session);
          io.stderr.write(
            printableLines([
              `note: grant --all grants no session: ${principal} reads and publishes in sessions it owns or is granted (grant --session S)`,
              ...(still.length > 0
                ? [`note: ${principal} stays revoked on ${counted(still.length, 'session')}: ${still.join(', ')}`]
                : []),
            ]),
          );
        }
        return EXIT_OK;
      });
    } catch (err) {
      return reportError(err, io, values.json);
    }
  };
}

/**
 * A record as grant, revoke and grants print it with --json: one of every session (session `*`) marked
 * `everySession: true`, and grant --all's, whose state is `granted` (the record's own), also `revocationLifted: true`:
 * a revocation of every session lifted, no session granted, as the text form says ("revocation lifted"). Fields
 * added beside the record's (the --json contract: its fields and values stay).
 */
function listedGrant(g: GrantRecord): GrantRecord & { everySession?: true; revocationLifted?: true } {
  if (g.session !== '*') return g;
  return { ...g, everySession: true, ...(g.state === 'granted' ? { revocationLifted: true as const } : {}) };
}

export const grant = changeGrant('grant');
export const revoke = changeGrant('revoke');

export async function grants(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, { ...storeOptions, principal: { type: 'string' }, session: { type: 'string' } });
  try {
    // The library's '*' filter gives the principal-wide records alone (revoke --all, grant --all), which read as grants
    // of a session named "*"; on the command line it is as likely a glob the shell left, meant as every session.
    if (values.session === '*')
      throw new UsageError(
        '--session "*" is no session id; without --session every record is listed, those of all sessions (revoke --all, grant --all) with session *',
      );
    return await withLedger(values, io, 'grants', async (ledger) => {
      const { principal, session } = values;
      let list = await ledger.grants({ principal, session });
      // Who can access S: a principal-wide record (revoke --all, or grant --all lifting it) applies to S as well, and
      // is listed with S's own records, each principal's first (the library's filter gives S's records alone).
      if (session !== undefined) {
        const everywhere = await ledger.grants({ principal, session: '*' });
        // A stable sort by principal: within one, the principal-wide records stay ahead of S's, each in its order.
        list = [...everywhere, ...list].sort((a, b) =>
          a.principal < b.principal ? -1 : a.principal > b.principal ? 1 : 0,
        );
      }
      // As history and resume say theirs: an empty listing alone reads as a failure to list (stderr; --json: []).
      if (list.length === 0)
        io.stderr.write(
          printableLines([
            `no grant or revocation records${principal !== undefined ? ` for ${principal}` : ''}${session !== undefined ? ` on session ${session}` : ''} (a session's owner needs none)`,
          ]),
        );
      // --json: a principal-wide record says so (`everySession`), with a session filter or without.
      if (values.json) writeJson(io.stdout, list.map(listedGrant));
      else
        for (const g of list) {
          // A `*` record granted is `grant --all`: a revocation of every session lifted, no session granted. Listed
          // for --session S, it says that it is no record of S's own but applies to every session.
          let state = g.session === '*' && g.state === 'granted' ? 'revocation lifted' : g.state;
          if (g.session === '*' && session !== undefined) state += ' (every session)';
          io.stdout.write(printableRow([g.principal, g.session, state, g.at, ...(g.by ? [g.by] : [])]));
        }
      return EXIT_OK;
    });
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

/** What lstat says a path is, for a refusal. */
function kindOf(st: Stats): string {
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * `keys export / list --out FILE` replaces FILE by renaming a new file over it: over a symlink (`--out /dev/stdout`, a
 * link to the terminal), a device (`/dev/null`, as root) or a FIFO, the link or node itself would be replaced by a
 * file. Such an --out is refused before the store is opened, and so is a non-empty regular file that holds no trust
 * file (see holdsTrustFile); a missing FILE, an empty file, a trust file or a directory (the rename's EISDIR,
 * IO_FAILED) are left to the write.
 * @throws UsageError
 */
async function refuseOutThatIsNoFile(out: string, sub: string): Promise<void> {
  const st = await lstat(out).catch((err: unknown) => {
    if (isErrnoError(err)) return undefined; // missing, or not reachable: the write says which
    throw err;
  });
  if (st !== undefined && st.isFile() && st.size > 0 && !(await holdsTrustFile(out)))
    throw new UsageError(
      `--out ${quoted(out)} exists and is not a trust file (a key file, a store's own file or another document would be lost): keys ${sub} --out replaces only an earlier trust file; choose another name, or remove it first`,
    );
  if (st === undefined || st.isFile() || st.isDirectory()) return;
  throw new UsageError(
    `--out ${quoted(out)} is not a regular file (${kindOf(st)}): keys ${sub} --out writes a new file in its place; without --out it prints to stdout`,
  );
}

/**
 * Whether the regular file at `path` holds a trust file (JSON with `version: 1` and a `keys` array, however valid
 * its entries), which `keys export / list --out` may replace: an earlier export. Anything else there — a private key
 * file (`--out` into the store's keys/), a witness key, LevelDB's `CURRENT`, a document — is never replaced. A file it
 * cannot read is left to the write to report.
 */
async function holdsTrustFile(path: string): Promise<boolean> {
  let text: string;
  try {
    text = (
      await readBoundedFile(path, MAX_TRUST_FILE_BYTES, {
        notAFile: () => new Error('not a regular file'),
        tooLarge: () => new Error('too large'),
      })
    ).toString('utf8');
  } catch (err) {
    return isErrnoError(err);
  }
  try {
    const value: unknown = JSON.parse(text);
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as { version?: unknown }).version === 1 &&
      Array.isArray((value as { keys?: unknown }).keys)
    );
  } catch {
    return false;
  }
}

/** keys export --out FILE | keys rotate | keys revoke KEYID [--at TIME] | keys close KEYID | keys list | keys vkey */
export async function keys(argv: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parse(
    rest,
    { ...storeOptions, out: { type: 'string' }, at: { type: 'string' } },
    true,
  );
  try {
    const keysUsage =
      'usage: keys export [--out FILE] | keys rotate | keys revoke KEYID [--at ISO-TIME] | keys close KEYID | keys list [--out FILE] | keys vkey';
    // Name what is wrong before the usage, as `witness` does: "usage: …" alone left a typo (`keys lst`) to be found by eye.
    // `keys --root DIR list` too: the subcommand comes first.
    // Each a command line of the wrong shape (a subcommand, an argument or an option missing, misspelt or one too
    // many), which points to the command's help.
    if (sub === undefined || sub.startsWith('-'))
      throw new CommandLineError(`keys needs a subcommand first${sub ? `, not ${quoted(sub)}` : ''}; ${keysUsage}`);
    if (!['export', 'rotate', 'revoke', 'close', 'list', 'vkey'].includes(sub))
      throw new CommandLineError(`unknown keys subcommand ${quoted(sub)}; ${keysUsage}`);
    // `keys revoke A B` would revoke A alone, `keys export trust.json` print to stdout: extra words are refused.
    if (positionals.length > (sub === 'revoke' || sub === 'close' ? 1 : 0))
      throw new CommandLineError(`unexpected argument ${quoted(positionals.at(-1)!)}; ${keysUsage}`);
    // Options of one subcommand are refused on the others (`keys rotate --at T` would rotate now, ignoring T).
    if (values.out !== undefined && sub !== 'export' && sub !== 'list')
      throw new CommandLineError(`--out is for keys export and keys list; ${keysUsage}`);
    if (values.at !== undefined && sub !== 'revoke')
      throw new CommandLineError(`--at is for keys revoke; ${keysUsage}`);
    // Before the open, as every missing argument: on a root with no store the open would answer KEY_INVALID instead.
    if (sub === 'revoke' && !positionals[0]) throw new CommandLineError('keys revoke needs a KEYID');
    if (sub === 'close' && !positionals[0]) throw new CommandLineError('keys close needs a KEYID');
    if (values.out === '') throw new UsageError('--out needs a file name');
    if (values.out !== undefined) await refuseOutThatIsNoFile(values.out, sub);
    // This store's own keys, whatever HANDOFF_LEDGER_TRUST names (trust: undefined): `keys export` hands them to
    // auditors and the other hosts, never the others' keys back, and a broken file there does not stop a revocation.
    return await withLedger(
      values,
      io,
      `keys ${sub}`,
      async (ledger) => {
        if (sub === 'vkey') {
          // The C2SP note verifier key of the checkpoint key: what witnesses and tlog tools are configured with.
          if (values.json) writeJson(io.stdout, { vkey: ledger.checkpointVerifierKey });
          else io.stdout.write(printableLines([ledger.checkpointVerifierKey]));
        } else if (sub === 'export' || sub === 'list') {
          const trust = ledger.trustStore();
          if (values.out !== undefined) {
            // The store's own files (trust.json itself, written only under the trust lock; keys/) are never the copy.
            if (await isInsideRoot(ledger.root, values.out))
              throw new UsageError(
                `--out ${quoted(values.out)} is inside the store root ${quoted(ledger.root)}, whose files the store writes itself: keys ${sub} --out writes the copy you hand out, elsewhere`,
              );
            await writeFileAtomic(values.out, JSON.stringify(trust, null, 2) + '\n', 0o644);
            if (values.json)
              writeJson(io.stdout, {
                wrote: values.out,
                keys: trust.keys.length,
                checkpointKeys: trust.checkpointKeys?.length ?? 0,
              });
            // The file named quoted, as a refusal names it, escaped once (printable again would double its backslashes).
            else
              io.stdout.write(
                printableOnceLines([
                  `wrote ${counted(trust.keys.length, 'trusted key')} and ${counted(trust.checkpointKeys?.length ?? 0, 'checkpoint key')} to ` +
                    `${quoted(values.out)}; give this file to auditors out of band` +
                    // A shared store's bundle holds every host's manifests and checkpoints: each host's keys are needed.
                    (postgresUrl(values, io.env)
                      ? ", with every other host's keys export (verify takes one --trust per file)"
                      : ''),
                ]),
              );
          } else if (sub === 'export' || values.json) writeJson(io.stdout, trust);
          else {
            for (const k of trust.keys)
              io.stdout.write(
                printableRow([
                  k.host,
                  k.keyId,
                  `from ${k.notBefore}${k.notAfter ? ` to ${k.notAfter}` : ''}`,
                  ...(k.revokedAt ? [`revoked ${k.revokedAt}`] : []),
                ]),
              );
            // A verifier key's name is any non-space text: quoted (`quoted`: what a terminal acts on as \uXXXX), a
            // field escaped once already (printable again would double each backslash of the quote).
            for (const k of trust.checkpointKeys ?? [])
              io.stdout.write(
                printableRow([
                  k.host,
                  k.keyId,
                  escapedOnce(`checkpoints ${quoted(k.vkey)}`),
                  `from ${k.notBefore}${k.notAfter ? ` to ${k.notAfter}` : ''}`,
                  ...(k.revokedAt ? [`revoked ${k.revokedAt}`] : []),
                ]),
              );
          }
        } else if (sub === 'rotate') {
          const revokedBefore = revokedKeyNames(ledger.trustStore().checkpointKeys ?? []);
          const keyId = await ledger.rotateKey();
          // A rotation after a revocation revokes the checkpoint key it replaces (runbook step 3: out of logs.json).
          const { revoked } = revokedCheckpointKeys(ledger.trustStore(), ledger.host, keyId, revokedBefore);
          if (values.json) writeJson(io.stdout, { rotated: true, keyId, checkpointKeysRevoked: revoked });
          else
            io.stdout.write(
              printableOnceLines([
                `rotated: new signing key ${printable(keyId)}`,
                ...revoked.map(checkpointKeyRevokedLine),
              ]),
            );
        } else if (sub === 'close') {
          // The log's record of the key's window, closed where trust.json ends it (a store restored from before a
          // rotation or revocation); trust.json and the checkpoint keys are not changed.
          const keyId = positionals[0]!;
          const { at, changed } = await ledger.closeKeyWindow(keyId);
          if (values.json) writeJson(io.stdout, { closed: keyId, at, changed });
          else
            io.stdout.write(
              printableLines([
                changed
                  ? `closed ${keyId} in the log at ${at}, where trust.json ends it; trust.json is unchanged`
                  : `already closed ${keyId} in the log at ${at}, where trust.json ends it; nothing changed`,
              ]),
            );
        } else {
          const keyId = positionals[0]!;
          const revokedBefore = revokedKeyNames(ledger.trustStore().checkpointKeys ?? []);
          const hostKeysRevokedBefore = revokedKeyNames(ledger.trustStore().keys);
          // The time that holds: a key revoked before keeps its earlier time, whatever --at asked for.
          const at = await ledger.revokeKey(keyId, values.at);
          // The other key ids of the same public key the revocation took with it (trust.json from an older version).
          const alsoRevoked = ledger
            .trustStore()
            .keys.filter(
              (k) => k.keyId !== keyId && k.revokedAt !== undefined && !hostKeysRevokedBefore.has(checkpointKeyName(k)),
            )
            .map((k) => ({ host: k.host, keyId: k.keyId, revokedAt: k.revokedAt! }));
          // The checkpoint keys this revocation took with it, and the one the store signs with, which only the next
          // rotation can revoke: runbook step 3 takes each out of every witness's logs.json at once.
          const { revoked, atNextRotation } = revokedCheckpointKeys(
            ledger.trustStore(),
            ledger.host,
            keyId,
            revokedBefore,
          );
          if (values.json)
            writeJson(io.stdout, {
              revoked: keyId,
              at,
              alsoRevoked,
              checkpointKeysRevoked: revoked,
              ...(atNextRotation ? { checkpointKeyAtNextRotation: atNextRotation } : {}),
            });
          else
            io.stdout.write(
              printableOnceLines([
                `revoked ${printable(keyId)} from ${printable(at)}`,
                ...alsoRevoked.map(
                  (k) =>
                    `revoked ${printable(k.keyId)} of ${printable(k.host)} from ${printable(k.revokedAt)}: the same public key, listed under another key id`,
                ),
                ...revoked.map(checkpointKeyRevokedLine),
                ...(atNextRotation
                  ? [
                      `the checkpoint key this store signs with (${printable(atNextRotation.keyId)}) is revoked by the next \`keys rotate\`: run it now`,
                    ]
                  : []),
              ]),
            );
        }
        return EXIT_OK;
      },
      { trust: undefined },
    );
  } catch (err) {
    // `--json` before the subcommand (`keys --json export`) is no option of the parse above, yet asks for JSON.
    return reportError(err, io, values.json || wantsJson(argv));
  }
}

/**
 * What `keys revoke` and `keys rotate` say of a checkpoint key they revoked: one terminal-safe line (each value escaped
 * once where it is put in: the verifier key's name quoted, the rest `printable`), which `printableOnce` prints as it is.
 */
const checkpointKeyRevokedLine = (k: { host: string; keyId: string; vkey: string; revokedAt: string }): string =>
  `revoked checkpoint key ${printable(k.keyId)} of ${printable(k.host)} from ${printable(k.revokedAt)}: take ${quoted(k.vkey)} out of every witness's logs.json`;

/** A checkpoint key's place in trust.json: host and key id. */
const checkpointKeyName = (k: { host: string; keyId: string }): string => `${k.host}\u0000${k.keyId}`;

/**
 * The listings of `keys` (trust.json's manifest or checkpoint keys) revoked, by `checkpointKeyName`: what a revocation
 * or rotation found before it.
 */
const revokedKeyNames = (
  keys: ReadonlyArray<{ host: string; keyId: string; revokedAt?: string }>,
): ReadonlySet<string> => new Set(keys.filter((k) => k.revokedAt !== undefined).map(checkpointKeyName));

/**
 * After `keys revoke <keyId>`: the checkpoint keys revoked now that were not before, and this host's checkpoint key in
 * use when the revoked host key's window overlaps it (a revocation cannot take the key the store signs with; the next
 * `keys rotate` replaces it and revokes it).
 */
function revokedCheckpointKeys(
  trust: TrustStore,
  host: string,
  keyId: string,
  revokedBefore: ReadonlySet<string>,
): {
  revoked: Array<{ host: string; keyId: string; vkey: string; revokedAt: string }>;
  atNextRotation?: { host: string; keyId: string; vkey: string };
} {
  const checkpointKeys = trust.checkpointKeys ?? [];
  const revoked = checkpointKeys
    .filter((k) => k.revokedAt !== undefined && !revokedBefore.has(checkpointKeyName(k)))
    .map((k) => ({ host: k.host, keyId: k.keyId, vkey: k.vkey, revokedAt: k.revokedAt! }));
  const revokedHostKeys = trust.keys.filter((k) => k.keyId === keyId && k.host === host && k.revokedAt !== undefined);
  const inUse = checkpointKeys.find(
    (k) =>
      k.host === host &&
      k.notAfter === undefined &&
      k.revokedAt === undefined &&
      revokedHostKeys.some((h) => overlaps(h, k)),
  );
  return { revoked, ...(inUse ? { atNextRotation: { host: inUse.host, keyId: inUse.keyId, vkey: inUse.vkey } } : {}) };
}
