/**
 * A reference Harness: one session of one account. Turns go to the model with the ordinary file tool;
 * after each turn the context is measured, and past the threshold it compacts — the legacy way (the
 * model writes HANDOFF.md with its file tool) or the fixed way (`compact` publishes to the ledger).
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import {
  compact,
  resumeContext,
  shouldCompact,
  type CompactionMode,
  type ModelAdapter,
  type ModelMessage,
} from '../../../src/index.js';
import type { Ledger, Resumed } from '../../../src/ledger/ledger.js';
import type { Summary } from '../../../src/summary/summary.js';
import type { Digest } from '../../../store/hash/digest.js';
import { FileTool } from './file-tool.js';
import { contextTokens } from './tokens.js';
import type { Transcript } from './transcript.js';

/** What the Harness needs of the ledger. */
export type HarnessLedger = Pick<Ledger, 'publish' | 'resume'>;

export interface HarnessOptions {
  fileTool: FileTool;
  transcript: Transcript;
  model: ModelAdapter;
  ledger?: HarnessLedger;
  session: string;
  run: string;
  contextWindow: number;
  ratio?: number;
  /** The Harness's internal temp folder (the legacy path writes HANDOFF.md there). */
  internalDir: string;
  mode?: CompactionMode;
}

/** The incident's failure, worded as the legacy Harness reported it. */
export class LegacyCompactionError extends Error {
  override readonly name = 'LegacyCompactionError';
  constructor(readonly path: string) {
    super(`Compaction did not create ${path}`);
  }
}

export interface TurnResult {
  answer: string;
  compacted?: { trigger: 'auto'; seq: number };
  /** An automatic compaction that failed: the turn still stands and the context is kept. */
  compactionError?: unknown;
}

export class ReferenceHarness {
  /** The handoff message that stands in for everything before `contextStart`. */
  handoff: ModelMessage | undefined;
  /** The id of that handoff, which the next compaction builds on (`expectedPrev`); null before the first. */
  head: Digest | null = null;
  contextStart = 0;
  readonly compactions: Array<{ trigger: 'auto' | 'manual'; seq: number; summary: Summary; usedTokens: number }> = [];

  constructor(readonly options: HarnessOptions) {}

  get fileTool(): FileTool {
    return this.options.fileTool;
  }

  private get ledger(): HarnessLedger {
    if (!this.options.ledger) throw new Error('this harness has no ledger (legacy only)');
    return this.options.ledger;
  }

  /** What the model sees: the handoff, then the transcript since the last compaction. */
  context(): ModelMessage[] {
    const tail = this.options.transcript.messages(this.contextStart);
    return this.handoff ? [this.handoff, ...tail] : tail;
  }

  usedTokens(): number {
    return contextTokens(this.context());
  }

  /** One user request: model turns (running file-tool calls) until it answers; then the 0.7 check. */
  async send(text: string): Promise<TurnResult> {
    const { transcript, model, fileTool } = this.options;
    await transcript.append({ role: 'user', content: text });
    for (let round = 0; ; round++) {
      if (round === 8) throw new Error('the model kept calling tools');
      const res = await model({
        purpose: 'turn',
        messages: this.context(),
        tools: FileTool.definitions(),
        toolChoice: 'auto',
      });
      if (!res.toolCalls?.length) {
        const answer = res.text ?? '';
        await transcript.append({ role: 'assistant', content: answer });
        const result: TurnResult = { answer };
        if (
          shouldCompact({
            usedTokens: this.usedTokens(),
            contextWindow: this.options.contextWindow,
            ratio: this.options.ratio,
          })
        ) {
          try {
            result.compacted = { trigger: 'auto', seq: (await this.compactWithConfiguredPath('auto')).seq };
          } catch (err) {
            result.compactionError = err;
          }
        }
        return result;
      }
      await transcript.append({ role: 'assistant', content: res.text ?? '', toolCalls: res.toolCalls });
      for (const call of res.toolCalls) {
        const out = await fileTool.handle(call);
        await transcript.append({ role: 'tool', toolCallId: call.id, content: out.content });
      }
    }
  }

  /** A slash command; `/compact` is manual compaction. */
  async command(line: string): Promise<{ seq: number }> {
    if (line.trim() !== '/compact') throw new Error(`unknown command ${line}`);
    return this.compactWithConfiguredPath('manual');
  }

  /** With a ledger: the fixed path. Without: the legacy path (which, for this account, always fails). */
  private async compactWithConfiguredPath(trigger: 'auto' | 'manual'): Promise<{ seq: number }> {
    if (this.options.ledger) return this.compactNow(trigger);
    await this.legacyCompact();
    throw new Error('legacy compaction created the file, which a restricted account cannot do');
  }

  /** The fixed path: the Harness publishes the handoff itself; the model touches no file. */
  async compactNow(trigger: 'auto' | 'manual', signal?: AbortSignal): Promise<{ seq: number }> {
    const { transcript, model, session, run } = this.options;
    const through = transcript.length;
    const usedTokens = this.usedTokens();
    const { receipt, summary, context } = await compact({
      ledger: this.ledger,
      scope: { principal: this.fileTool.account.principal, session, run },
      model,
      transcript: this.context(),
      covers: { transcriptThrough: through, transcriptDigest: await transcript.digest() },
      signal,
      mode: this.options.mode,
      expectedPrev: this.head,
    });
    // Only a published handoff replaces the context; on any failure above the turns stay as they were.
    this.handoff = context.at(-1);
    this.head = receipt.id;
    this.contextStart = through;
    this.compactions.push({ trigger, seq: receipt.seq, summary, usedTokens });
    return { seq: receipt.seq };
  }

  /** After a restart: the verified handoff becomes the context again, with no file access. */
  async resume(): Promise<Resumed | undefined> {
    const resumed = await this.ledger.resume({
      principal: this.fileTool.account.principal,
      session: this.options.session,
    });
    if (!resumed) return undefined;
    this.handoff = resumeContext(resumed);
    this.head = resumed.id;
    this.contextStart = resumed.manifest.covers?.transcriptThrough ?? this.options.transcript.length;
    return resumed;
  }

  /** Where the legacy Harness told the model to put the handoff. */
  legacyHandoffPath(): string {
    return join(this.options.internalDir, this.options.session, 'HANDOFF.md');
  }

  /**
   * The incident, step by step: a side request tells the model to write the handoff to the internal
   * folder with its file tool; the Harness then looks for the file. Nothing is added to the transcript.
   * @throws LegacyCompactionError when the file was not created
   */
  async legacyCompact(): Promise<void> {
    const path = this.legacyHandoffPath();
    const res = await this.options.model({
      purpose: 'turn',
      messages: [
        ...this.context(),
        { role: 'user', content: `Write a handoff summary of this session to ${path} using write_file.` },
      ],
      tools: FileTool.definitions(),
    });
    for (const call of res.toolCalls ?? []) await this.fileTool.handle(call);
    if (
      !(await access(path).then(
        () => true,
        () => false,
      ))
    )
      throw new LegacyCompactionError(path);
  }

  /** The incident's resume: the model is told to read the handoff back with its file tool. */
  async legacyResume(): Promise<{ ok: boolean; content: string; code?: string }[]> {
    const path = this.legacyHandoffPath();
    const res = await this.options.model({
      purpose: 'turn',
      messages: [{ role: 'user', content: `Read ${path} with read_file and continue the session from it.` }],
      tools: FileTool.definitions(),
    });
    const results = [];
    for (const call of res.toolCalls ?? []) results.push(await this.fileTool.handle(call));
    return results;
  }
}
