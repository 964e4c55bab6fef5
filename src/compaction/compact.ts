/**
 * One compaction, as a Harness runs it: ask the model for the handoff (tool call or structured output),
 * validate it, publish it, and hand back the compacted context. The model never touches a file; a
 * rejected answer publishes nothing and leaves the previous compaction as the one `resume` returns.
 */
import type { Digest } from '../../store/hash/digest.js';
import type { Covers } from '../../manifests/format/manifest.js';
import { parsePublishScope, refuseOptionsInScope, SCOPE_CALLS, type PublishScope } from '../ledger/scope.js';
import { errorText, escapedText, namedCancel, readOptionFields, type NamesEveryField } from '../../store/errors.js';
import { isHandoffLedgerError, LedgerError, throwIfCancelled, untilCancelled } from '../errors.js';
import { checkByteBound, validateSummary, type Summary } from '../summary/summary.js';
import type { ModelAdapter, ModelMessage, ModelRequest, ModelResponse } from './model.js';
import { resumeContext, withoutRenderedHandoffs } from './resume-context.js';
import { compactionRequest, extractSummary, type CompactionMode } from './tool.js';

/**
 * What `compact` needs of a ledger: `Ledger.publish` (structurally, so a wrapper fits too), and `Ledger.checkPublish`
 * if it has it.
 */
export interface PublishingLedger {
  /**
   * `Ledger.checkPublish`: when the ledger has it, `compact` calls it before it asks the model, so a refusal of
   * publish that does not depend on the summary (`UNAUTHORIZED`, `REVOKED`, `CHAIN_CONFLICT`, a host key that would
   * not sign: `KEY_REVOKED`, `KEY_EXPIRED`) comes before the transcript is sent to the provider. A wrapper that has
   * only `publish` is asked after the model, at publish. `compact` stops waiting for it at the abort of its `signal`
   * (`CANCELLED`), whether or not the wrapper passes the signal on: it only checks.
   */
  checkPublish?(
    scope: PublishScope,
    options?: {
      signal?: AbortSignal;
      expectedPrev?: Digest | null;
      covers?: Covers;
    },
  ): Promise<unknown>;
  publish(
    scope: PublishScope,
    summary: unknown,
    options?: {
      signal?: AbortSignal;
      expectedPrev?: Digest | null;
      covers?: Covers;
    },
  ): Promise<{ id: Digest; seq: number; digest: Digest; size: number }>;
}

export interface CompactOptions<L extends PublishingLedger = PublishingLedger> {
  ledger: L;
  scope: PublishScope;
  model: ModelAdapter;
  /**
   * The context to summarize: typically the Harness's system prompt, the previous handoff message and the turns since.
   * The whole transcript goes to the model, its system messages too (the summariser needs them to know the task); the
   * leading ones are also kept in the returned `context` (`CompactResult.context`). An empty one, or one of system
   * messages only, is refused (`INVALID_ARGUMENT`, before the model is asked: there is nothing to summarize).
   */
  transcript: readonly ModelMessage[];
  /** What the summary covers in the Harness's full transcript (recorded in the signed manifest). */
  covers?: Covers | undefined;
  signal?: AbortSignal | undefined;
  /**
   * `tool` (default): `submit_handoff`; `structured`: a JSON-Schema response format. Each adapter of
   * `handoff-ledger/adapters/*` asks in its API's way: `anthropicAdapter` forces `submit_handoff` in both modes (the
   * Messages API's structured answer is a forced tool's input), `geminiAdapter` sends its response schema in both;
   * the instruction each sends ends with the way it asks ("Call submit_handoff exactly once …" for a forced tool,
   * "Answer only with the summary as JSON …" for a response schema), whatever the mode.
   */
  mode?: CompactionMode | undefined;
  instructions?: string | undefined;
  maxOutputTokens?: number | undefined;
  /**
   * Checked before publishing, so an oversized answer fails before the store is touched. The ledger
   * enforces its own `maxSummaryBytes` in any case.
   */
  maxSummaryBytes?: number | undefined;
  /**
   * The id of the handoff this context builds on: `resume`'s `id` (`null` for a session with no handoff yet), then the
   * `receipt.id` of each compaction this run published. Publish only if the chain head is still this id:
   * `CHAIN_CONFLICT` otherwise, nothing published (and, with a `Ledger`, the model not asked if the head had already
   * moved). **Pass it**: without it the summary is published after whatever the head is then, so when two runs
   * compact one session, the later becomes the head although its summary knows nothing of the other's work.
   */
  expectedPrev?: Digest | null | undefined;
}

export interface CompactResult<R> {
  receipt: R;
  summary: Summary;
  /**
   * The compacted context: the transcript's leading system messages (the Harness's instructions, not history: the same
   * objects, in their order; one whose text held a lone surrogate as the copy that was sent, U+FFFD in its place), then
   * the handoff message that replaces the summarized turns. A handoff rendered in a leading system message (from
   * `HANDOFF_CONTEXT_HEADER` and its verification line to `HANDOFF_CONTEXT_FOOTER`: the previous one, kept as a system
   * message) is replaced, not kept: the message is kept without it, as a copy, so instructions the Harness put before
   * or after it stay (a message that was only the handoff is dropped). One that begins with the header but is no whole
   * rendering (no verification line, no footer) is kept as it is. System messages after the first other message are
   * history, summarized with it.
   */
  context: ModelMessage[];
}

/** The compaction request of these options (the transcript checked: `INVALID_ARGUMENT` before the model is asked). */
function requestOf(options: CompactOptions): ModelRequest {
  const request = compactionRequest({
    messages: options.transcript,
    mode: options.mode,
    instructions: options.instructions,
    maxOutputTokens: options.maxOutputTokens,
  });
  if (options.signal) request.signal = options.signal;
  return request;
}

async function askModel(options: CompactOptions, request: ModelRequest): Promise<ModelResponse> {
  try {
    // Ended at the abort even when the adapter does not honour the signal (a hand-written one may not): the
    // adapter's call goes on and is dropped. Called as the function it is documented to be, `this` undefined (not
    // the options object compact copied). Not called at all once the signal has aborted (during checkPublish, say): the
    // transcript is not sent for an answer nobody waits for.
    const model = options.model;
    const signal = options.signal;
    return await untilCancelled(
      Promise.resolve().then(() => {
        throwIfCancelled(signal);
        return model(request);
      }),
      signal,
    );
  } catch (err) {
    if (err instanceof LedgerError && err.code === 'CANCELLED') throw err;
    // An adapter aborted by our signal reports it in its own way; the contract is CANCELLED.
    if (options.signal?.aborted) throw new LedgerError('CANCELLED', 'compaction cancelled', { cause: err });
    // Provider errors arrive in every SDK's own shape; the Harness gets one code, the original as cause. Their text
    // is foreign (a provider's answer may quote what it was sent): escaped as the other refusals of compact quote the
    // model's words, so the message is safe to print.
    throw new LedgerError('MODEL_FAILED', `the model adapter failed: ${escapedText(errorText(err))}`, {
      cause: err,
    });
  }
}

/**
 * The transcript's leading system messages: what the returned context keeps before the handoff (the Harness's system
 * prompt must survive a compaction, `messages = context`). A handoff rendered in one of them is the previous
 * compaction's, which the new one replaces: it is taken out (`withoutRenderedHandoffs`), and the rest of the message,
 * the Harness's own text before or after it, is kept (as a copy); a message that was only the handoff is dropped. Read
 * from the compaction request's messages (the transcript as `compactionRequest` checked it; its own instruction turn, a
 * user message, ends them).
 */
function leadingSystem(transcript: readonly ModelMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of transcript) {
    if (m.role !== 'system') break;
    const kept = withoutRenderedHandoffs(m.content);
    if (kept === m.content) out.push(m);
    else if (kept !== '') out.push({ ...m, content: kept });
  }
  return out;
}

/** Every field of CompactOptions: `compact` reads these once, and a field left out of the list fails to compile. */
const COMPACT_FIELDS = [
  'ledger',
  'scope',
  'model',
  'transcript',
  'covers',
  'signal',
  'mode',
  'instructions',
  'maxOutputTokens',
  'maxSummaryBytes',
  'expectedPrev',
] as const satisfies ReadonlyArray<keyof CompactOptions>;
const everyCompactField: NamesEveryField<CompactOptions, typeof COMPACT_FIELDS> = true;
void everyCompactField;

/**
 * Runs one compaction: request the summary, extract it, validate it, publish it, and return the compacted context (the
 * transcript's leading system messages, then the handoff).
 * Nothing is published unless every step succeeds; the caller keeps its context on failure.
 * Pass `expectedPrev` (the handoff the context builds on, `null` for none), as the example does: a run that lost the
 * session to another run's compaction is then `CHAIN_CONFLICT` instead of publishing over it.
 * @throws LedgerError `SUMMARY_EMPTY`, `SUMMARY_INVALID`, `SUMMARY_TOO_LARGE`, `SUMMARY_INCOMPLETE`
 *   (truncated or flagged incomplete), `MODEL_REFUSED`, `CANCELLED`, `MODEL_FAILED` (the adapter threw), plus every code of `Ledger.publish`
 *   (`UNAUTHORIZED`, `REVOKED`, `CHAIN_CONFLICT`, …; StoreError / ManifestError `STORAGE_FAILED`, …)
 * @throws LedgerError `INVALID_ID` for a scope publish would refuse, `INVALID_ARGUMENT` for an options field that
 *   throws as it is read (a getter, a proxy; the ledger's `publish` and `checkPublish` too), no ledger or model adapter, a transcript that is not a list of messages
 *   or holds none or throws as it is read (compactionRequest), a `maxSummaryBytes` that is not a non-negative integer, or a scope that carries `expectedPrev`, `covers` or `signal` (they go beside it, in these options) (each before the model is asked);
 *   with a ledger that has `checkPublish` (`Ledger` has), `UNAUTHORIZED`, `REVOKED`, `CHAIN_CONFLICT`, `ROLLBACK` /
 *   `FORK` (the log, or the session's chain cut back) and `INVALID_ARGUMENT` for `covers` or `expectedPrev`, and
 *   ManifestError `TREE_DAMAGED` (the log), `KEY_REVOKED` / `KEY_EXPIRED` (the host key would not sign; or, with
 *   `KEY_UNTRUSTED` too, the session's head is signed by a key resume refuses it for), before the model is asked too
 * @example
 * const system: ModelMessage = { role: 'system', content: 'You are a coding assistant.' };
 * const resumed = await ledger.resume(scope);
 * let messages = resumed ? [system, resumeContext(resumed)] : [system];
 * let head = resumed?.id ?? null;
 * // … turns …
 * if (shouldCompact({ usedTokens, contextWindow })) {
 *   const { receipt, context } = await compact({ ledger, scope, model, transcript: messages, signal, expectedPrev: head });
 *   messages = context; // [system, the handoff]
 *   head = receipt.id;
 * }
 */
export async function compact<L extends PublishingLedger>(
  options: CompactOptions<L>,
): Promise<CompactResult<Awaited<ReturnType<L['publish']>>>> {
  try {
    return await compactOnce(options);
  } catch (err) {
    // A wait that does not know the call (the model's, a wrapper ledger's) says `operation cancelled`: named here.
    throw namedCancel(err, 'compaction');
  }
}

async function compactOnce<L extends PublishingLedger>(
  options: CompactOptions<L>,
): Promise<CompactResult<Awaited<ReturnType<L['publish']>>>> {
  if (typeof options !== 'object' || options === null)
    throw new LedgerError('INVALID_ARGUMENT', 'compact needs { ledger, scope, model, transcript }');
  // Each field read once, here (a getter that throws: INVALID_ARGUMENT naming it, before the model is asked), and
  // what is checked is what is used.
  options = readOptionFields(options, COMPACT_FIELDS, 'compact options', LedgerError) as CompactOptions<L>;
  const ledger = options.ledger;
  // The ledger's two methods, read once as well (a wrapper's getter that throws is the caller's bad input, not a
  // failure of the store) and called on the ledger.
  const method = (name: 'publish' | 'checkPublish'): unknown => {
    try {
      return ledger?.[name];
    } catch (err) {
      throw new LedgerError('INVALID_ARGUMENT', `compact options: reading its ledger's ${name} failed`, { cause: err });
    }
  };
  const publish = method('publish');
  const checkPublish = method('checkPublish');
  if (typeof publish !== 'function')
    throw new LedgerError('INVALID_ARGUMENT', 'compact needs a ledger (an object with publish)');
  if (typeof options.model !== 'function')
    throw new LedgerError('INVALID_ARGUMENT', 'compact needs a model adapter: (request) => Promise<response>');
  // A scope publish would refuse is refused before the model is asked; its principal is the one the manifest names.
  const { principal } = parsePublishScope(options.scope);
  // expectedPrev, covers or signal given in the scope rather than beside it: refused in compact's words, before the
  // model is asked (publish would refuse it too, naming its own options, and a wrapper ledger only after the model).
  refuseOptionsInScope(options.scope, options as unknown as Record<string, unknown>, SCOPE_CALLS.compact);
  checkByteBound('maxSummaryBytes', options.maxSummaryBytes);
  throwIfCancelled(options.signal);
  const publishOptions: Parameters<PublishingLedger['publish']>[2] = {};
  if (options.signal) publishOptions.signal = options.signal;
  // Whatever was given, so publish judges it (a `null` or `0` is INVALID_ARGUMENT there, not dropped here).
  if (options.covers !== undefined) publishOptions.covers = options.covers;
  if (options.expectedPrev !== undefined) publishOptions.expectedPrev = options.expectedPrev;
  // What publish would refuse whatever the summary, refused before the model is asked: the transcript of a principal
  // that may not publish here (revoked, not granted, denied by the authorizer) never goes to the provider, and a run
  // whose expectedPrev is no longer the head spends no model call.
  // Ended at the abort as the model's call is, even when a wrapper's checkPublish does not pass the signal on (it only
  // reads: what it goes on doing is dropped). Not publish: an append that commits after the abort is published.
  if (typeof checkPublish === 'function')
    await untilCancelled(
      Promise.resolve(Reflect.apply(checkPublish, ledger, [options.scope, { ...publishOptions }])),
      options.signal,
    );
  const request = requestOf(options);
  // Taken before the model is asked: an adapter may change the request it is given.
  const instructions = leadingSystem(request.messages);
  throwIfCancelled(options.signal); // aborted while checkPublish ran (a wrapper's may not look at the signal)
  const response = await askModel(options, request);
  throwIfCancelled(options.signal);
  let value: unknown;
  try {
    value = extractSummary(response);
  } catch (err) {
    if (isHandoffLedgerError(err)) throw err;
    // A response whose fields throw as they are read (a getter, a proxy of a hand-written adapter): the adapter's failure.
    throw new LedgerError('MODEL_FAILED', 'the model adapter returned a response that could not be read', {
      cause: err,
    });
  }
  // Publish step 2 runs again inside the ledger; this pass gives a typed summary and fails early.
  const { summary } = validateSummary(value, options.maxSummaryBytes ?? Number.MAX_SAFE_INTEGER);
  const receipt = (await Reflect.apply(publish, ledger, [options.scope, summary, publishOptions])) as Awaited<
    ReturnType<L['publish']>
  >;
  return {
    receipt,
    summary,
    context: [...instructions, resumeContext({ summary, id: receipt.id, seq: receipt.seq, manifest: { principal } })],
  };
}
