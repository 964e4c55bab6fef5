/**
 * `handoff-ledger demo`: the incident's fix, end to end, on the embedded store. A restricted account
 * (write access to one temporary project only) runs a long session with a scripted model; past the
 * 0.7 threshold the Harness compacts through the ledger; the ledger is closed and reopened (a host
 * restart); resume verifies and the session continues; a manual /compact does the same. Each step is
 * printed, and each claim is checked, so the demo fails loudly instead of printing something untrue.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve, sep } from 'node:path';
import {
  compact,
  HANDOFF_CONTEXT_HEADER,
  resumeContext,
  shouldCompact,
  DEFAULT_COMPACTION_RATIO,
  SUBMIT_HANDOFF,
  type ModelAdapter,
  type ModelMessage,
  type ModelRequest,
  type ModelResponse,
} from '../index.js';
import { type Ledger } from '../ledger/ledger.js';
import { defaultRoot, openLedger } from '../ledger/open.js';
import { throwIfCancelled } from '../errors.js';
import type { HashBackendName } from '../../store/hash/backends.node.js';
import type { Summary } from '../summary/summary.js';
import { printableOnce, shellWord } from '../../manifests/encoding/printable.js';
import type { Digest } from '../../store/hash/digest.js';

export interface DemoOptions {
  /** Store directory (the CLI passes the default root). */
  root?: string;
  host?: string;
  /** The BLAKE3 backend (the CLI passes HANDOFF_LEDGER_HASH's, as every command takes it). */
  hash?: HashBackendName;
  /**
   * The log's checkpoint origin: a new store's name, an existing store's must match (the CLI passes
   * HANDOFF_LEDGER_ORIGIN's, as every command takes it; default: the store's own, or a made-up one for a new store).
   */
  origin?: string | undefined;
  out: { write(chunk: string): unknown };
  /**
   * How the operator runs the CLI, for the last line, which says how to look at what the demo wrote (default
   * `handoff-ledger`; `npm start` in a checkout, where that command is not installed: `node dist/src/cli/main.js`).
   */
  cli?: string;
  /**
   * Ends the demo (`CANCELLED`) once it aborts: an open of the store (its waits included), a compaction's publish
   * before its append commits, or the next step; the ledger is closed and the temporary project directory removed
   * all the same. What it published before stays in the store.
   */
  signal?: AbortSignal | undefined;
}

/** A word as a POSIX shell reads it back (the one helper of every suggested command, manifests/encoding/printable.ts). */
export { shellWord };

export interface DemoReport {
  root: string;
  session: string;
  published: Array<{ trigger: 'auto' | 'manual'; seq: number; id: string }>;
  answers: string[];
}

const CONTEXT_WINDOW = 1000;
const PRINCIPAL = 'demo-user';

const SUMMARIES: Summary[] = [
  {
    task: 'Add retry with exponential backoff to the HTTP client',
    state: 'Retry loop written in src/http.ts and unit-tested; no jitter yet',
    nextSteps: ['Add full jitter to the backoff delay', 'Document the retry options in README.md'],
    decisions: ['Retry only idempotent methods'],
    files: [{ path: 'src/http.ts', note: 'retry loop in request()' }],
  },
  {
    task: 'Add retry with exponential backoff to the HTTP client',
    state: 'Jitter added and tested; documentation pending',
    nextSteps: ['Document the retry options in README.md'],
    files: [{ path: 'README.md' }],
  },
];

class DemoFailure extends Error {}

function check(condition: boolean, claim: string): void {
  if (!condition) throw new DemoFailure(`demo check failed: ${claim}`);
}

const within = (path: string, dir: string) => path === dir || path.startsWith(dir + sep);

/** The account's ordinary file tool: real paths only, inside the project only. */
class ProjectFileTool {
  calls = 0;
  constructor(readonly project: string) {}

  private async realTarget(path: string): Promise<string> {
    let dir = resolve(this.project, path);
    const rest: string[] = [];
    for (;;) {
      try {
        return join(await realpath(dir), ...rest);
      } catch {
        rest.unshift(basename(dir));
        dir = dirname(dir);
      }
    }
  }

  async write(path: string, content: string): Promise<string> {
    this.calls++;
    const target = await this.realTarget(path);
    if (!within(target, this.project)) return 'denied: outside_allowed_roots';
    await writeFile(target, content, { flag: 'w' });
    return 'ok';
  }
}

const tokens = (messages: readonly ModelMessage[]) =>
  messages.reduce((n, m) => n + 4 + Math.ceil(m.content.length / 4), 0);

/** The scripted model: canned turns, the next summary on compaction, answers from the handoff after resume. */
function scriptedModel(): ModelAdapter {
  let summaries = 0;
  return async (request: ModelRequest): Promise<ModelResponse> => {
    if (request.purpose === 'compaction') {
      const summary = SUMMARIES[summaries++];
      check(
        request.tools?.length === 1 && request.tools[0]?.name === SUBMIT_HANDOFF,
        'compaction offers only submit_handoff',
      );
      return {
        finishReason: 'tool_calls',
        toolCalls: [{ id: `call_${summaries}`, name: SUBMIT_HANDOFF, input: summary }],
      };
    }
    const last = request.messages.at(-1)?.content ?? '';
    const handoff = request.messages.find((m) => m.content.startsWith(HANDOFF_CONTEXT_HEADER));
    if (last.startsWith('What')) {
      const next = handoff?.content
        .split('\n')
        .find((l) => l.startsWith('1. '))
        ?.slice(3);
      return { finishReason: 'stop', text: next ? `Next I will: ${next}.` : 'I have lost the thread of this session.' };
    }
    return { finishReason: 'stop', text: `Done: ${last.slice(0, 40)}… `.padEnd(360, '·') };
  };
}

class DemoSession {
  context: ModelMessage[] = [];
  /** The handoff the context builds on (README, "In a Harness"): a fresh session has none. */
  head: Digest | null = null;
  readonly files: ProjectFileTool;
  constructor(
    public ledger: Ledger,
    readonly model: ModelAdapter,
    readonly scope: { principal: string; session: string; run: string },
    project: string,
    private readonly say: (label: string, text: string) => void,
    /** The demo's signal: a compaction's publish ends at it before its append commits. */
    private readonly signal: AbortSignal | undefined,
  ) {
    this.files = new ProjectFileTool(project);
  }

  async send(text: string): Promise<string> {
    this.context.push({ role: 'user', content: text });
    const res = await this.model({ purpose: 'turn', messages: this.context });
    const answer = res.text ?? '';
    this.context.push({ role: 'assistant', content: answer });
    return answer;
  }

  async compact(trigger: 'auto' | 'manual'): Promise<{ seq: number; id: string }> {
    const before = tokens(this.context);
    const callsBefore = this.files.calls;
    const { receipt, context } = await compact({
      ledger: this.ledger,
      scope: this.scope,
      model: this.model,
      transcript: this.context,
      expectedPrev: this.head,
      signal: this.signal,
    });
    check(this.files.calls === callsBefore, 'compaction makes no file-tool call');
    this.context = context;
    this.head = receipt.id;
    this.say('published', `${trigger} compaction seq ${receipt.seq}: manifest ${receipt.id}`);
    this.say('', `summary blob ${receipt.digest} (${receipt.size} bytes), signed by host ${this.ledger.host}`);
    this.say('', `context ${before} → ${tokens(this.context)} tokens; file-tool calls: 0`);
    return { seq: receipt.seq, id: receipt.id };
  }

  /** Host restart: close the ledger, reopen it, and take the context from a verified resume only. */
  async restart(open: () => Promise<Ledger>, expected: { seq: number; id: string }, summary: Summary): Promise<void> {
    await this.ledger.close();
    this.context = [];
    this.ledger = await open();
    this.say('restart', 'ledger closed and reopened (host restart); the in-memory context is gone');
    const callsBefore = this.files.calls;
    const resumed = await this.ledger.resume(this.scope);
    check(resumed?.id === expected.id && resumed.seq === expected.seq, 'resume returns the compaction just published');
    check(JSON.stringify(resumed?.summary) === JSON.stringify(summary), 'resume returns the same summary');
    check(this.files.calls === callsBefore, 'resume makes no file-tool call');
    this.context = [resumeContext(resumed!)];
    this.head = resumed!.id;
    this.say('resume', `verified seq ${resumed!.seq} (signature, chain link, scope, blob digest) — no file access`);
  }
}

/**
 * Runs the demo, printing each step to `out`.
 * @throws LedgerError / StoreError / ManifestError from the ledger (`CANCELLED` once `signal` aborts); an Error when a
 *   demo check fails
 */
export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  // Absolute: the project directory's file tool judges paths against it (a relative root failed its own check).
  const root = resolve(options.root ?? defaultRoot());
  const host = options.host ?? 'demo-host';
  // What a line names is data (the root and host given, a notice, a file tool's answer): a line with a character a
  // terminal acts on is escaped (`printableOnce`: a notice, escaped already, is not escaped twice).
  const say = (label: string, text: string) => void options.out.write(`${label.padEnd(10)} ${printableOnce(text)}\n`);
  const signal = options.signal;
  const open = () =>
    openLedger({ root, host, hash: options.hash, origin: options.origin, onNotice: (m) => say('notice', m), signal });
  const scope = {
    principal: PRINCIPAL,
    session: `demo-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`,
    run: 'run-1',
  };
  const report: DemoReport = { root, session: scope.session, published: [], answers: [] };
  options.out.write('handoff-ledger demo: compaction for a restricted account, end to end\n\n');
  // Removed whatever happens, a refused first open included (a locked store, a bad host).
  const made = await mkdtemp(join(tmpdir(), 'handoff-demo-project-'));
  let session: DemoSession | undefined;
  try {
    const project = await realpath(made);
    session = new DemoSession(await open(), scriptedModel(), scope, project, say, signal);
    say('store', `${root} (embedded: filesystem blobs + LevelDB manifests), host ${host}`);
    say('account', `${PRINCIPAL} may write only to ${project}`);
    say('', `write README.md → ${await session.files.write('README.md', '# demo project\n')}`);
    const denied = await session.files.write(join(root, 'HANDOFF.md'), 'x');
    check(denied.startsWith('denied: outside_allowed_roots'), 'the store is outside the account');
    say('', `write ${join(root, 'HANDOFF.md')} → ${denied}`);
    say(
      'session',
      `${scope.session}, context window ${CONTEXT_WINDOW} tokens, compaction at ${DEFAULT_COMPACTION_RATIO * 100}%`,
    );
    for (let n = 1; ; n++) {
      throwIfCancelled(signal);
      check(n <= 20, 'the session reaches the threshold');
      await session.send(`Turn ${n}: keep working on the HTTP retry logic. `.padEnd(200, '.'));
      const used = tokens(session.context);
      say(`turn ${n}`, `${used}/${CONTEXT_WINDOW} tokens (${Math.round((used / CONTEXT_WINDOW) * 100)}%)`);
      if (shouldCompact({ usedTokens: used, contextWindow: CONTEXT_WINDOW })) {
        say('threshold', `≥ ${DEFAULT_COMPACTION_RATIO * 100}% → automatic compaction through the ledger`);
        report.published.push({ trigger: 'auto', ...(await session.compact('auto')) });
        break;
      }
    }
    throwIfCancelled(signal);
    await continueAfterRestart(session, open, report, 0, say);

    throwIfCancelled(signal);
    await session.send('Turn 6: add the jitter. '.padEnd(200, '.'));
    say('turn 6', `${tokens(session.context)}/${CONTEXT_WINDOW} tokens, below the threshold`);
    say('user', '/compact');
    report.published.push({ trigger: 'manual', ...(await session.compact('manual')) });
    throwIfCancelled(signal);
    await continueAfterRestart(session, open, report, 1, say);
    throwIfCancelled(signal);

    const after = await session.files.write(join(root, 'HANDOFF.md'), 'x');
    check(after.startsWith('denied: outside_allowed_roots'), 'permissions are unchanged');
    say('account', `unchanged: ${PRINCIPAL} still writes only to ${project}; the store is still denied`);
    options.out.write('\ndemo complete: two compactions published and resumed; no file access was needed\n');
    // Where it is and under which host: any other command opens as the machine's host name, which has no key in a
    // store only the demo wrote (KEY_INVALID), and on the default store the demo's sessions sit among real ones.
    const look = ['history', '--root', root, '--host', host, '--principal', PRINCIPAL, '--session', scope.session];
    options.out.write(
      `${printableOnce(`look at it: ${options.cli ?? 'handoff-ledger'} ${look.map(shellWord).join(' ')}`)}\n`,
    );
    return report;
  } finally {
    try {
      await session?.ledger.close();
    } finally {
      await rm(made, { recursive: true, force: true });
    }
  }
}

async function continueAfterRestart(
  session: DemoSession,
  open: () => Promise<Ledger>,
  report: DemoReport,
  index: number,
  say: (label: string, text: string) => void,
): Promise<void> {
  const published = report.published[index]!;
  const summary = SUMMARIES[index]!;
  await session.restart(open, published, summary);
  say('user', 'What should we do next?');
  const answer = await session.send('What should we do next?');
  check(answer === `Next I will: ${summary.nextSteps[0]}.`, 'the model answers from the resumed summary');
  say('model', answer);
  report.answers.push(answer);
}
