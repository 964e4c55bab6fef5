/**
 * Starts one Harness session in a world, on the real ledger, and restarts it the way a host restart
 * does: the ledger is closed and reopened, the transcript and file tool are opened afresh, and only
 * what the ledger returns on resume carries the context across.
 */
import { join } from 'node:path';
import { type Ledger } from '../../../src/ledger/ledger.js';
import { openLedger, type OpenLedgerOptions } from '../../../src/ledger/open.js';
import type { CompactionMode } from '../../../src/index.js';
import { ReferenceHarness } from './harness.js';
import type { ScriptedModel } from './scripted-model.js';
import { Transcript } from './transcript.js';
import type { World } from './world.js';

export const SESSION = 'sess-42';
export const CONTEXT_WINDOW = 1000;

export interface SessionOptions {
  model: ScriptedModel;
  /** false: the legacy Harness, which has no ledger. */
  ledger?: boolean;
  ledgerOptions?: Partial<OpenLedgerOptions>;
  run?: string;
  mode?: CompactionMode;
}

export interface RunningSession {
  harness: ReferenceHarness;
  ledger: Ledger | undefined;
  transcript: Transcript;
  model: ScriptedModel;
}

export async function startSession(world: World, options: SessionOptions): Promise<RunningSession> {
  const ledger =
    options.ledger === false
      ? undefined
      : await openLedger({ root: world.ledgerRoot, host: 'e2e-host', onNotice: () => {}, ...options.ledgerOptions });
  const transcript = await Transcript.open(join(world.stateDir, `${SESSION}.jsonl`));
  const harness = new ReferenceHarness({
    fileTool: await world.fileTool(),
    transcript,
    model: options.model,
    ledger,
    session: SESSION,
    run: options.run ?? 'run-1',
    contextWindow: CONTEXT_WINDOW,
    internalDir: world.internalDir,
    mode: options.mode,
  });
  return { harness, ledger, transcript, model: options.model };
}

/** Host restart: close the ledger and open everything again. The caller resumes. */
export async function restart(
  world: World,
  previous: RunningSession,
  options: SessionOptions,
): Promise<RunningSession> {
  await previous.ledger?.close();
  return startSession(world, { run: 'run-2', ...options });
}

/** A user request of exactly 200 characters (54 tokens with the message overhead). */
export function request(n: number): string {
  return `Request ${n}: continue the retry work. `.padEnd(200, '.');
}

/** An assistant answer of exactly 360 characters (94 tokens with the message overhead). */
export function answer(n: number): string {
  return `Answer ${n}: done, the retry loop handles that case now. `.padEnd(360, '.');
}
