/**
 * The commands of `handoff-ledger` and their help: what each does, its options and its exit codes. The
 * top-level usage, `help <command>` and `<command> --help` are all printed from this one table, so a
 * command cannot be added without its help.
 */
import type { Command } from './io.js';

export interface CommandSpec {
  /** One line for the command list. */
  summary: string;
  /** The synopsis after `handoff-ledger `. */
  synopsis: string;
  /** Option lines, each `--flag ARG  what it does`. */
  options: string[];
  /**
   * The environment variables it reads that no option stands for, each `NAME[=VALUE]  what it does`, printed in a
   * section of their own (a variable an option falls back to is named on the option's line: `(or HANDOFF_LEDGER_ROOT)`).
   */
  environment?: string[];
  /**
   * What exit codes 0, 1 and 2 mean for this command (2 by default: `STORE_FAILED`, for a command on a store; 70
   * means the same everywhere), and any of its own (a command on a store: 130 / 143, stopped by a signal).
   */
  exits: { ok: string; refused: string; failed?: string; more?: string[] };
  /** Whether `--json` prints the command's data as JSON on stdout. */
  json: boolean;
  load: () => Promise<Command>;
}

const store = [
  '--root DIR        the store (or HANDOFF_LEDGER_ROOT; default ${XDG_STATE_HOME:-~/.local/state}/handoff-ledger)',
  '--host ID         this host (or HANDOFF_LEDGER_HOST; default the machine name)',
  '--postgres URL    a shared PostgreSQL store (or HANDOFF_LEDGER_POSTGRES)',
  '--origin NAME     the checkpoint name of the log, set when the store is created (or HANDOFF_LEDGER_ORIGIN)',
  '                  (a HANDOFF_LEDGER_* variable set to "" counts as unset; an empty option is a usage error)',
  '--json            print the result as JSON on stdout',
];
/** The options of `store`, for the synopsis of every command on a store. */
const STORE = '[--root DIR] [--host ID] [--postgres URL] [--origin NAME]';
/** PostgreSQL's prepared statements: every command on a store reads it (io.ts `preparedFromEnv`). */
const PREPARED_ENV = [
  "HANDOFF_LEDGER_POSTGRES_PREPARED=on|off  send a PostgreSQL store's statements prepared, parsed once per",
  '                  connection (default on; off behind a pooler that does not keep them, such as PgBouncer',
  '                  in transaction mode before 1.21; another value: USAGE)',
];
/** The BLAKE3 backend: every command that hashes (io.ts `hashFromEnv`). */
const HASH_ENV = [
  'HANDOFF_LEDGER_HASH=auto|native|wasm|noble  the BLAKE3 backend (default auto: native, else WASM, else noble;',
  '                  native or wasm that cannot load here: USAGE)',
];
/**
 * HANDOFF_LEDGER_WITNESS_TIMEOUT_MS, as every command on a store reads it (io.ts `witnessingFromEnv`, checked whether
 * or not witnesses are given).
 */
const WITNESS_TIMEOUT_ENV = [
  'HANDOFF_LEDGER_WITNESS_TIMEOUT_MS=N  wait N ms in place of 5 s (each request and the wait before exit;',
  '                  a whole number from 1 to 2147483647, else USAGE)',
];
/**
 * The witness variables of a command on a store. Every one reads them (io.ts `openFromArgs`: a malformed URL or key
 * is refused, a timeout that is no number too); `submits` says what it gives the witnesses, if anything: only
 * publish (a new checkpoint, in the background) and checkpoint and export (`Ledger.checkpoint()`: one bounded round
 * for cosignatures) submit; every other command makes no checkpoint to submit, and does not wait for witnesses.
 */
const witnessEnv = (submits?: string[]) =>
  submits
    ? [...submits, ...WITNESS_TIMEOUT_ENV]
    : [
        'HANDOFF_LEDGER_WITNESSES  witness URLs (URL#VKEY pins its key), read and checked as every command on a store',
        '                  reads them (a malformed one is refused), but unused: this command makes no checkpoint to',
        '                  submit, and waits for no witness',
        'HANDOFF_LEDGER_WITNESS_TIMEOUT_MS=N  checked likewise (a whole number from 1 to 2147483647, else USAGE),',
        '                  and unused',
      ];
/**
 * The variables every command on a store reads (io.ts `openFromArgs`) that no option stands for: HANDOFF_LEDGER_TRUST
 * (not for `keys`, which lists and exports this store's own keys only), HANDOFF_LEDGER_HASH and the witness variables
 * (`witnessEnv`: `submits` for the commands that give the witnesses a checkpoint).
 */
const storeEnv = ({ trust = true, submits }: { trust?: boolean; submits?: string[] } = {}) => [
  ...witnessEnv(submits),
  ...(trust
    ? [
        "HANDOFF_LEDGER_TRUST=FILE  the other hosts' keys (a trust file, their `keys export`), trusted beside the",
        "                  store's trust.json (hosts sharing a PostgreSQL store)",
      ]
    : []),
  ...HASH_ENV,
  ...PREPARED_ENV,
];
/** NO_COLOR and FORCE_COLOR, as `colours` (io.ts) reads them: the verdict word of verify's and fsck's report. */
const COLOUR_ENV = [
  'NO_COLOR          (non-empty) no colour; FORCE_COLOR (not 0 or false) colour on a pipe too; TERM=dumb: none',
];
/**
 * `--principal`, `--session` (and publish's `--run`) as the command reads them (the principal is not always the
 * session's owner), in the order of a manifest's scope, then the store's options.
 */
const scope = (principal: string, session = 'the session', run?: string) => [
  `--principal P     ${principal}`,
  `--session S       ${session}`,
  ...(run === undefined ? [] : [`--run R           ${run}`]),
  ...store,
];
/** Who may act in a session: its owner (the first principal to publish in it) or a principal granted it. */
const actor = (verb: string) =>
  `the principal who ${verb}: the session's owner (its first publisher) or one granted it`;
const refusedLedger = 'a coded refusal (invalid id, unauthorized, revoked, failed verification…)';
/** Exit 2 of a command on a store: it could not run. */
const STORE_FAILED = 'usage error, I/O or storage failure, store locked by another process';
/**
 * Exit 130 / 143 of a command on a store (io.ts `openFromArgs`): the first SIGINT or SIGTERM while it opens the store
 * ends the open, having done nothing; `after` says what one after the open does (a second signal, of either kind,
 * ends the process at once, as without a handler).
 */
const stopped = (...after: string[]) => [
  '130 stopped by SIGINT (Ctrl-C), 143 by SIGTERM while it opens the store: it did nothing; run it again',
  ...after.map((l) => `    ${l}`),
];
/** After the open, a command that writes nothing: the signal ends it at once, as without a handler. */
const AT_ONCE = '(after the open, a signal ends it at once, as without a handler: it writes nothing)';
/** After the open of grant and revoke: the record is one write. */
const RECORD_AT_ONCE =
  '(after the open, a signal ends it at once, as without a handler: the record is made whole or not at all)';
const core = async () => import('./core.js');
const access = async () => import('./access.js');
const maintenance = async () => import('./maintenance.js');

export const commands: Record<string, CommandSpec> = {
  init: {
    summary: 'create or open the store and its host key',
    synopsis: `init ${STORE} [--json]`,
    options: store,
    environment: storeEnv(),
    exits: {
      ok: 'the store is ready',
      refused: refusedLedger,
      more: stopped('(after the open, a signal ends it at once, as without a handler: the store is ready)'),
    },
    json: true,
    load: async () => (await core()).init,
  },
  publish: {
    summary: 'publish a summary to a session',
    synopsis: `publish --principal P --session S --run R [--expected-prev ID|null] [--max-bytes N] ${STORE} [--json] [FILE|-]`,
    options: [
      '--expected-prev ID|null  the head the chain must still have (null: an empty chain); CHAIN_CONFLICT otherwise',
      '--max-bytes N     largest accepted summary in canonical bytes (default 1 MiB); JSON text over 6 N + 4 KiB',
      '                  (room for \\u escapes) is refused unread: SUMMARY_TOO_LARGE, as a summary over N',
      'FILE|-            the summary JSON (default: standard input); read as standard input is, within the same',
      '                  bound: a FIFO or <(cmd) is read to its end, waiting for its writer (a signal ends',
      '                  the wait: CANCELLED, exit 130 / 143, nothing read kept, nothing made)',
      ...scope(actor('publishes'), 'the session', 'the run (process) that wrote the summary'),
    ],
    environment: storeEnv({
      submits: [
        'HANDOFF_LEDGER_WITNESSES  witness URLs (URL#VKEY pins its key): the new checkpoint is submitted to them before',
        '                  publish exits, waiting 5 s at most for their answers; a witness left without a',
        '                  cosignature is named on stderr (the next publish or checkpoint catches it up)',
      ],
    }),
    exits: {
      ok: 'published; the receipt is on stdout',
      refused: refusedLedger,
      more: stopped(
        'or before it, while it waits for or reads its summary (CANCELLED, nothing made); or, after the open,',
        'before its append commits: nothing published (CANCELLED); a signal once the',
        'append has committed changes nothing: the receipt is printed, exit 0; once it is printed, a signal',
        "ends publish at once (the witnesses' wait included; the summary is published)",
      ),
    },
    json: true,
    load: async () => (await core()).publish,
  },
  resume: {
    summary: 'print the verified latest summary of a session',
    synopsis: `resume --principal P --session S ${STORE} [--json]`,
    options: scope(actor('resumes')),
    environment: storeEnv(),
    exits: {
      ok: 'verified (stdout: the summary; `null` with --json when there is none yet)',
      refused: refusedLedger,
      more: stopped(AT_ONCE),
    },
    json: true,
    load: async () => (await core()).resume,
  },
  history: {
    summary: "list a session's verified chain",
    synopsis: `history --principal P --session S ${STORE} [--json]`,
    options: [
      '(stdout: a line a manifest: seq, time, publishing principal, host, run, id, summary size; tab-separated)',
      ...scope(actor('reads it')),
    ],
    environment: storeEnv(),
    exits: { ok: 'the whole chain verified', refused: refusedLedger, more: stopped(AT_ONCE) },
    json: true,
    load: async () => (await core()).history,
  },
  grant: {
    summary: 'grant a principal access to a session, or lift a revocation',
    synopsis: `grant --principal P (--session S | --all) [--by WHO] ${STORE} [--json]`,
    options: [
      '--all             lift a revocation of every session (revoke --all); grants no session',
      '                  (--session "*" is refused: USAGE)',
      '--by WHO          who decided (free text, at most 1,024 UTF-16 code units)',
      ...scope('the principal given access (or, with --all, whose revocation is lifted)'),
    ],
    environment: storeEnv(),
    exits: { ok: 'recorded', refused: refusedLedger, more: stopped(RECORD_AT_ONCE) },
    json: true,
    load: async () => (await access()).grant,
  },
  revoke: {
    summary: "revoke a principal's access to a session (or all)",
    synopsis: `revoke --principal P (--session S | --all) [--by WHO] ${STORE} [--json]`,
    options: [
      '--all             every session of the principal (--session "*" is refused: USAGE)',
      '--by WHO          who decided (free text, at most 1,024 UTF-16 code units)',
      ...scope('the principal whose access is revoked'),
    ],
    environment: storeEnv(),
    exits: { ok: 'recorded', refused: refusedLedger, more: stopped(RECORD_AT_ONCE) },
    json: true,
    load: async () => (await access()).revoke,
  },
  grants: {
    summary: 'list grants and revocations',
    synopsis: `grants [--principal P] [--session S] ${STORE} [--json]`,
    options: [
      '(stdout: a line a record: principal, session, state, time, who decided if recorded; tab-separated;',
      ' session * is all sessions: revoke --all "revoked", grant --all "revocation lifted"; --json: "everySession": true,',
      ' grant --all\'s also "revocationLifted": true beside its record\'s "state": "granted")',
      ...scope(
        "only this principal's records",
        "this session's records, and those of all sessions (session *),\n" +
          '                    which apply to it too: their state ends "(every session)"; --session "*" is refused: USAGE',
      ),
    ],
    environment: storeEnv(),
    exits: { ok: 'listed', refused: refusedLedger, more: stopped(AT_ONCE) },
    json: true,
    load: async () => (await access()).grants,
  },
  keys: {
    summary: "export, list, rotate, revoke or close this host's keys",
    synopsis: `keys (export [--out FILE] | list [--out FILE] | rotate | revoke KEYID [--at ISO-TIME] | close KEYID | vkey) ${STORE} [--json]`,
    options: [
      'export            the trust file auditors need (stdout, or --out FILE written atomically)',
      'list              the trusted keys and checkpoint keys, one a line (--json or --out FILE: the trust file)',
      'vkey              the C2SP note verifier key of the checkpoint key (<origin>+<hash>+<key>)',
      'rotate            a new signing key; the old one stays trusted for what it signed',
      'revoke KEYID      distrust a key from --at (default now), in every listing of its public key: each',
      '                  listing under another key id it revokes too is named (--json: alsoRevoked)',
      "                  rotate and revoke name each checkpoint key they revoke (take it out of every witness's",
      '                  logs.json), and revoke the one in use that only the next rotate revokes (--json:',
      '                  checkpointKeysRevoked, checkpointKeyAtNextRotation)',
      "close KEYID       close the key's window in the log where trust.json already ends it (a store",
      '                  restored from before its rotation: fsck KEY_WINDOW_MISMATCH); changes nothing else',
      '--out FILE        export, list: write the trust file to FILE (atomically) instead of stdout; a FILE that is',
      '                  a symlink, device, FIFO or socket is refused (USAGE), for the write would replace it',
      '                  with a file, and so is a file that exists and holds no trust file (a key file: it would',
      '                  be lost), and a FILE inside the store root (trust.json itself: the store writes its own',
      '                  files)',
      '--at ISO-TIME     revoke: a UTC time with milliseconds (2026-11-30T12:00:00.000Z); an earlier revocation stays',
      ...store,
    ],
    environment: storeEnv({ trust: false }),
    exits: {
      ok: 'done',
      refused: refusedLedger,
      more: stopped(
        '(after the open, a signal ends it at once, as without a handler: --out is written whole or not at',
        'all; a rotation or revocation it stops is finished by running the same command again)',
      ),
    },
    json: true,
    load: async () => (await access()).keys,
  },
  export: {
    summary: 'write an audit bundle',
    synopsis: `export [--principal P] [--session S] --out DIR [--with-blobs] [--since FILE] ${STORE} [--json]`,
    options: [
      '--out DIR         the bundle directory, made by export (anything there, a file too: BUNDLE_EXISTS; inside',
      '                  the store root: USAGE)',
      '--with-blobs      include the summaries',
      '--since FILE      an earlier checkpoint note of the auditor: add a consistency proof from it',
      ...scope('every chain this principal published in, each whole', "this session's chain"),
    ],
    environment: storeEnv({
      submits: [
        'HANDOFF_LEDGER_WITNESSES  witness URLs (URL#VKEY pins its key): the checkpoint the bundle is cut at is',
        '                  submitted to them, and checkpoint.note carries the cosignatures of those that answer',
        '                  in time (one round, bounded as checkpoint --help says)',
      ],
    }),
    exits: {
      ok: 'written',
      refused: refusedLedger,
      // An AuditError, as the auditor's: exit 2, not the refusal (1) a coded error of the ledger is.
      failed: `${STORE_FAILED},\nan --out that exists (BUNDLE_EXISTS: export never overwrites)`,
      more: [
        '130 stopped by SIGINT (Ctrl-C), 143 by SIGTERM while it opens the store or before it begins to publish',
        '    the bundle: nothing written, no staging directory left; run it again',
      ],
    },
    json: true,
    load: async () => (await import('./export.js')).run,
  },
  verify: {
    summary: 'audit a bundle offline',
    synopsis:
      'verify DIR --trust FILE [--trust FILE]… [--since FILE] [--witness-keys FILE --quorum K] [--json] [--workers auto|N] [--verifier node|noble] [--require-blobs] [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N]',
    options: [
      "--trust FILE      the pinned public keys (`handoff-ledger keys export`); once per file: a shared store's",
      '                  hosts each export their own, merged (one key id with two public keys: TRUST_INVALID)',
      '--since FILE      your earlier checkpoint note: the checkpoint of the bundle must extend it',
      '--witness-keys FILE  pinned witness verifier keys (cosignature/v1), one per line; # comments',
      '--quorum K        the checkpoint counts only with K valid cosignatures by those witnesses',
      '--workers auto|N  verifying threads (default auto: one per core from 3 MiB of manifests, none below',
      '                  or on one core; 0: none; at most 256)',
      '--verifier NAME   Ed25519 backend: node (default) or noble',
      '--require-blobs   a bundle without the summaries (export without --with-blobs) is a finding',
      '--expect full|filtered  what you asked for: the whole log, or a filtered export; the unsigned',
      '                  header never decides alone (filters it declares that you did not confirm here',
      '                  or by --principal / --session are SCOPE_UNCONFIRMED)',
      '--principal ID    hold every chain to this principal (your scope, whatever the bundle declares)',
      '--session ID      hold every chain to this session',
      '--max-bundle-bytes N  refuse a manifests.jsonl larger than N bytes (BUNDLE_INVALID; default 4 GiB)',
      '--json            print the report as JSON on stdout',
    ],
    environment: [...HASH_ENV, ...COLOUR_ENV],
    exits: {
      ok: 'the bundle verified clean',
      refused: 'findings (listed on stdout)',
      failed:
        'usage error; a bundle, trust or other input it cannot read or use (BUNDLE_IO, BUNDLE_INVALID,\n' +
        'TRUST_INVALID, USAGE); verifying threads that failed (WORKER_FAILED); output it cannot write',
    },
    json: true,
    load: async () => (await import('./verify.js')).run,
  },
  'audit-ui': {
    summary: "serve the auditor's page on 127.0.0.1 with a bundle preloaded",
    synopsis:
      'audit-ui [--open] [--trust FILE]… [--since FILE] [--witness-keys FILE --quorum K] [--require-blobs] [--expect full|filtered] [--principal ID] [--session ID] [--max-bundle-bytes N] [--port N] [BUNDLE_DIR]',
    options: [
      '--trust FILE      preload this trust file too (else the auditor picks one in the page); once per file:',
      '                  several are merged, as verify merges them, and the page is given their union',
      '--since FILE      preload an earlier checkpoint (signed note), as verify --since',
      '--witness-keys FILE  preload pinned witness keys (cosignature/v1), one per line; with --quorum',
      '--quorum K        preload the witness quorum: K valid cosignatures by the pinned witnesses',
      '--require-blobs   preset "Require blobs": a bundle without them fails, as verify --require-blobs',
      "--expect full|filtered  preset the page's Expect: the whole log or a filtered export, as verify",
      "--principal ID    preset the page's Principal: hold every chain to this principal",
      "--session ID      preset the page's Session: hold every chain to this session",
      '--max-bundle-bytes N  refuse a manifests.jsonl larger than N bytes (BUNDLE_INVALID; default 4 GiB), here and',
      '                  in the page',
      '--port N          listen on this port (default: any free port)',
      '--open            open the page in the default browser',
    ],
    exits: {
      ok: 'stopped (Ctrl-C or SIGTERM)',
      refused: 'never (a bad bundle is a usage or I/O error, exit 2)',
      failed:
        'usage error; a bundle, trust or other input it cannot read or use (BUNDLE_IO, BUNDLE_INVALID,\n' +
        'TRUST_INVALID, USAGE); a port it cannot listen on',
    },
    json: false,
    load: async () => (await import('./audit-ui.js')).run,
  },
  witness: {
    summary: 'run a C2SP tlog-witness that cosigns checkpoints of the logs it follows, or make its key',
    synopsis:
      'witness (keygen --name NAME --out FILE [--json] | serve --listen HOST:PORT --key FILE --logs LOGS.json --state DIR [--max-body-bytes N] [--request-timeout-ms N])',
    options: [
      'keygen            write a new witness key file (mode 0600, never replaced); stdout: its verifier key',
      '--name NAME       the witness name that cosignature lines carry (e.g. witness.example.com/w1);',
      '                  no space, "+", backslash, control, invisible or format character (INVALID_ARGUMENT)',
      '--out FILE        the key file to create',
      '--json            keygen: print {vkey, name, out} as JSON on stdout',
      'serve             answer POST /add-checkpoint and GET /<sha256(origin)>/checkpoint',
      '--listen H:P      address to listen on (port 0: any free port; printed on stdout with the verifier key)',
      '--key FILE        the witness key file',
      '--logs FILE       {"logs":[{"origin":…,"keys":[<log note verifier key>…]}]} (`keys vkey` prints a ledger\'s)',
      '                  a regular file of at most 16 MiB, read once at start (else USAGE)',
      '--state DIR       where the latest cosigned checkpoint of each log is kept (fsynced before answering)',
      '--max-body-bytes N       largest request body (default 65536; 413 beyond)',
      '--request-timeout-ms N   time for a whole request (default 10000, at most 2147483647; 408 beyond)',
    ],
    exits: {
      ok: 'keygen: written; serve: stopped (Ctrl-C or SIGTERM)',
      refused:
        'a coded refusal (KEY_INVALID, KEY_FILE_UNSAFE, INVALID_ARGUMENT: a bad --name or logs file;\n' +
        'WITNESS_KEY_MISMATCH: a --state of another witness key)',
      failed:
        'usage error (also a missing --key, an unusable --logs, an --out that exists, an address it cannot\n' +
        'listen on); a key file or --state it cannot write or read (IO_FAILED, STORAGE_FAILED), a --state another\n' +
        'witness process serves (LOCKED); output it cannot write',
    },
    json: true,
    load: async () => (await import('./witness.js')).run,
  },
  checkpoint: {
    summary: "print the log's latest signed checkpoint",
    synopsis: `checkpoint [--witness URL[#VKEY]]… ${STORE} [--json]`,
    options: [
      '(stdout: the C2SP tlog-checkpoint signed note, byte for byte, with the cosignatures gathered)',
      '--witness URL     submit it to this witness (C2SP tlog-witness) too; repeatable. Each request is given 5 s',
      '                  (or N ms, set under Environment), and a witness may be asked twice (a 409 names the',
      '                  size it holds), so the note is printed within 2 × 5 s + 1 s = 11 s (2 N + 1 s)',
      '                  with the cosignatures that came; a witness that has not answered by then is left out, and',
      '                  a round still under way may hold the exit 5 s (N) more: 16 s (3 N + 1 s) in all.',
      '                  URL#VKEY pins its verifier key (cosignature/v1): only its valid lines are kept.',
      ...store,
    ],
    environment: storeEnv({
      submits: [
        'HANDOFF_LEDGER_WITNESSES  witness URLs, as --witness (both: all of them); read by every command on a store,',
        '                  submitted to by checkpoint, publish and export',
      ],
    }),
    exits: {
      ok: 'printed',
      refused: 'a coded refusal (ROLLBACK, FORK: the log does not extend the pinned checkpoint)',
      more: stopped(
        '(after the open, a signal ends it at once, as without a handler: a checkpoint it pinned stays pinned)',
      ),
    },
    json: true,
    load: async () => (await import('./tlog.js')).checkpoint,
  },
  prove: {
    summary: 'print an RFC 6962 inclusion or consistency proof as JSON',
    synopsis: `prove (inclusion MANIFEST-ID | consistency OLD-SIZE) [--size N] ${STORE} [--json]`,
    options: [
      'inclusion ID      {leafIndex, treeSize, root, leaf, proof} (base64), leaf = the signed payload',
      'consistency M     {oldSize, oldRoot, treeSize, root, proof} (base64)',
      '--size N          the tree size to prove against (default: the latest checkpoint)',
      ...store,
    ],
    environment: storeEnv(),
    exits: {
      ok: 'printed',
      refused: 'a coded refusal (INVALID_ID, NOT_FOUND, INVALID_ARGUMENT, ROLLBACK, FORK)',
      more: stopped(AT_ONCE),
    },
    json: true,
    load: async () => (await import('./tlog.js')).prove,
  },
  fsck: {
    summary: 'check every manifest, blob and head',
    synopsis: `fsck [--skip-blobs] ${STORE} [--json]`,
    options: ['--skip-blobs      check manifests and heads only', ...store],
    environment: [...storeEnv(), ...COLOUR_ENV],
    exits: { ok: 'clean', refused: 'findings (listed on stdout), or a coded refusal', more: stopped(AT_ONCE) },
    json: true,
    load: async () => (await maintenance()).fsck,
  },
  gc: {
    summary: 'remove unreferenced blobs older than a grace period',
    synopsis: `gc --grace DURATION [--dry-run] ${STORE} [--json]`,
    options: [
      '--grace DURATION  e.g. 24h, 7d: keep younger blobs (in-flight publishes); a whole number of ms, s, m, h or d',
      '                  (a number alone is seconds: --grace 24 keeps 24 seconds)',
      '--dry-run         list what would be removed, and remove nothing',
      ...store,
    ],
    environment: storeEnv(),
    exits: {
      ok: 'collected (or, with --dry-run, listed)',
      refused: refusedLedger,
      more: [
        '130 stopped by SIGINT (Ctrl-C), 143 by SIGTERM: while it opens the store, having removed nothing;',
        '    after, between blobs, each removed whole or kept (the message counts those removed; run gc again',
        '    for the rest)',
      ],
    },
    json: true,
    load: async () => (await maintenance()).gc,
  },
  demo: {
    summary: "the main job: a restricted user's session compacted, restarted and resumed",
    synopsis: 'demo [--root DIR] [--host ID]',
    options: [
      '--root DIR        where the demo store goes (or HANDOFF_LEDGER_ROOT; default the store every command uses,',
      '                  ${XDG_STATE_HOME:-~/.local/state}/handoff-ledger: give a scratch directory to keep it apart)',
      '--host ID         the demo host (or HANDOFF_LEDGER_HOST; default demo-host, not the machine name)',
      '                  (HANDOFF_LEDGER_ROOT or HANDOFF_LEDGER_HOST set to "" counts as unset)',
    ],
    environment: [
      ...HASH_ENV,
      "HANDOFF_LEDGER_ORIGIN=NAME  the log's checkpoint name for a new store, as every command takes it; another",
      "                  store's name refused (INVALID_ARGUMENT)",
      'npm_lifecycle_event, npm_package_name  set by `npm start` in a checkout of handoff-ledger: the last line',
      '                  names the command as node dist/src/cli/main.js (no witness variable is read: the demo',
      '                  submits to no witness)',
    ],
    exits: {
      ok: 'every step ran and every check held',
      refused: refusedLedger,
      more: [
        '130 stopped by SIGINT (Ctrl-C), 143 by SIGTERM: at an open of the store, a publish before its append',
        '    commits, or its next step; its temporary project directory is removed, what it published before stays',
      ],
    },
    json: false,
    load: async () => (await import('./demo.js')).run,
  },
};

export const EXIT_CODES = [
  '0   success (see each command)',
  '1   refused: a coded error, or findings (fsck, verify)',
  `2   could not run: ${STORE_FAILED} (help <command> says which)`,
  '70  internal error (a bug: please report it)',
  '130 / 143  stopped by SIGINT (Ctrl-C) / SIGTERM: a command on a store (help <command> says what it did)',
];

export function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  return [
    'usage: handoff-ledger <command> [options]',
    '       handoff-ledger help <command> | <command> --help | --version',
    '',
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    'BLAKE3 backend: HANDOFF_LEDGER_HASH=auto|native|wasm|noble (default auto: native, else WASM, else noble).',
    'Output: data on stdout, messages and errors on stderr; NO_COLOR disables colour.',
    'Exit codes:',
    ...EXIT_CODES.map((l) => `  ${l}`),
    '',
  ].join('\n');
}

export function commandHelp(spec: CommandSpec): string {
  return [
    `usage: handoff-ledger ${spec.synopsis}`,
    '',
    `${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.`,
    '',
    'Options:',
    ...spec.options.map((o) => `  ${o}`),
    '',
    ...(spec.environment?.length ? ['Environment:', ...spec.environment.map((e) => `  ${e}`), ''] : []),
    'Exit codes:',
    `  0   ${spec.exits.ok}`,
    ...spec.exits.refused.split('\n').map((l, i) => `  ${i === 0 ? '1 ' : '  '}  ${l}`),
    ...(spec.exits.failed ?? STORE_FAILED).split('\n').map((l, i) => `  ${i === 0 ? '2 ' : '  '}  ${l}`),
    `  ${EXIT_CODES[3]}`,
    ...(spec.exits.more ?? []).map((l) => `  ${l}`),
    '',
  ].join('\n');
}
