/**
 * What the model is asked for at compaction time: the `submit_handoff` tool (the summary is its input)
 * or, for APIs with structured output, a response format with the same schema. Either way the answer
 * goes to the Harness, never to the filesystem, so the user's file permissions play no part.
 */
import { summaryJsonSchema } from '../summary/summary.js';
import { LedgerError } from '../errors.js';
import { readOptionFields, shownValue, typeName, typeWithArticle } from '../../store/errors.js';
import { indented, quoted } from './framing.js';
import type {
  ModelFinishReason,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelResponseFormat,
  ModelToolCall,
  ModelToolDefinition,
} from './model.js';

export const SUBMIT_HANDOFF = 'submit_handoff';

/** The `submit_handoff` tool definition. The Harness handles the call itself; it touches no file. */
export const submitHandoffTool: ModelToolDefinition = Object.freeze({
  name: SUBMIT_HANDOFF,
  description:
    'Submit the handoff summary of this session so work can continue in a fresh context. ' +
    'Call it exactly once. The Harness stores the summary; do not write it to a file.',
  inputSchema: summaryJsonSchema,
});

/** The structured-output format for model APIs that constrain the whole answer to a JSON Schema. */
export const handoffResponseFormat: ModelResponseFormat = Object.freeze({
  type: 'json_schema',
  name: 'handoff_summary',
  description: 'The handoff summary of this session',
  schema: summaryJsonSchema,
  strict: false,
});

/** How the summary is requested: through the `submit_handoff` tool, or as structured output. */
export type CompactionMode = 'tool' | 'structured';

export const DEFAULT_COMPACTION_INSTRUCTIONS =
  'The context is nearly full. Write a handoff summary of the session so far: the task, where it stands, ' +
  'the next steps in order, decisions, open questions and the project files that matter. ' +
  'The next context will contain only this summary, so include everything needed to continue.';

/**
 * The sentence that ends the compaction instruction: how to answer, by the mechanism the request asks through. An
 * adapter whose API asks another way than the request's mode (Anthropic's forced tool, Gemini's response schema) sends
 * the sentence of the way it asks (`askedAs`, ../adapters/shared.ts), so the model is never told to call a tool it is
 * not offered, nor to answer with JSON when it is made to call a tool.
 */
export const ANSWER_HOW: Readonly<Record<CompactionMode, string>> = Object.freeze({
  tool: `Call ${SUBMIT_HANDOFF} exactly once with the summary.`,
  structured: 'Answer only with the summary as JSON matching the response schema.',
});

export interface CompactionRequestOptions {
  /**
   * The context to summarize (for example the messages since the last compaction): one message at least, and one at
   * least that is not a system message.
   */
  messages: readonly ModelMessage[];
  mode?: CompactionMode | undefined;
  instructions?: string | undefined;
  maxOutputTokens?: number | undefined;
}

/**
 * Builds the request that asks a model for the handoff summary. Only `submit_handoff` is offered.
 * @throws LedgerError `INVALID_ARGUMENT` for a transcript that is not a list of messages or holds none, or only system
 *   messages (there is nothing to summarize: a model asked anyway would write a summary of nothing, or make one up), a
 *   `mode` other than `tool` or `structured`, `instructions` that are not a string, a `maxOutputTokens` that is not a
 *   whole number from 1, or a transcript that throws as it is read (a message's getter, a revoked proxy)
 */
export function compactionRequest(options: CompactionRequestOptions): ModelRequest {
  if (typeof options !== 'object' || options === null)
    throw new LedgerError('INVALID_ARGUMENT', 'compactionRequest needs { messages }');
  // Each field read once (a getter that throws, or a name it does not know: INVALID_ARGUMENT naming it).
  options = readOptionFields(
    options,
    ['messages', 'mode', 'instructions', 'maxOutputTokens'],
    'compactionRequest options',
    LedgerError,
  ) as CompactionRequestOptions;
  const transcript = readTranscript(options.messages, (messages) => {
    checkMessages(messages);
    return answeredTranscript(messages);
  });
  const mode = options.mode ?? 'tool';
  if (mode !== 'tool' && mode !== 'structured')
    throw new LedgerError('INVALID_ARGUMENT', `mode must be 'tool' or 'structured', not ${shownValue(mode)}`);
  if (options.instructions !== undefined && typeof options.instructions !== 'string')
    throw new LedgerError('INVALID_ARGUMENT', 'instructions must be a string');
  const how = ANSWER_HOW[mode];
  const request: ModelRequest = {
    purpose: 'compaction',
    messages: [
      ...transcript,
      { role: 'user', content: `${wellFormed(options.instructions ?? DEFAULT_COMPACTION_INSTRUCTIONS)}\n\n${how}` },
    ],
  };
  if (mode === 'tool') {
    request.tools = [submitHandoffTool];
    request.toolChoice = { name: SUBMIT_HANDOFF };
  } else {
    request.responseFormat = handoffResponseFormat;
  }
  if (options.maxOutputTokens !== undefined) {
    // NaN or Infinity would go out as null, which providers read as "no limit": the caller's bound would be lost.
    if (!Number.isSafeInteger(options.maxOutputTokens) || options.maxOutputTokens < 1)
      throw new LedgerError('INVALID_ARGUMENT', 'maxOutputTokens must be a whole number of tokens from 1');
    request.maxOutputTokens = options.maxOutputTokens;
  }
  return request;
}

const ROLES: ReadonlySet<unknown> = new Set(['system', 'user', 'assistant', 'tool']);

/**
 * `read(messages)`, with a transcript that throws as it is read (a message's getter, a revoked proxy: the Harness's
 * objects) refused as the other transcripts that are no list of messages are, not passed on as its TypeError.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function readTranscript<T>(messages: unknown, read: (messages: readonly ModelMessage[]) => T): T {
  try {
    return read(messages as readonly ModelMessage[]);
  } catch (err) {
    if (err instanceof LedgerError) throw err;
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'the transcript could not be read (a getter or proxy of it threw: the cause)',
      { cause: err },
    );
  }
}

/**
 * The transcript as `ModelMessage` says: what a Harness of plain JavaScript may hand over otherwise (no list, a string,
 * whose characters would go to the model one message each, a `null` message) is refused before the model is asked, and
 * so is an empty one (a request of the instruction alone asks for a summary of nothing), and one of system messages
 * only (the Harness's instructions, no turn of the session).
 * @throws LedgerError `INVALID_ARGUMENT`, naming the first message that is not one
 */
function checkMessages(messages: unknown): void {
  if (!Array.isArray(messages))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `the transcript must be a list of messages, not ${typeWithArticle(messages)}`,
    );
  if (messages.length === 0)
    throw new LedgerError('INVALID_ARGUMENT', 'the transcript holds no messages: there is nothing to summarize');
  messages.forEach((m: unknown, i) => {
    const bad = (what: string) => new LedgerError('INVALID_ARGUMENT', `transcript message ${i}: ${what}`);
    if (typeof m !== 'object' || m === null) throw bad(`not a message (${typeName(m)})`);
    const { role, content, toolCallId, toolCalls } = m as Record<string, unknown>;
    if (!ROLES.has(role)) throw bad('role must be system, user, assistant or tool');
    // `null` is an absent field (JSON, a nullable column), and an assistant turn that only calls tools may carry no
    // text: `content: null`, as the provider APIs return it.
    const onlyCalls = role === 'assistant' && Array.isArray(toolCalls) && toolCalls.length > 0;
    if (typeof content !== 'string' && !(onlyCalls && (content === null || content === undefined)))
      throw bad('content must be a string');
    if (toolCallId !== undefined && toolCallId !== null && typeof toolCallId !== 'string')
      throw bad('toolCallId must be a string');
    if (
      toolCalls !== undefined &&
      toolCalls !== null &&
      (!Array.isArray(toolCalls) ||
        toolCalls.some(
          (c: unknown) =>
            typeof c !== 'object' ||
            c === null ||
            typeof (c as { id?: unknown }).id !== 'string' ||
            typeof (c as { name?: unknown }).name !== 'string',
        ))
    )
      throw bad('toolCalls must be a list of { id, name, input }');
  });
  // The Harness's instructions alone (a system prompt, a handoff kept as a system message) are no session to hand
  // off: the model would be asked for a summary of its instructions, or make one up.
  if (messages.every((m: { role: unknown }) => m.role === 'system'))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'the transcript holds only system messages: there is nothing to summarize',
    );
}

/**
 * Text as it is sent: a lone surrogate (a tool's output or a file cut in the middle of a character) as U+FFFD, as
 * UTF-8 encodes it. Serialized as JSON it would go out as an escape no provider takes: Anthropic's API refuses the
 * request (400, "no low surrogate in string"), so a transcript holding one could not be compacted at all.
 */
function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

/** How deep `wellFormedInput` looks into a parsed input: far deeper than a tool's arguments nest, a bound on its stack. */
const INPUT_DEPTH = 512;

/**
 * A tool call's input as it is sent: a string (raw arguments) well formed, and in a parsed value (plain objects and
 * arrays, as JSON.parse gives them, which the adapters send as they are: Anthropic's `tool_use.input`, the AI SDK's
 * parts) every string and every key well formed, down to `INPUT_DEPTH` levels (deeper: as it is). Only what holds a
 * change is copied (an object with its keys in order, an array with its holes); the rest is the same value. Two keys
 * that become one (`a\ud800`, `a\udc00`) keep the later one's value, as JSON.parse keeps of a key given twice. Anything
 * else (a number, a Date, a class instance, a reference back into the value) as it is. A getter or proxy that throws
 * is the transcript's (`readTranscript`).
 */
export function wellFormedInput(value: unknown, depth = 0, done = new Map<object, unknown>()): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (typeof value !== 'object' || value === null || depth >= INPUT_DEPTH) return value;
  // A value met again is what it became (a shared part is walked once); one still being walked (a cycle) as it is.
  if (done.has(value)) return done.get(value);
  done.set(value, value);
  let out: unknown = value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) continue;
      const item: unknown = value[i];
      const made = wellFormedInput(item, depth + 1, done);
      if (made !== item) (copy ??= value.slice())[i] = made;
    }
    out = copy ?? value;
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    // A plain object of any realm (its prototype's prototype is null), or one without a prototype.
    if (proto === null || Object.getPrototypeOf(proto) === null) {
      const entries = Object.keys(value).map((k): [string, unknown, boolean] => {
        const v: unknown = (value as Record<string, unknown>)[k];
        const key = wellFormed(k);
        const made = wellFormedInput(v, depth + 1, done);
        return [key, made, key !== k || made !== v];
      });
      // fromEntries defines each key (a `__proto__` key stays a key, not the copy's prototype).
      if (entries.some(([, , changed]) => changed)) out = Object.fromEntries(entries.map(([k, v]) => [k, v]));
    }
  }
  done.set(value, out);
  return out;
}

/**
 * A tool call as it is sent: its id and its input well formed (`wellFormed`, `wellFormedInput`): they go into the
 * provider's JSON body as the text does. The same object when neither changes.
 */
function wellFormedCall(c: ModelToolCall): ModelToolCall {
  const id = wellFormed(c.id);
  const input = wellFormedInput(c.input);
  return id === c.id && input === c.input ? c : { ...c, id, input };
}

/**
 * A message as every adapter expects it: what `checkMessages` lets through beyond the type (a `null` toolCallId or
 * toolCalls, an assistant turn that only calls tools with `content: null` or none) made what the type says: absent
 * fields left out, no text as `''` (which the adapters read as a turn that only calls tools), and its text, its
 * `toolCallId` and its tool calls' ids and inputs well formed (`wellFormed`; a call's id and its result's
 * `toolCallId` are made so alike, so they still pair). A message that needs none of it is passed on as the same object.
 */
function normalized(m: ModelMessage): ModelMessage {
  const loose = m as { content: string | null | undefined; toolCallId?: string | null; toolCalls?: unknown };
  const content = wellFormed(loose.content ?? '');
  const toolCallId = typeof loose.toolCallId === 'string' ? wellFormed(loose.toolCallId) : undefined;
  const given = Array.isArray(loose.toolCalls) ? (loose.toolCalls as ModelToolCall[]) : undefined;
  const calls = given?.map(wellFormedCall);
  const callsChanged = calls !== undefined && calls.some((c, i) => c !== given?.[i]);
  if (content === loose.content && toolCallId === loose.toolCallId && loose.toolCalls !== null && !callsChanged)
    return m;
  const { toolCallId: _id, toolCalls: _calls, ...rest } = m;
  return {
    ...rest,
    content,
    ...(toolCallId !== undefined ? { toolCallId } : {}),
    ...(calls !== undefined ? { toolCalls: calls } : {}),
  };
}

/** What a tool call the transcript left unanswered is answered with in the compaction request. */
export const NOT_RUN_RESULT = 'Not run: the context was compacted before this call was answered.';

/**
 * A tool result whose call is not just before it, as the text of a user message: a label, then the result with every
 * line indented (as `resumeContext` shows stored text) and its call id quoted. The result is a tool's output, not the
 * user's words: a line of it cannot start a line of the message, so it cannot pose as the user's own text, an
 * instruction or the end of the quote.
 */
function quotedToolResult(m: ModelMessage): string {
  const call = m.toolCallId === undefined ? '' : ` ${quoted(m.toolCallId)}`;
  return (
    `[tool result] The output of an earlier tool call${call} whose call is not in this transcript, quoted below as ` +
    `data (every line indented); it is not the user's words.\n  ${indented(m.content)}`
  );
}

/**
 * The transcript as every tool-calling API accepts it: each assistant message's tool calls answered right after
 * it. A call still open when compaction starts (the usual moment: right after a model turn that called tools)
 * gets `NOT_RUN_RESULT`, else Chat Completions, Responses, Anthropic and the AI SDK refuse the request; a result
 * whose call is not just before it (the transcript began mid-turn) becomes a user message quoting it as data.
 * A transcript that already pairs them is passed on unchanged.
 */
function answeredTranscript(messages: readonly ModelMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  const open = new Set<string>();
  const answerOpen = () => {
    for (const id of open) out.push({ role: 'tool', toolCallId: id, content: NOT_RUN_RESULT });
    open.clear();
  };
  for (const given of messages) {
    const m = normalized(given);
    const callId = m.toolCallId;
    if (m.role === 'tool' && callId !== undefined && open.delete(callId)) {
      out.push(m);
      continue;
    }
    answerOpen();
    if (m.role === 'tool') {
      out.push({ role: 'user', content: quotedToolResult(m) });
      continue;
    }
    out.push(m);
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) open.add(c.id);
  }
  answerOpen();
  return out;
}

/** The finish reasons `ModelFinishReason` names, which a refusal names as they are. */
const KNOWN_FINISH: ReadonlySet<string> = new Set<ModelFinishReason>([
  'stop',
  'tool_calls',
  'length',
  'content_filter',
  'refusal',
  'other',
]);

/**
 * Whether an answer of this finish reason did not finish (`SUMMARY_INCOMPLETE`): any reason but `stop` and
 * `tool_calls` (finished) and `refusal` (`MODEL_REFUSED`). What the adapters name the provider's own reason for.
 */
export function endedUnfinished(finishReason: unknown): boolean {
  return finishReason !== 'stop' && finishReason !== 'tool_calls' && finishReason !== 'refusal';
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new LedgerError('SUMMARY_INVALID', `${what} is not JSON`, { cause: err });
  }
}

/**
 * Takes the summary out of a model response, before schema validation: the `submit_handoff` input,
 * else the parsed structured output, else the answer text parsed as JSON.
 * @throws LedgerError `MODEL_REFUSED` (finish reason `refusal`), `SUMMARY_INCOMPLETE` (the answer did not
 *   finish: any other finish reason than `stop` or `tool_calls`, `length` cut off at the output limit,
 *   `content_filter` stopped or withheld by a filter, `other`), `SUMMARY_EMPTY` (no answer), `SUMMARY_INVALID` (not JSON, other tools called, or
 *   `submit_handoff` called more than once), `MODEL_FAILED` (a response whose fields throw as they are read: a
 *   getter, a revoked proxy of a hand-written adapter; the error its cause). A `toolCalls` or `output` of `null` is
 *   read as absent.
 */
export function extractSummary(response: ModelResponse): unknown {
  try {
    return summaryOf(response);
  } catch (err) {
    if (err instanceof LedgerError) throw err;
    throw new LedgerError('MODEL_FAILED', 'the model adapter returned a response that could not be read', {
      cause: err,
    });
  }
}

/** `extractSummary`'s reading, its errors as they come. */
function summaryOf(response: ModelResponse): unknown {
  // What a hand-written adapter may pass on as it came, breaking the declared type: coded refusals, not TypeErrors.
  if (typeof response !== 'object' || response === null)
    throw new LedgerError('SUMMARY_EMPTY', `the model adapter returned no response (${shownValue(response)})`);
  // `null` is an absent field here too (an SDK's `toolCalls: null` or `output: null` passed on as it came), as it is in
  // the transcript: the answer is then looked for where it is (the text), not refused or taken to be `null`.
  const toolCalls: unknown = response.toolCalls;
  if (
    toolCalls !== undefined &&
    toolCalls !== null &&
    (!Array.isArray(toolCalls) || toolCalls.some((c: unknown) => typeof c !== 'object' || c === null))
  )
    throw new LedgerError('SUMMARY_INVALID', 'the model adapter returned toolCalls that are not a list of tool calls');
  if (response.finishReason === 'refusal') {
    // Words that are not a string (an SDK's `null` passed on as it came) are no words, not a TypeError.
    // The model's words are foreign text: quoted as shownValue quotes a value (bounded, nothing a terminal acts on left
    // raw: C1 controls such as the one-byte CSI, DEL, bidirectional overrides, which JSON.stringify leaves).
    const refusal: unknown = response.refusal;
    const words = typeof refusal === 'string' ? `: ${shownValue(refusal, 200)}` : '';
    throw new LedgerError('MODEL_REFUSED', `the model refused to write the summary${words}`);
  }
  // A truncated answer can still parse (a cut-off array, a shorter string); it is never a handoff.
  const finishReason: unknown = response.finishReason;
  if (endedUnfinished(finishReason)) {
    // A reason of the type is named as it is; anything else a hand-written adapter passed on (a provider's own text, a
    // symbol, an object whose toString throws) through shownValue, never as a template would make it text.
    const named =
      typeof finishReason === 'string' && KNOWN_FINISH.has(finishReason) ? finishReason : shownValue(finishReason);
    // The provider's own word for it (`pause_turn`, `MALFORMED_FUNCTION_CALL`): foreign text, quoted and bounded.
    const given: unknown = response.providerReason;
    const provider = typeof given === 'string' && given !== '' ? `, the provider's ${shownValue(given, 100)}` : '';
    throw new LedgerError(
      'SUMMARY_INCOMPLETE',
      `the model did not finish its summary (finish reason ${named}${provider})`,
    );
  }
  const calls = response.toolCalls ?? [];
  const other = calls.find((c) => c.name !== SUBMIT_HANDOFF);
  if (other) {
    throw new LedgerError(
      'SUMMARY_INVALID',
      `the model called ${shownValue(other.name, 100)}; only ${SUBMIT_HANDOFF} is handled during compaction`,
    );
  }
  if (calls.length > 1)
    throw new LedgerError('SUMMARY_INVALID', `the model called ${SUBMIT_HANDOFF} ${calls.length} times`);
  const call = calls[0];
  if (typeof call?.input === 'string' && call.input.trim() === '')
    throw new LedgerError('SUMMARY_EMPTY', `the model called ${SUBMIT_HANDOFF} with no input`);
  if (call) return typeof call.input === 'string' ? parseJson(call.input, `the ${SUBMIT_HANDOFF} input`) : call.input;
  if (response.output !== undefined && response.output !== null) return response.output;
  // As with the refusal: an answer an adapter passed on as `null` is no answer, not a TypeError.
  const text: unknown = response.text;
  if (text === undefined || text === null || (typeof text === 'string' && text.trim() === '')) {
    throw new LedgerError('SUMMARY_EMPTY', 'the model returned no summary');
  }
  if (typeof text !== 'string')
    throw new LedgerError('SUMMARY_INVALID', `the model answer is not text (${typeof text})`);
  return parseJson(text, 'the model answer');
}
